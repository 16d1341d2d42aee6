"""The k-fold fits of the scorer's own estimators, every training fold of every shuffle at once: least squares of
phi(x) (scipy's lstsq cut-off, a held direction as the closed-form one-slope non-negative fit, "select" by the better
training R^2) and RidgeCV's efficient leave-one-out choice of the penalty (its eigen-decomposition of X'X), batched
over the folds with numpy. Same numbers as the scikit-learn fits fold by fold (tests/test_scoring_folds.py checks
them against those), hundreds of times faster: the folds are scikit-learn's KFold splits, computed once per size."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from sklearn.model_selection import KFold

LSTSQ_COND = 1e-6  # LinearRegression's tol: scipy.linalg.lstsq drops singular values below cond * the largest


@dataclass(frozen=True)
class FoldGroup:
    """Training folds of one size: their shuffle, training rows [F, m] and held-out rows [F, n - m]."""

    shuffle: np.ndarray
    train: np.ndarray
    test: np.ndarray


@lru_cache(maxsize=32)
def fold_groups(n: int, k: int, repeats: int) -> tuple[FoldGroup, ...]:
    """scikit-learn's KFold(k, shuffle=True, random_state=r) splits of n rows for r < repeats, grouped by size."""
    by_size: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for r in range(repeats):
        for train, test in KFold(k, shuffle=True, random_state=r).split(np.zeros((n, 1))):
            by_size.setdefault(len(train), []).append((r, train, test))
    return tuple(FoldGroup(np.array([f[0] for f in folds]), np.stack([f[1] for f in folds]),
                           np.stack([f[2] for f in folds])) for _, folds in sorted(by_size.items()))


