"""genbench: a benchmark of generalization measures on zoos of trained networks."""
__version__ = "0.1.0"

from .errors import GenbenchError  # noqa: E402
from .zoo import Zoo, build_zoo, load_zoo  # noqa: E402

__all__ = ["GenbenchError", "Zoo", "__version__", "build_zoo", "load_zoo"]
