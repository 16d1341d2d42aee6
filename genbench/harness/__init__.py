"""The harness: run measures on every model of a zoo, with a content-keyed cache and per-model failures."""
from .evaluate import evaluate, evaluate_one, training_set
from .values import load_values, save_values, values_path

__all__ = ["evaluate", "evaluate_one", "load_values", "save_values", "training_set", "values_path"]
