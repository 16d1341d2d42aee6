"""Regression scores (DEMOGEN): least squares of the target on phi(signature); adjusted R^2, k-fold R^2
and held-out MSE with scikit-learn, and their bootstrap distributions by batched weighted least squares."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import KFold

from ..defaults import SEED

K_FOLDS = 10


@dataclass(frozen=True)
class RegressionResult:
    """Point estimates of one fit, and the held-out predictions of the k-fold split."""

    r2: float
    adj_r2: float
    kfold_r2: float
    mse: float
    coef: np.ndarray
    intercept: float
    heldout: np.ndarray      # k-fold held-out prediction of every model
    folds: np.ndarray        # fold index of every model


def adjusted_r2(r2: float | np.ndarray, n: int, p: int) -> float | np.ndarray:
    """1 - (1 - R^2)(n - 1)/(n - p - 1): R^2 penalised for the number of features p."""
    return 1.0 - (1.0 - r2) * (n - 1) / (n - p - 1)


def fold_ids(n: int, k: int = K_FOLDS, seed: int = SEED) -> np.ndarray:
    """Fold of each of n models: scikit-learn's KFold, shuffled with a fixed seed."""
    ids = np.empty(n, dtype=int)
    for f, (_, test) in enumerate(KFold(k, shuffle=True, random_state=seed).split(np.zeros(n))):
        ids[test] = f
    return ids


def fit(x: np.ndarray, y: np.ndarray, *, k: int = K_FOLDS, seed: int = SEED) -> RegressionResult:
    """Fit y ~ a^T x + b on all models (adjusted R^2) and by k-fold cross-validation (mean held-out R^2, MSE)."""
    n, p = x.shape
    model = LinearRegression().fit(x, y)
    r2 = float(r2_score(y, model.predict(x)))
    folds = fold_ids(n, k, seed)
    heldout = np.empty(n)
    fold_r2 = []
    for f in range(k):
        test = folds == f
        pred = LinearRegression().fit(x[~test], y[~test]).predict(x[test])
        heldout[test] = pred
        fold_r2.append(r2_score(y[test], pred) if test.sum() > 1 else np.nan)
    return RegressionResult(r2=r2, adj_r2=float(adjusted_r2(r2, n, p)), kfold_r2=float(np.nanmean(fold_r2)),
                            mse=float(mean_squared_error(y, heldout)), coef=model.coef_.copy(),
                            intercept=float(model.intercept_), heldout=heldout, folds=folds)


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


def _weighted_r2(y: np.ndarray, pred: np.ndarray, w: np.ndarray) -> np.ndarray:
    """R^2 of predictions [B, n] against y with model multiplicities w [B, n] (NaN without spread)."""
    tot_w = w.sum(1)
    ybar = (w * y).sum(1) / np.where(tot_w > 0, tot_w, 1)
    ss_res = (w * (y - pred) ** 2).sum(1)
    ss_tot = (w * (y - ybar[:, None]) ** 2).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, np.nan)


def bootstrap(x: np.ndarray, y: np.ndarray, weights: np.ndarray, folds: np.ndarray,
              heldout: np.ndarray) -> dict[str, np.ndarray]:
    """adj R^2, k-fold R^2 and held-out MSE on every bootstrap resample (weights = model multiplicities [B, n]).

    adj R^2 is refitted on each resample. The k-fold scores resample the models the fixed held-out
    predictions are judged on: refitting the folds on a resample would train on ~63% distinct models and
    bias every replicate below the estimate (seen as intervals ending just above the point)."""
    n, p = x.shape
    full = _weighted_fit_predict(x, y, weights, x)
    adj = adjusted_r2(_weighted_r2(y, full, weights), n, p)
    pred = np.broadcast_to(heldout, weights.shape)
    fold_r2 = [_weighted_r2(y[folds == f], pred[:, folds == f], weights[:, folds == f]) for f in np.unique(folds)]
    mse = (weights * (y - heldout) ** 2).sum(1) / weights.sum(1)
    with np.errstate(all="ignore"):
        kfold = np.nanmean(np.stack(fold_r2), axis=0)
    return {"adj_r2": adj, "kfold_r2": kfold, "mse": mse}
