"""genbench: a benchmark of generalization measures on zoos of trained networks."""
from .lazy import lazy_exports
from .numerics import pin_cpu_numerics

pin_cpu_numerics()  # before torch runs anything: builds bit-identical across x86 machines (genbench/numerics.py)

# Each name is imported on first use (genbench/lazy.py): `import genbench` alone imports neither torch nor sklearn.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".version": ("__version__",),
    ".errors": ("GenbenchError",),
    ".harness": ("check_measure", "evaluate"),
    ".measures": ("BudgetExceeded", "MeasureContext", "get_measure", "list_measures", "register_measure"),
    ".record": ("Record", "load_records", "shown_records"),
    ".scoring": ("FragilityReport", "Scores", "audit", "score"),
    ".zoo": ("Zoo", "build_zoo", "load_zoo"),
})
