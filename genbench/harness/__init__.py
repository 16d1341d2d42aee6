"""The harness: run measures on every model of a zoo, with a content-keyed cache and per-model failures, and
the conformance suite that runs one measure the way the harness does."""
from .check import CheckReport, check_measure
from .evaluate import evaluate, evaluate_one
from .values import load_values, save_values, values_path

__all__ = ["CheckReport", "check_measure", "evaluate", "evaluate_one", "load_values", "save_values", "values_path"]
