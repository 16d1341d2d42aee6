"""baseline.weight_stats: the statistics-of-weights predictor of Unterthiner et al. 2020 ("Predicting Neural Network
Accuracy from Weights"). Per layer, the mean, variance and 0/25/50/75/100% quantiles of its final weights and of its
biases, concatenated into one feature vector per model, fed to a regressor chosen inside each training fold.

A layer is a module's weight of two or more dimensions (a dense or convolution kernel) with that module's bias, in
the model's module order (the checkpoint's own key order is alphabetical: a ResNet's head would sort before its
stem). Batchnorm's scale and shift (1-D) and running statistics are not layers and are left out: a zoo that varies
batchnorm keeps the same layers, and the paper's networks had none. When every model has the same layers (names and
shapes), every layer is used (the paper's design); otherwise (a zoo that varies depth or width) the first layer, the
last layer (the head) and all layers pooled. A tensor with a non-finite entry gets NaN statistics; the regressors
impute them with the training fold's median (and mark them). A statistic no model has (a bias every model lacks) is
not a feature.

The regressor: ridge regression (median-imputed, standardised, penalty chosen by RidgeCV as recipe.ridge does) or
gradient-boosted trees, whichever has the smaller pooled MSE over an inner 3-fold split of the training fold only
(ridge on a tie), refitted on the whole training fold; nothing of the held-out models is seen. Deterministic: fixed
splits and seeds, single-threaded trees."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ..errors import GenbenchError
from ..zoo.storage import Zoo
from .recipe import ridge

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
STATS = ("mean", "var", *(f"q{round(q * 100)}" for q in QUANTILES))  # per tensor, in this order
INNER_FOLDS = 3  # the inner split of a training fold that chooses the regressor
SEED = 0         # the inner split's shuffle and the trees' random_state

# A layer: (name, weight of >= 2 dimensions, the same module's bias or None), as float64 arrays.
Layer = tuple[str, np.ndarray, "np.ndarray | None"]
# A model's parts: (label, tensor or None) whose statistics make its feature vector.
Parts = list[tuple[str, "np.ndarray | None"]]


def tensor_stats(x: np.ndarray | None) -> np.ndarray:
    """mean, variance and the QUANTILES of a tensor's entries (float64); NaN for an absent or empty tensor or one
    with a non-finite entry."""
    if x is None or np.size(x) == 0:
        return np.full(len(STATS), np.nan)
    x = np.asarray(x, dtype=np.float64).ravel()
    if not np.isfinite(x).all():
        return np.full(len(STATS), np.nan)
    return np.concatenate([[x.mean(), x.var()], np.quantile(x, QUANTILES)])


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor (any float dtype, bfloat16 included)
        return value.detach().double().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def state_layers(state: Mapping[str, Any]) -> list[Layer]:
    """The layers of a state dict, in its order (a module's state_dict() is in module order): each `*.weight` of
    two or more dimensions, with the `*.bias` of the same module. Batchnorm's 1-D scale and shift are not layers."""
    out = []
    for key, value in state.items():
        if key != "weight" and not key.endswith(".weight"):
            continue
        w = _array(value)
        if w.ndim < 2:
            continue
        prefix = key[: -len("weight")]
        bias = state.get(prefix + "bias")
        out.append((prefix.rstrip("."), w, None if bias is None else _array(bias)))
    return out


def signature(ls: Sequence[Layer]) -> tuple:
    """What must agree between models for their layers to line up: names and shapes of weights and biases."""
    return tuple((n, w.shape, None if b is None else b.shape) for n, w, b in ls)


def layer_parts(ls: Sequence[Layer]) -> Parts:
    """Every layer's weights, then its biases (the paper's design)."""
    return [part for n, w, b in ls for part in ((f"{n}.weight", w), (f"{n}.bias", b))]


def summary_parts(ls: Sequence[Layer]) -> Parts:
    """For models whose layers differ: the first layer, the last layer (the head) and every layer pooled."""
    biases = [b.ravel() for _, _, b in ls if b is not None]
    (_, w0, b0), (_, w1, b1) = ls[0], ls[-1]
    return [("first.weight", w0), ("first.bias", b0), ("last.weight", w1), ("last.bias", b1),
            ("all.weight", np.concatenate([w.ravel() for _, w, _ in ls])),
            ("all.bias", np.concatenate(biases) if biases else None)]


def _stats(parts: Parts) -> list[tuple[str, np.ndarray | None]]:
    return [(label, None if x is None else tensor_stats(x)) for label, x in parts]


def design(models: Iterable[Sequence[Layer]]) -> tuple[np.ndarray, list[str], str]:
    """The feature matrix [n, p] of models given as their layers, its column names and how it was made (a sentence
    for the scores' notes). Each model's tensors are reduced to their statistics as it comes, so `models` may be a
    generator that loads one model at a time."""
    signatures, per_layer, summary = [], [], []
    for i, ls in enumerate(models):
        if not ls:
            raise GenbenchError(f"model {i} has no weight of two or more dimensions: it has no layer to describe")
        signatures.append(signature(ls))
        per_layer.append(_stats(layer_parts(ls)))
        summary.append(_stats(summary_parts(ls)))
    if not signatures:
        raise GenbenchError("no models to describe")
    same = len(set(signatures)) == 1
    rows = per_layer if same else summary
    labels = [label for label, _ in rows[0]]
    keep = [j for j in range(len(labels)) if any(r[j][1] is not None for r in rows)]  # a part some model has
    nan = np.full(len(STATS), np.nan)
    x = np.array([np.concatenate([nan if r[j][1] is None else r[j][1] for j in keep]) for r in rows])
    names = [f"{labels[j]}:{s}" for j in keep for s in STATS]
    tensors = "weights and biases" if any(lab.endswith(".bias") for lab in (labels[j] for j in keep)) else "weights"
    if same:
        how = (f"per layer: the {len(signatures[0])} layers every model has (same names and shapes), "
               f"{len(STATS)} statistics of each one's {tensors}: {x.shape[1]} features")
    else:
        how = ("of the first layer, the last layer (the head) and all layers pooled, as the models' layers differ "
               f"(names or shapes): {len(STATS)} statistics of their {tensors}, {x.shape[1]} features")
    return x, names, how


def zoo_layers(zoo: Zoo, mid: str) -> list[Layer]:
    """The layers of one model of a zoo at its final weights (checkpoint verified, in module order)."""
    try:
        model = zoo.load_model(mid)
    except GenbenchError:
        raise
    except Exception as e:  # a checkpoint that does not load into its architecture
        raise GenbenchError(f"cannot read the weights of model {mid!r} of zoo {zoo.name!r}: "
                            f"{type(e).__name__}: {e}") from None
    return state_layers(model.state_dict())


def weight_features(zoo: Zoo, ids: Sequence[str]) -> tuple[np.ndarray, list[str], str]:
    """baseline.weight_stats' features of these models (rows in the order of `ids`), their names and how they were
    made (per layer, or first / last / pooled when the models' layers differ)."""
    return design(zoo_layers(zoo, mid) for mid in ids)


def candidates() -> tuple[tuple[str, Any], ...]:
    """The regressors a training fold chooses between: ridge first (it wins a tie), then gradient-boosted trees."""
    impute = SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True)
    trees = GradientBoostingRegressor(n_estimators=50, learning_rate=0.1, max_depth=3, max_features="sqrt",
                                      subsample=1.0, random_state=SEED)
    return (("ridge", ridge(clone(impute), StandardScaler())), ("trees", make_pipeline(clone(impute), trees)))


