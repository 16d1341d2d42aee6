"""What the training recipe already says: the zoo's varied hyperparameters as a design (one-hot levels and their
pairwise interactions, ridge penalty chosen inside each training fold), and the same fit with a measure's columns
added. The k-fold R^2 of the second minus that of the first, on the same folds and the same paired resamples, is
what a measure adds to the recipe (`delta_r2`)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, PolynomialFeatures, StandardScaler

from ..zoo.storage import Zoo

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


def _as_float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _log(x: np.ndarray) -> np.ndarray:
    return np.log(np.asarray(x, dtype=float))


class RecipePlus(RegressorMixin, BaseEstimator):
    """Ridge regression on the recipe's features plus a measure's columns (phi applied, a missing value replaced by
    the training models' median, standardised). Rows are [recipe levels ..., measure columns ...] (object dtype);
    `recipe` says how many leading columns are levels. phi "select" keeps the better training fit of linear and log
    (offered only when every value is positive), as PhiRegression does."""

    def __init__(self, recipe: int = 0, transform: str = "linear"):
        self.recipe = recipe
        self.transform = transform

    def _pipeline(self, phi: str, width: int) -> Any:
        measure = make_pipeline(FunctionTransformer(_log if phi == "log" else _as_float),
                                SimpleImputer(strategy="median"), StandardScaler())
        return ridge(ColumnTransformer([("recipe", levels(), list(range(self.recipe))),
                                        ("measure", measure, list(range(self.recipe, width)))]))

    def fit(self, x: np.ndarray, y: np.ndarray) -> "RecipePlus":
        options = ["linear", "log"] if self.transform == "select" else [self.transform]
        fits = [(r2_score(y, p.predict(x)), phi, p)
                for phi in options for p in [self._pipeline(phi, x.shape[1]).fit(x, y)]]
        _, self.phi_, self.pipeline_ = max(fits, key=lambda f: f[0])
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.pipeline_.predict(x)


def with_recipe(levels: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The rows RecipePlus fits: the recipe's levels, then the measure's columns."""
    return np.hstack([np.asarray(levels, dtype=object), np.asarray(x, dtype=float).astype(object)])
