"""genbench: a benchmark of generalization measures on zoos of trained networks."""
from .version import __version__  # noqa: F401
from .errors import GenbenchError  # noqa: E402
from .harness import check_measure, evaluate  # noqa: E402
from .measures import (  # noqa: E402
    BudgetExceeded, MeasureContext, get_measure, list_measures, register_measure,
)
from .scoring import FragilityReport, Scores, audit, score  # noqa: E402
from .zoo import Zoo, build_zoo, load_zoo  # noqa: E402

__all__ = ["BudgetExceeded", "FragilityReport", "GenbenchError", "MeasureContext", "Scores", "Zoo", "__version__",
           "audit", "build_zoo", "check_measure", "evaluate", "get_measure", "list_measures", "load_zoo",
           "register_measure", "score"]