def _r2(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Training R^2 of each row [F, m] (scikit-learn's r2_score; 0 / 0 never happens: the target has spread)."""
    ss_tot = ((y - y.mean(-1, keepdims=True)) ** 2).sum(-1)
    ss_res = ((y - pred) ** 2).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, np.where(ss_res > 0, 0.0, 1.0))


def least_squares(z: np.ndarray, y: np.ndarray, *, positive: bool) -> tuple[np.ndarray, np.ndarray]:
    """LinearRegression(positive=...).fit on each fold: z [F, m, p], y [F, m] -> coef [F, p], intercept [F]."""
    zm, ym = z.mean(1), y.mean(1)
    zc, yc = z - zm[:, None], y - ym[:, None]
    if positive:  # one slope held non-negative: the free slope clipped at 0 (scipy's nnls on one column)
        den = (zc[..., 0] ** 2).sum(1)
        slope = np.where(den > 0, (zc[..., 0] * yc).sum(1) / np.where(den > 0, den, 1.0), 0.0)
        coef = np.maximum(slope, 0.0)[:, None]
    else:
        u, s, vt = np.linalg.svd(zc, full_matrices=False)
        keep = s > LSTSQ_COND * s[:, :1]
        inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        coef = np.einsum("fji,fj,fmj,fm->fi", vt, inv, u, yc)
    return coef, ym - np.einsum("fi,fi->f", zm, coef)


def phi_fits(x: np.ndarray, y: np.ndarray, group: FoldGroup, *, options: list[str], sign: float, positive: bool
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PhiRegression on every training fold of a group: held-out predictions [F, t], the phi chosen per fold
    (index into options) and whether the held fit was flat (its slope 0)."""
    best = None
    for o, phi in enumerate(options):
        z = sign * (np.log(x) if phi == "log" else x)
        coef, icpt = least_squares(z[group.train], y[group.train], positive=positive)
        fit_r2 = _r2(y[group.train], np.einsum("fmi,fi->fm", z[group.train], coef) + icpt[:, None])
        pred = np.einsum("fti,fi->ft", z[group.test], coef) + icpt[:, None]
        if best is None:
            best = [fit_r2, pred, np.full(len(pred), o), coef]
        else:  # max() keeps the first of equal fits
            better = fit_r2 > best[0]
            best = [np.where(better, fit_r2, best[0]), np.where(better[:, None], pred, best[1]),
                    np.where(better, o, best[2]), np.where(better[:, None], coef, best[3])]
    return best[1], best[2], positive & ~np.any(best[3] != 0, axis=1)


def ridge_gcv(x: np.ndarray, y: np.ndarray, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RidgeCV(alphas).fit on each fold (x [F, m, p], y [F, m]): the penalty with the least mean squared leave-one-out
    error (the first of equal ones), from the eigen-decomposition of the centred X'X as scikit-learn's _RidgeGCV
    (p < m); or its X X' (p >= m). Returns coef [F, p] and intercept [F]."""
    xm, ym = x.mean(1), y.mean(1)
    xc, yc = x - xm[:, None], y - ym[:, None]
    m = x.shape[1]
    if x.shape[2] < m:
        lam, v = np.linalg.eigh(np.matmul(xc.transpose(0, 2, 1), xc))
        xv = np.matmul(xc, v)                                   # [F, m, p]
        vty = np.einsum("fpk,fp->fk", v, np.einsum("fmp,fm->fp", xc, yc))
        vts = np.einsum("fpk,fp->fk", v, xc.sum(1))
    else:
        lam, q = np.linalg.eigh(np.matmul(xc, xc.transpose(0, 2, 1)))
        xv, vty, vts = None, np.einsum("fmk,fm->fk", q, yc), q.sum(1)
    d = 1.0 / (lam[:, :, None] + alphas)                       # [F, k, A]: every penalty at once
    if xv is not None:  # alpha c = y - X H^-1 X'y, alpha d = 1 - diag(X H^-1 X') - (intercept term)
        c = yc[:, :, None] - np.matmul(xv, d * vty[:, :, None])
        dd = 1.0 - np.matmul(xv ** 2, d) - (1.0 - np.matmul(xv, d * vts[:, :, None])) / m
    else:  # c = G^-1 y, d = diag(G^-1) - (intercept term), with G = X X' + alpha
        c = np.matmul(q, d * vty[:, :, None])
        dd = np.matmul(q ** 2, d) - np.matmul(q, d * vts[:, :, None]) / m
    scores = -np.mean((c / dd) ** 2, axis=1)                   # [F, A]
    best_score = np.full(len(x), -np.inf)
    best = np.zeros(len(x), int)
    for a, score in enumerate(scores.T):  # the first of equal scores, as RidgeCV
        better = score > best_score
        best_score, best = np.where(better, score, best_score), np.where(better, a, best)
    d = 1.0 / (lam + alphas[best][:, None])
    if xv is not None:
        coef = np.einsum("fpk,fk->fp", v, d * vty)
    else:
        coef = np.einsum("fmp,fm->fp", xc, np.einsum("fmk,fk->fm", q, d * vty))
    return coef, ym - np.einsum("fp,fp->f", xm, coef)


def recipe_plus_design(x: np.ndarray, recipe: int, phi: str, group: FoldGroup) -> tuple[np.ndarray, np.ndarray]:
    """RecipePlus's rows on every fold of a group: the recipe's columns, then the measure's under phi with a missing
    value replaced by the training models' median and standardised on them. Returns train [F, m, p], test [F, t, p]."""
    mcols = np.asarray(x[:, recipe:], dtype=float)
    mcols = np.log(mcols) if phi == "log" else mcols
    mcols = np.where(np.isfinite(mcols), mcols, np.nan)
    tr, te = mcols[group.train], mcols[group.test]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(tr, 1)
    median = np.where(np.isfinite(median), median, 0.0)[:, None]
    tr, te = np.where(np.isnan(tr), median, tr), np.where(np.isnan(te), median, te)
    mean, scale = tr.mean(1, keepdims=True), tr.std(1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    head = np.asarray(x[:, :recipe], dtype=float)
    return (np.concatenate([head[group.train], (tr - mean) / scale], 2),
            np.concatenate([head[group.test], (te - mean) / scale], 2))


def recipe_plus_fits(x: np.ndarray, y: np.ndarray, group: FoldGroup, *, recipe: int, options: list[str],
                     alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RecipePlus on every training fold of a group: held-out predictions [F, t] and the phi chosen (index)."""
    best = None
    for o, phi in enumerate(options):
        tr, te = recipe_plus_design(x, recipe, phi, group)
        coef, icpt = ridge_gcv(tr, y[group.train], alphas)
        fit_r2 = _r2(y[group.train], np.einsum("fmp,fp->fm", tr, coef) + icpt[:, None])
        pred = np.einsum("ftp,fp->ft", te, coef) + icpt[:, None]
        if best is None:
            best = [fit_r2, pred, np.full(len(pred), o)]
        else:
            better = fit_r2 > best[0]
            best = [np.where(better, fit_r2, best[0]), np.where(better[:, None], pred, best[1]),
                    np.where(better, o, best[2])]
    return best[1], best[2]
