"""baseline.weight_stats: the statistics-of-weights predictor of Unterthiner et al. 2020 ("Predicting Neural Network
Accuracy from Weights"), the field's strongest simple predictor. Per layer, the mean, variance and the 0/25/50/75/100%
quantiles of its weights and of its biases, read straight from each model's final checkpoint, fed to a regressor
chosen inside each training fold (ridge or gradient-boosted trees, by an inner 3-fold split of that fold only)."""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ..errors import GenbenchError
from ..zoo.storage import Zoo

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
STATS = ("mean", "var", *(f"q{int(q * 100)}" for q in QUANTILES))  # per tensor, in this order
ALPHAS = np.logspace(-4, 4, 17)
INNER_FOLDS = 3

# A layer: (name, weight, bias or None); weight = a parameter of >= 2 dimensions (dense or convolution kernel).
Layer = tuple[str, np.ndarray, "np.ndarray | None"]


def tensor_stats(x: np.ndarray | None) -> np.ndarray:
    """mean, variance and the QUANTILES of a tensor's entries; NaN for an absent tensor or a non-finite entry."""
    if x is None or x.size == 0:
        return np.full(len(STATS), np.nan)
    x = np.asarray(x, dtype=np.float64).ravel()
    if not np.isfinite(x).all():
        return np.full(len(STATS), np.nan)
    return np.concatenate([[x.mean(), x.var()], np.quantile(x, QUANTILES)])


def layers(state: dict[str, Any]) -> list[Layer]:
    """The layers of a state dict in its order: each weight of >= 2 dimensions with the bias of the same module.
    Batchnorm's scale and shift (1-D) and running statistics are left out: they are not a layer's weights."""
    out = []
    for key, value in state.items():
        if key.endswith("weight") and np.ndim(value) >= 2:
            prefix = key[: -len("weight")]
            bias = state.get(prefix + "bias")
            out.append((prefix.rstrip("."), np.asarray(value), None if bias is None else np.asarray(bias)))
    return out


def layer_features(ls: list[Layer]) -> np.ndarray:
    """Every layer's weight statistics, then its bias statistics, concatenated (the paper's design)."""
    return np.concatenate([np.concatenate([tensor_stats(w), tensor_stats(b)]) for _, w, b in ls])


def summary_features(ls: list[Layer]) -> np.ndarray:
    """For models of different shapes: the first layer, the last layer (the head) and every layer pooled."""
    def pooled(parts: list[np.ndarray | None]) -> np.ndarray | None:
        kept = [p.ravel() for p in parts if p is not None]
        return np.concatenate(kept) if kept else None

    first, last = ls[0], ls[-1]
    whole = (None, pooled([w for _, w, _ in ls]), pooled([b for _, _, b in ls]))
    return np.concatenate([np.concatenate([tensor_stats(w), tensor_stats(b)]) for _, w, b in (first, last, whole)])


def signature(ls: list[Layer]) -> tuple:
    """What must agree between models for per-layer features to line up: names and shapes."""
    return tuple((n, w.shape, None if b is None else b.shape) for n, w, b in ls)


def weight_features(zoo: Zoo, ids: list[str]) -> tuple[np.ndarray, str]:
    """The feature matrix [n, p] of these models' final weights and how it was made (per layer, or first / last /
    pooled when the models' layers differ)."""
    from safetensors.numpy import load_file

    table = zoo.table.set_index("model_id")
    per_model = []
    for mid in ids:
        path = zoo.root / str(table.at[mid, "checkpoint"])
        try:
            ls = layers(load_file(path))
        except (OSError, ValueError) as e:
            raise GenbenchError(f"cannot read the checkpoint of model {mid!r} ({path}): {e}") from None
        if not ls:
            raise GenbenchError(f"model {mid!r} of zoo {zoo.name!r} has no weight of two or more dimensions")
        per_model.append(ls)
    if len({signature(ls) for ls in per_model}) == 1:
        return np.stack([layer_features(ls) for ls in per_model]), \
            f"per layer: {len(per_model[0])} layers x (weights, biases) x {len(STATS)} statistics"
    return np.stack([summary_features(ls) for ls in per_model]), (
        f"the models' layers differ, so first layer, last layer and all layers pooled x (weights, biases) x "
        f"{len(STATS)} statistics")


def weight_stats_estimator() -> GridSearchCV:
    """The regressor of baseline.weight_stats: ridge (median-imputed, standardised) or gradient-boosted trees, the
    one with the better R^2 over an inner 3-fold split of the training fold, refitted on the whole training fold."""
    ridge = Pipeline([("impute", SimpleImputer(strategy="median", keep_empty_features=True)),
                      ("scale", StandardScaler()), ("model", RidgeCV(alphas=ALPHAS))])
    trees = HistGradientBoostingRegressor(max_iter=60, learning_rate=0.1, max_leaf_nodes=15, min_samples_leaf=5,
                                          early_stopping=False, random_state=0)
    grid = [{"model": [RidgeCV(alphas=ALPHAS)]},
            {"impute": ["passthrough"], "scale": ["passthrough"], "model": [trees]}]
    return GridSearchCV(ridge, grid, scoring="r2", cv=KFold(INNER_FOLDS, shuffle=True, random_state=0),
                        error_score="raise")