class ChosenInFold(RegressorMixin, BaseEstimator):
    """The candidate with the smallest pooled MSE over an inner `folds`-fold split (shuffled with `seed`) of the
    models it is fitted on, refitted on all of them (the first candidate on a tie). `choice_` names it, `inner_mse_`
    gives every candidate's, and `phi_` repeats `choice_` so that the scorer's cross-validation counts the training
    folds that chose each (it counts a fit's phi_)."""

    def __init__(self, candidates: tuple[tuple[str, Any], ...] | None = None, folds: int = INNER_FOLDS,
                 seed: int = SEED):
        self.candidates = candidates
        self.folds = folds
        self.seed = seed

    def fit(self, x: np.ndarray, y: np.ndarray) -> "ChosenInFold":
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        options = self.candidates if self.candidates is not None else candidates()
        k = min(self.folds, len(y))
        if k < 2:
            raise ValueError(f"choosing a regressor needs at least 2 models, got {len(y)}")
        splits = list(KFold(k, shuffle=True, random_state=self.seed).split(x))
        mse = {}
        for name, est in options:
            sse = 0.0
            for train, test in splits:
                pred = clone(est).fit(x[train], y[train]).predict(x[test])
                sse += float(np.sum((y[test] - pred) ** 2))
            mse[name] = sse / len(y)
        self.inner_mse_ = mse
        self.choice_ = min(mse, key=lambda n: mse[n])  # the first of equals: ridge on a tie
        self.phi_ = self.choice_
        self.model_ = clone(dict(options)[self.choice_]).fit(x, y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.model_.predict(np.asarray(x, dtype=float))


def weight_stats_estimator() -> ChosenInFold:
    """The regressor of baseline.weight_stats: ridge or gradient-boosted trees, chosen inside each training fold."""
    return ChosenInFold()
