"""Scores: how well a measure predicts the generalization gap (regression, ranks, intervals), and the
fragility audit of whether that survives small changes of training."""
from .audit import FragilityReport, Thresholds, audit
from .scores import MeasureScores, Scores, score

__all__ = ["FragilityReport", "MeasureScores", "Scores", "Thresholds", "audit", "score"]
