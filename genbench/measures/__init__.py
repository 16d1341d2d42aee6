"""Generalization measures: the registry, the context a measure sees, and the built-in catalogue."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".context": ("BudgetExceeded", "MeasureContext", "TrainingSet"),
    ".files": ("import_measure_file",),
    ".registry": ("Measure", "get_measure", "list_measures", "register_measure", "resolve_measures"),
})  # imported on first use
