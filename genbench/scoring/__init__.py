"""Scores: how well a measure predicts the generalization gap (regression, ranks, intervals)."""
from .scores import MeasureScores, Scores, score

__all__ = ["MeasureScores", "Scores", "score"]
