"""Generalization measures: the registry, the context a measure sees, the built-in catalogue and its checks."""
from .context import BudgetExceeded, MeasureContext, TrainingSet
from .check import CheckReport, check_measure
from .registry import Measure, get_measure, list_measures, register_measure, resolve_measures

__all__ = ["BudgetExceeded", "CheckReport", "check_measure", "Measure", "MeasureContext", "TrainingSet", "get_measure", "list_measures",
           "register_measure", "resolve_measures"]
