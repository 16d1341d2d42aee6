"""Scores: how well a measure predicts the generalization gap (regression, ranks, intervals), and the
fragility audit of whether that survives small changes of training."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".audit": ("FragilityReport", "Thresholds", "audit"),
    ".spec": ("MeasureScores",),
    ".scores": ("Scores", "score"),
})  # imported on first use
