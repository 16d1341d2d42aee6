"""Regression scores (DEMOGEN): least squares of the target on phi(signature). Adjusted R^2 on all models; k-fold
R^2 and held-out MSE pooled over the out-of-fold predictions of R shuffles of k-fold cross-validation (what
scikit-learn's cross_val_predict + r2_score compute, averaged over the shuffles); phi chosen inside each training
fold when the measure asks the scorer to select it; a scalar's slope held to its declared direction when asked (a
training fold whose free fit runs the other way predicts the fold's mean); the bootstrap of adjusted R^2 by batched
weighted least squares. The scorer's own estimators are fitted on every training fold at once (folds.py, the same
numbers); any other estimator is cloned and fitted fold by fold."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold

from .folds import FoldGroup, fold_groups, least_squares, phi_fits, ridge_gcv
from .resample import pooled_scores

K_FOLDS = 10
REPEATS = 10          # shuffles of the k-fold split, seeds 0..REPEATS-1
MODELS_PER_FEATURE = 10  # a least-squares score needs n >= MODELS_PER_FEATURE (p + 1) models
BATCHED = True  # the scorer's own estimators fit every fold at once (folds.py); False: clone and fit fold by fold


def enough_models(n: int, p: int) -> bool:
    """The rule for a regression score on p features: n >= 10 (p + 1) models."""
    return n >= MODELS_PER_FEATURE * (p + 1)


def adjusted_r2(r2: float | np.ndarray, n: int, p: int) -> float | np.ndarray:
    """1 - (1 - R^2)(n - 1)/(n - p - 1): R^2 penalised for the number of features p."""
    return 1.0 - (1.0 - r2) * (n - 1) / (n - p - 1)


class PhiRegression(RegressorMixin, BaseEstimator):
    """Least squares of y on phi(x), phi in {linear, log}; "select" picks the one with the better fit on the
    training models (the caller offers it only when every value is positive); `phi_` is the one used.

    `direction` (+1 or -1, one feature only) holds the slope to that sign: non-negative least squares on
    direction * phi(x), so a fit that wants the other sign becomes the training mean (`flat_` says so)."""

    def __init__(self, transform: str = "linear", direction: float | None = None):
        self.transform = transform
        self.direction = direction

    def fit(self, x: np.ndarray, y: np.ndarray) -> "PhiRegression":
        if self.direction is not None and x.shape[1] != 1:
            raise ValueError(f"a direction holds the slope of one feature, got {x.shape[1]}")
        sign = 1.0 if self.direction is None else float(np.sign(self.direction))
        options = ["linear", "log"] if self.transform == "select" else [self.transform]
        fits = []
        for phi in options:
            z = sign * (np.log(x) if phi == "log" else x)
            reg = LinearRegression(positive=self.direction is not None).fit(z, y)
            fits.append((r2_score(y, reg.predict(z)), phi, reg))
        _, self.phi_, self.reg_ = max(fits, key=lambda f: f[0])
        self.sign_ = sign
        self.flat_ = self.direction is not None and not np.any(self.reg_.coef_)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.reg_.predict(self.sign_ * (np.log(x) if self.phi_ == "log" else x))

    def fit_folds(self, x: np.ndarray, y: np.ndarray, group: FoldGroup
                  ) -> tuple[np.ndarray, list[str], np.ndarray]:
        """fit + predict on every training fold of a group at once: held-out predictions [F, t], the phi of each
        fold and whether its held fit was flat (the numbers of fit, fold by fold; folds.py)."""
        if self.direction is not None and x.shape[1] != 1:
            raise ValueError(f"a direction holds the slope of one feature, got {x.shape[1]}")
        options = ["linear", "log"] if self.transform == "select" else [self.transform]
        sign = 1.0 if self.direction is None else float(np.sign(self.direction))
        pred, chosen, flat = phi_fits(x, y, group, options=options, sign=sign, positive=self.direction is not None)
        return pred, [options[i] for i in chosen], flat

    @property
    def slope_(self) -> np.ndarray:
        """The coefficients on phi(x) (with the direction's sign put back)."""
        return self.sign_ * self.reg_.coef_


@dataclass
class CrossValidation:
    """Out-of-fold predictions of R shuffles of k-fold cross-validation and their pooled scores."""

    heldout: np.ndarray                 # [R, n] held-out prediction of every model in each shuffle
    r2: np.ndarray                      # [R] pooled R^2 of each shuffle
    mse: np.ndarray                     # [R] pooled held-out MSE of each shuffle
    fold_mean_r2: float                 # the paper's per-fold mean of R^2, averaged over the shuffles
    chosen: dict[str, int] = field(default_factory=dict)  # how many folds used each phi (PhiRegression only)
    flat: int = 0                       # training folds whose fit ran against the direction and predicted the mean
    folds: int = 0                      # training folds in all (k times the shuffles)

    @property
    def kfold_r2(self) -> float:
        """The score: pooled k-fold R^2, mean over the shuffles."""
        return float(np.mean(self.r2))

    @property
    def kfold_mse(self) -> float:
        """Held-out MSE, mean over the shuffles."""
        return float(np.mean(self.mse))


def cross_validate(estimator: Any, x: np.ndarray, y: np.ndarray, *, k: int = K_FOLDS,
                   repeats: int = REPEATS) -> CrossValidation:
    """Fit a clone of `estimator` on k-1 folds and predict the held-out one, for shuffle seeds 0..repeats-1. The
    scorer's own estimators (a `fit_folds` method, plain RidgeCV) fit every fold at once."""
    fits = _batched(estimator) if BATCHED else None
    if fits is not None:
        return _cross_validate_batched(fits, x, y, k=k, repeats=repeats)
    n = len(y)
    heldout = np.empty((repeats, n))
    fold_r2, chosen, flat, folds = [], {}, 0, 0
    for r in range(repeats):
        for train, test in KFold(k, shuffle=True, random_state=r).split(x):
            est = clone(estimator).fit(x[train], y[train])
            heldout[r, test] = est.predict(x[test])
            folds += 1
            flat += bool(getattr(est, "flat_", False))
            if hasattr(est, "phi_"):
                chosen[est.phi_] = chosen.get(est.phi_, 0) + 1
            if len(test) > 1 and np.ptp(y[test]) > 0:
                fold_r2.append((r, r2_score(y[test], heldout[r, test])))
    r2, mse = zip(*(pooled_scores(y, heldout[r][None]) for r in range(repeats)))
    per_shuffle = [_mean_or_nan([v for s, v in fold_r2 if s == r]) for r in range(repeats)]
    return CrossValidation(heldout=heldout, r2=np.concatenate(r2), mse=np.concatenate(mse),
                           fold_mean_r2=float(np.mean(per_shuffle)), chosen=chosen, flat=flat, folds=folds)


def _batched(estimator: Any) -> Any:
    """The estimator's all-folds fit (fit_folds), RidgeCV's with default settings, or None (fit fold by fold)."""
    if hasattr(estimator, "fit_folds"):
        return estimator.fit_folds
    settings = {k: v for k, v in estimator.get_params().items() if k != "alphas"} \
        if type(estimator) is RidgeCV else None
    if settings is not None and settings == {k: v for k, v in RidgeCV().get_params().items() if k != "alphas"}:
        alphas = np.asarray(estimator.alphas, dtype=float).reshape(-1)

        def ridge_folds(x: np.ndarray, y: np.ndarray, group: FoldGroup) -> tuple[np.ndarray, None, None]:
            xf = np.asarray(x, dtype=float)
            coef, icpt = ridge_gcv(xf[group.train], y[group.train], alphas)
            return np.einsum("ftp,fp->ft", xf[group.test], coef) + icpt[:, None], None, None
        return ridge_folds
    return None


def _mean_or_nan(values: list[float]) -> float:
    """The mean of a shuffle's per-fold R^2, NaN (without numpy's empty-slice warning) when no fold has one: folds of
    one model, or of equal targets."""
    return float(np.mean(values)) if values else float("nan")


def _cross_validate_batched(fits: Any, x: np.ndarray, y: np.ndarray, *, k: int, repeats: int) -> CrossValidation:
    """cross_validate with every training fold of a size fitted at once by `fits` (same folds, same numbers)."""
    n = len(y)
    y = np.asarray(y, dtype=float)
    heldout = np.empty((repeats, n))
    fold_r2: list[list[float]] = [[] for _ in range(repeats)]
    chosen: dict[str, int] = {}
    flat = folds = 0
    for group in fold_groups(n, k, repeats):
        pred, phis, flats = fits(x, y, group)
        heldout[group.shuffle[:, None], group.test] = pred
        folds += len(pred)
        flat += 0 if flats is None else int(np.sum(flats))
        for phi in phis or ():
            chosen[phi] = chosen.get(phi, 0) + 1
        yt = y[group.test]
        if yt.shape[1] > 1:
            ss_tot = ((yt - yt.mean(1, keepdims=True)) ** 2).sum(1)
            r2 = 1.0 - ((yt - pred) ** 2).sum(1) / np.where(ss_tot > 0, ss_tot, 1.0)
            for r, v, ok in zip(group.shuffle, r2, np.ptp(yt, axis=1) > 0):
                if ok:
                    fold_r2[r].append(float(v))
    r2, mse = zip(*(pooled_scores(y, heldout[r][None]) for r in range(repeats)))
    return CrossValidation(heldout=heldout, r2=np.concatenate(r2), mse=np.concatenate(mse),
                           fold_mean_r2=float(np.mean([_mean_or_nan(v) for v in fold_r2])), chosen=chosen, flat=flat,
                           folds=folds)


def _weighted_fit_predict(x_fit: np.ndarray, y: np.ndarray, w: np.ndarray, x_pred: np.ndarray) -> np.ndarray:
    """Weighted least squares with intercept for B weight vectors at once: w [B, n] -> predictions [B, m].
    Features are standardised and a tiny ridge keeps collinear signatures solvable."""
    mean, scale = x_fit.mean(0), x_fit.std(0)
    scale[scale == 0] = 1.0
    a = np.hstack([np.ones((len(x_fit), 1)), (x_fit - mean) / scale])
    b = np.hstack([np.ones((len(x_pred), 1)), (x_pred - mean) / scale])
    gram = np.einsum("bn,ni,nj->bij", w, a, a)
    gram += 1e-9 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(a.shape[1])
    rhs = np.einsum("bn,ni,n->bi", w, a, y)
    coef = np.linalg.solve(gram, rhs[..., None])[..., 0]
    return coef @ b.T


def weighted_r2(y: np.ndarray, pred: np.ndarray, w: np.ndarray) -> np.ndarray:
    """R^2 of predictions [B, n] against y with model multiplicities w [B, n] (NaN without spread)."""
    tot_w = w.sum(1)
    ybar = (w * y).sum(1) / np.where(tot_w > 0, tot_w, 1)
    ss_res = (w * (y - pred) ** 2).sum(1)
    ss_tot = (w * (y - ybar[:, None]) ** 2).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, np.nan)


def bootstrap_adj_r2(z: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Adjusted R^2 refitted on every resample (z: phi(features) [n, p]; weights [B, n] model multiplicities)."""
    n, p = z.shape
    return adjusted_r2(weighted_r2(y, _weighted_fit_predict(z, y, weights, z), weights), n, p)
