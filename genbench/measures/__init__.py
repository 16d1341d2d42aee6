"""Generalization measures: the registry, the context a measure sees, and the built-in catalogue."""
from .context import BudgetExceeded, MeasureContext, TrainingSet
from .files import import_measure_file
from .registry import Measure, get_measure, list_measures, register_measure, resolve_measures

__all__ = ["BudgetExceeded", "Measure", "MeasureContext", "TrainingSet", "get_measure",
           "import_measure_file", "list_measures", "register_measure", "resolve_measures"]
