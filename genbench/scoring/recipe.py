"""What the training recipe already says: the zoo's varied hyperparameters as a design (one-hot levels and their
pairwise interactions, ridge penalty chosen inside each training fold), and the same fit with a measure's columns
added. The k-fold R^2 of the second minus that of the first, on the same folds and the same paired resamples, is
what a measure adds to the recipe (`delta_r2`)."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures

from ..zoo.storage import Zoo
from .folds import FoldGroup, recipe_plus_fits

ALPHAS = np.logspace(-4, 4, 17)  # the ridge penalties RidgeCV chooses from, inside each training fold
REPLICATE = "seed"


def hparam_design(zoo: Zoo, ids: list[str]) -> pd.DataFrame:
    """The varied hyperparameter axes of the given models (the replicate axis left out), as text levels."""
    t = zoo.table.set_index("model_id").loc[ids]
    axes = [a for a in zoo.hparams if a != REPLICATE and f"hp.{a}" in t.columns and t[f"hp.{a}"].nunique() > 1]
    return t[[f"hp.{a}" for a in axes]].astype(str).reset_index(drop=True)


def ridge(*steps: object) -> Any:
    """A pipeline ending in ridge regression whose penalty is chosen (efficient leave-one-out) on the fold it fits."""
    return make_pipeline(*steps, RidgeCV(alphas=ALPHAS))


def levels() -> Any:
    """The recipe's features: one-hot levels and their pairwise interactions."""
    return make_pipeline(OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                         PolynomialFeatures(2, interaction_only=True, include_bias=False))


def recipe_estimator() -> Any:
    """The fit of baseline.hparams: the gap from the recipe alone."""
    return ridge(levels())


def recipe_features(design: np.ndarray) -> np.ndarray:
    """The recipe's features for every model at once: one-hot levels and their pairwise interactions. Encoding all
    models together changes no fit: a level a training fold lacks is a column of zeros there, which ridge leaves
    at 0, as baseline.hparams' per-fold encoder (which ignores that level) does."""
    return np.asarray(levels().fit_transform(np.asarray(design, dtype=object)), dtype=float)


class RecipePlus(RegressorMixin, BaseEstimator):
    """Ridge regression on the recipe's features plus a measure's columns (phi applied, a missing value replaced by
    the training models' median, standardised on them). Rows are [recipe features ..., measure columns ...]
    (`recipe_features`, then the measure); `recipe` says how many leading columns are the recipe's. phi "select"
    keeps the better training fit of linear and log (offered only when every value is positive), as PhiRegression
    does."""

    def __init__(self, recipe: int = 0, transform: str = "linear"):
        self.recipe = recipe
        self.transform = transform

    def _design(self, x: np.ndarray, phi: str, fit: bool) -> np.ndarray:
        m = np.asarray(x[:, self.recipe:], dtype=float)
        m = np.log(m) if phi == "log" else m
        m = np.where(np.isfinite(m), m, np.nan)
        if fit:
            with warnings.catch_warnings():  # a column without any value: its median is NaN, filled with 0 below
                warnings.simplefilter("ignore", RuntimeWarning)
                median = np.nanmedian(m, 0)
            self.median_ = np.where(np.isfinite(median), median, 0.0)
        m = np.where(np.isnan(m), self.median_, m)
        if fit:
            self.mean_, scale = m.mean(0), m.std(0)
            self.scale_ = np.where(scale > 0, scale, 1.0)
        return np.hstack([np.asarray(x[:, :self.recipe], dtype=float), (m - self.mean_) / self.scale_])

    def fit(self, x: np.ndarray, y: np.ndarray) -> "RecipePlus":
        options = ["linear", "log"] if self.transform == "select" else [self.transform]
        fits = []
        for phi in options:
            z = self._design(x, phi, fit=True)
            reg = RidgeCV(alphas=ALPHAS).fit(z, y)
            fits.append((r2_score(y, reg.predict(z)), phi, reg, self.median_, self.mean_, self.scale_))
        _, self.phi_, self.reg_, self.median_, self.mean_, self.scale_ = max(fits, key=lambda f: f[0])
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.reg_.predict(self._design(x, self.phi_, fit=False))

    def fit_folds(self, x: np.ndarray, y: np.ndarray, group: FoldGroup) -> tuple[np.ndarray, list[str], None]:
        """fit + predict on every training fold of a group at once: held-out predictions [F, t] and the phi of each
        fold (the numbers of fit, fold by fold; folds.py)."""
        options = ["linear", "log"] if self.transform == "select" else [self.transform]
        pred, chosen = recipe_plus_fits(np.asarray(x, dtype=float), y, group, recipe=self.recipe, options=options,
                                        alphas=ALPHAS)
        return pred, [options[i] for i in chosen], None


def with_recipe(features: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The rows RecipePlus fits: the recipe's features, then the measure's columns."""
    return np.hstack([features, np.asarray(x, dtype=float)])
