"""The fragility audit's statistics (docs/fragility.md), on values already computed: the seed means of each arm
and grid point with their standard errors, the one test rule, the twin cells beside their baselines, the slopes
of the learning curves and the changes across noise levels. No torch, no measures, no zoo.

One rule decides every part. Each statistic (a cell's mean change, a learning curve's slope, the change of a
slope, a change across noise levels) is computed in the same way from the measure's seed means and from the test
error's seed means, and its standard error follows from the seed-level standard errors of those means (the
measure's Monte-Carlo variance added in quadrature when the values carry it). A statistic Q *changed* when
|Q| > t * SE(Q), t the two-sided Student quantile at level `alpha` on the seeds' degrees of freedom. A twin is
*admitted* where the test error did not change (and moved at most `err_abs_tol`); the measure is *fragile* where
it changed. So the test error itself, or any affine function of it, can never fail a part: on an admitted cell or
curve its own statistic did not change, by construction."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .audit_report import Thresholds

BASE = "base"
CURVE_AXIS = "train_size"
DATA_AXIS = "label_noise"
REPLICATE = "seed"
ROUNDING = 1e-9  # a difference within this share of the magnitudes it is computed from is rounding, never a change

__all__ = ["BASE", "CURVE_AXIS", "DATA_AXIS", "REPLICATE", "cell_stats", "critical", "data_sensitivity",
           "learning_curves", "t_test", "twin_cells", "value_change", "value_form"]


def critical(df: float, alpha: float) -> float:
    """The two-sided Student-t critical value at level alpha (inf without degrees of freedom)."""
    from scipy.stats import t
    return float(t.ppf(1 - alpha / 2, df)) if df >= 1 else float("inf")


def t_test(d: float, se: float, df: float, alpha: float, scale: float = 0.0) -> tuple[bool | None, float, float]:
    """The one rule: (changed, t statistic, critical value) of a difference d with standard error se on df
    degrees of freedom; changed is None when se is unknown. A d within ROUNDING * `scale` (the magnitude of the
    numbers it is computed from) is 0: the slope of a constant curve is rounding, not a trend. A zero se (values
    constant within each arm) makes any other d a change."""
    if not (np.isfinite(d) and np.isfinite(se)):
        return None, np.nan, np.nan
    if abs(d) <= ROUNDING * scale:
        d = 0.0
    c = critical(df, alpha)
    tstat = d / se if se > 0 else (0.0 if d == 0 else np.sign(d) * np.inf)
    return bool(abs(d) > c * se), float(tstat), c


def _magnitude(*values: Any) -> float:
    """The largest |value| of those given (arrays included): the scale of the rounding of what they compute."""
    return float(max(np.max(np.abs(v)) for v in values))


# ---------------------------------------------------------------- seed means and their standard errors


def value_form(mu: np.ndarray) -> str:
    """'log' when every finite value is positive (changes and slopes on log mu), else 'linear'."""
    mu = mu[np.isfinite(mu)]
    return "log" if len(mu) and (mu > 0).all() else "linear"


def value_change(new: np.ndarray | float, old: np.ndarray | float, form: str) -> np.ndarray | float:
    """|log new - log old| (log form), or |new - old| / |old| when the measure can be <= 0."""
    if form == "log":
        return np.abs(np.log(new) - np.log(old))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(np.asarray(new) - old) / np.abs(old)


def _mean_se(v: np.ndarray, mc: np.ndarray | None) -> tuple[int, float, float]:
    """Count, mean and standard error of the finite values of one cell; the mean Monte-Carlo variance of
    those values (when known) is added to the seed variance. SE is NaN with fewer than 2 values."""
    ok = np.isfinite(v)
    n = int(ok.sum())
    if n == 0:
        return 0, np.nan, np.nan
    mean = float(v[ok].mean())
    if n < 2:
        return n, mean, np.nan
    var = float(v[ok].var(ddof=1))
    if mc is not None:
        m = mc[ok]
        var += float(np.mean(np.where(np.isfinite(m), m, 0.0) ** 2))
    return n, mean, float(np.sqrt(var / n))


def cell_stats(t: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per (arm, grid point): count, seed mean and standard error of mu (finite values only; the column
    `mu_mc_se` adds each value's Monte-Carlo variance) and of the test error (every model)."""
    rows = []
    has_mc = "mu_mc_se" in t.columns
    for key, g in t.groupby(["arm", *keys], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        mu = g["mu"].to_numpy(float)
        n, m, se = _mean_se(mu, g["mu_mc_se"].to_numpy(float) if has_mc else None)
        n_e, e, se_e = _mean_se(g["err"].to_numpy(float), None)
        rows.append({"arm": key[0], **dict(zip(keys, key[1:])), "n": n, "mu": m, "mu_se": se,
                     "n_err": n_e, "err": e, "err_se": se_e})
    cols = ["arm", *keys, "n", "mu", "mu_se", "n_err", "err", "err_se"]
    return pd.DataFrame(rows, columns=cols)


def twin_cells(cells: pd.DataFrame, keys: list[str], th: Thresholds, form: str) -> pd.DataFrame:
    """Parts 1-2: each twin grid point beside its baseline. Admitted: the test error did not change (and moved
    at most err_abs_tol); changed: mu did, by the same test."""
    base = cells[cells["arm"] == BASE].set_index(keys)
    rows = []
    for _, c in cells[cells["arm"] != BASE].iterrows():
        key = tuple(c[k] for k in keys) if len(keys) > 1 else c[keys[0]]
        if key in base.index:
            rows.append(_twin_cell(c, base.loc[key], keys, th, form))
    return pd.DataFrame(rows)


def _twin_cell(c: pd.Series, b: pd.Series, keys: list[str], th: Thresholds, form: str) -> dict[str, Any]:
    """One twin cell `c` beside its baseline cell `b`: the error's test and tolerance, mu's test, the changes."""
    d_err = c["err"] - b["err"]
    err_moved, t_err, c_err = t_test(d_err, float(np.hypot(b["err_se"], c["err_se"])),
                                     b["n_err"] + c["n_err"] - 2, th.alpha, _magnitude(c["err"], b["err"]))
    tol = min(c_err * float(np.hypot(b["err_se"], c["err_se"])), th.err_abs_tol) if err_moved is not None \
        else np.nan
    admitted = err_moved is False and abs(d_err) <= th.err_abs_tol
    d_mu = c["mu"] - b["mu"]
    se_mu = float(np.hypot(b["mu_se"], c["mu_se"]))
    changed, t_mu, c_mu = t_test(d_mu, se_mu, b["n"] + c["n"] - 2, th.alpha, _magnitude(c["mu"], b["mu"]))
    rv = float(value_change(c["mu"], b["mu"], form)) if changed is not None else np.nan
    log_err_change = abs(np.log(c["err"]) - np.log(b["err"])) if min(c["err"], b["err"]) > 0 else np.nan
    denom = max(log_err_change, tol / b["err"]) if b["err"] > 0 and np.isfinite(tol) else np.nan
    return {"perturbation": c["arm"], **{k: c[k] for k in keys}, "n_base": int(b["n"]),
            "n_twin": int(c["n"]), "err_base": b["err"], "err_twin": c["err"], "t_err": t_err,
            "err_tol": tol, "admitted": bool(admitted), "mu_base": b["mu"], "mu_twin": c["mu"],
            "mu_se": se_mu, "t": t_mu, "crit": c_mu, "testable": changed is not None,
            "changed": bool(changed), "rv": rv, "vf": rv / denom if denom else np.nan}


# ---------------------------------------------------------------- learning curves


def _slope(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x and its standard error from the points' standard errors."""
    w = _weights(x)
    return float(w @ y), float(np.sqrt(w ** 2 @ se ** 2))


def _weights(x: np.ndarray) -> np.ndarray:
    """w with w @ y the OLS slope of y on x."""
    xc = x - x.mean()
    return xc / (xc @ xc)


def _f_se(mean: np.ndarray, se: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """A curve's points and their standard errors in the fitted space: log of the seed mean (delta method) or
    the mean itself."""
    if log:
        return np.log(mean), se / mean
    return mean, se


def _sign_error(y_mu: np.ndarray, y_err: np.ndarray, sign: float) -> float:
    """The share of pairs of points where mu (oriented by `sign`) and the test error move opposite ways (ties
    count half)."""
    d_mu, d_err = np.sign(np.subtract.outer(y_mu, y_mu)), np.sign(np.subtract.outer(y_err, y_err))
    iu = np.triu_indices(len(y_mu), 1)
    return float(np.mean((1 - sign * d_mu[iu] * d_err[iu]) / 2))


def _r2(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of the straight-line fit of y on x (a power law in log-log), NaN when y is constant."""
    if np.ptp(y) <= 0:
        return np.nan
    beta = np.polyfit(x, y, 1)
    resid = y - np.polyval(beta, x)
    return 1 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())


def learning_curves(cells: pd.DataFrame, twins: pd.DataFrame, keys: list[str], form: str, sign: float,
                    th: Thresholds) -> pd.DataFrame:
    """Parts 3-4: each twin learning curve (a twin kind at fixed other axes) beside its baseline, on the train
    sizes where both arms have >= 2 values (`points`; `lost`: sizes without). Slopes of f(mu) and log err
    against log n, their change, and by the one rule: admitted (every cell admitted and the error's slope did
    not change), base_trend (the baseline slope of mu is nonzero), flip (the twin's slope is nonzero with the
    other sign), exponent_changed (the slope of mu changed)."""
    context = [k for k in keys if k != CURVE_AXIS]
    rows = []
    for arm in sorted(a for a in cells["arm"].unique() if a != BASE):
        tw_all = cells[cells["arm"] == arm]
        groups = tw_all.groupby(context, dropna=False, sort=True) if context else [((), tw_all)]
        for ctx_key, tw in groups:
            ctx_key = ctx_key if isinstance(ctx_key, tuple) else (ctx_key,)
            rows.append(_curve(cells, twins, arm, dict(zip(context, ctx_key)), tw, form == "log", sign, th))
    return pd.DataFrame(rows)


def _where(frame: pd.DataFrame, ctx: dict[str, Any]) -> np.ndarray:
    """The rows of `frame` at the fixed other axes `ctx` (every row without any)."""
    if not ctx:
        return np.ones(len(frame), bool)
    return np.logical_and.reduce([frame[k] == v for k, v in ctx.items()])


def _curve(cells: pd.DataFrame, twins: pd.DataFrame, arm: str, ctx: dict[str, Any], tw: pd.DataFrame, log: bool,
           sign: float, th: Thresholds) -> dict[str, Any]:
    """One twin learning curve beside its baseline: its sizes, points and lost sizes, and its slopes when it has
    at least 2 points."""
    bs = cells[_where(cells, ctx) & (cells["arm"] == BASE)].set_index(CURVE_AXIS)
    tw = tw.set_index(CURVE_AXIS)
    sizes = sorted(set(bs.index) | set(tw.index))
    ok = [n for n in sizes if n in bs.index and n in tw.index
          and min(bs.loc[n, "n"], tw.loc[n, "n"]) >= 2 and min(bs.loc[n, "n_err"], tw.loc[n, "n_err"]) >= 2
          and min(bs.loc[n, "err"], tw.loc[n, "err"]) > 0
          and (not log or min(bs.loc[n, "mu"], tw.loc[n, "mu"]) > 0)]
    no_value = int(sum(bs.loc[n, "n_err"] - bs.loc[n, "n"] for n in bs.index)
                   + sum(tw.loc[n, "n_err"] - tw.loc[n, "n"] for n in tw.index))
    tc = twins[(twins["perturbation"] == arm) & _where(twins, ctx)] if not twins.empty else twins
    cells_ok = bool(len(tc)) and bool(tc["admitted"].all())
    row: dict[str, Any] = {"arm": arm, **ctx, "sizes": len(sizes), "points": len(ok),
                           "lost": len(sizes) - len(ok), "no_value": no_value, "cells_admitted": cells_ok}
    if len(ok) >= 2:
        x = np.log(np.asarray(ok, dtype=float))
        row.update(_curve_slopes(x, _points(bs, ok, log), _points(tw, ok, log), cells_ok, sign, th))
    else:
        row["admitted"] = False
    return row


def _points(frame: pd.DataFrame, ok: list[Any], log: bool) -> tuple[np.ndarray, ...]:
    """One arm's curve at the sizes `ok`: f(mu) and its SE, log err and its SE, the counts of mu and of err."""
    col = {c: frame.loc[ok, c].to_numpy(float) for c in ("mu", "mu_se", "err", "err_se", "n", "n_err")}
    return (*_f_se(col["mu"], col["mu_se"], log), *_f_se(col["err"], col["err_se"], True), col["n"], col["n_err"])


def _curve_slopes(x: np.ndarray, base: tuple[np.ndarray, ...], twin: tuple[np.ndarray, ...], cells_ok: bool,
                  sign: float, th: Thresholds) -> dict[str, Any]:
    """The slopes of both arms' curves against x = log n, their changes, and the one rule's outcomes on them."""
    (by, bs_mu, be, bs_e, bn, bn_e), (ty, ts_mu, te, ts_e, tn, tn_e) = base, twin
    beta_b, se_b = _slope(x, by, bs_mu)
    beta_t, se_t = _slope(x, ty, ts_mu)
    eb, se_eb = _slope(x, be, bs_e)
    et, se_et = _slope(x, te, ts_e)
    df_b, df_t = float((bn - 1).sum()), float((tn - 1).sum())
    df_eb, df_et = float((bn_e - 1).sum()), float((tn_e - 1).sum())
    d_mu, d_mu_se = _slope(x, ty - by, np.hypot(ts_mu, bs_mu))
    d_err, d_err_se = _slope(x, te - be, np.hypot(ts_e, bs_e))
    w = float(np.abs(_weights(x)).sum())  # a slope's rounding: this times the magnitude of its points
    err_changed, t_derr, _ = t_test(d_err, d_err_se, df_eb + df_et, th.alpha, w * _magnitude(te, be))
    exp_changed, t_dmu, _ = t_test(d_mu, d_mu_se, df_b + df_t, th.alpha, w * _magnitude(ty, by))
    base_trend, _, _ = t_test(beta_b, se_b, df_b, th.alpha, w * _magnitude(by))
    twin_trend, _, _ = t_test(beta_t, se_t, df_t, th.alpha, w * _magnitude(ty))
    flip = bool(base_trend) and bool(twin_trend) and np.sign(beta_t) != np.sign(beta_b)
    return {"admitted": cells_ok and err_changed is False, "twin_trend": bool(twin_trend), "beta_mu_base": beta_b,
            "beta_mu_base_se": se_b, "beta_mu": beta_t, "beta_mu_se": se_t, "beta_err_base": eb,
            "beta_err_base_se": se_eb, "beta_err": et, "beta_err_se": se_et,
            "d_beta_mu": d_mu, "d_beta_mu_se": d_mu_se, "t_d_beta_mu": t_dmu,
            "d_beta_err": d_err, "d_beta_err_se": d_err_se, "t_d_beta_err": t_derr,
            "err_exponent_changed": bool(err_changed), "base_trend": bool(base_trend),
            "flip": flip, "exponent_changed": bool(exp_changed),
            "correct_trend_base": bool(np.sign(sign * beta_b) == np.sign(eb)),
            "correct_trend": bool(np.sign(sign * beta_t) == np.sign(et)),
            "sign_error_base": _sign_error(by, be, sign), "sign_error": _sign_error(ty, te, sign),
            "powerlaw_r2_base": _r2(x, by), "powerlaw_r2": _r2(x, ty)}


# ---------------------------------------------------------------- data complexity


def data_sensitivity(cells: pd.DataFrame, keys: list[str], form: str, sign: float, th: Thresholds) -> pd.DataFrame:
    """Part 5: per arm and fixed other axes, over each pair of noise levels whose test errors differ (by the
    one rule): `agree` pairs where mu changed the same way (oriented by `sign`), `oppose` the other way; tau =
    (agree - oppose) / judged pairs (an oriented Kendall tau counting only detectable changes). Elasticity:
    the change of log mu against the change of log err between the extreme levels, when they differ."""
    others = [k for k in keys if k != DATA_AXIS]
    rows = []
    for key, g in cells.groupby(["arm", *others], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(DATA_AXIS).reset_index(drop=True)
        if len(g) < 2:
            continue
        distinct, judged, agree, oppose = _noise_pairs(g, sign, th)
        rows.append({"arm": key[0], **dict(zip(others, key[1:])), "levels": len(g),
                     "pairs": len(g) * (len(g) - 1) // 2, "distinguishable": distinct, "judged": judged,
                     "agree": agree, "oppose": oppose, "tau": (agree - oppose) / judged if judged else np.nan,
                     "elasticity": _elasticity(g, form, sign, th)})
    return pd.DataFrame(rows)


def _err_moved(lo: pd.Series, hi: pd.Series, th: Thresholds) -> bool | None:
    """Whether the test error changed between two noise levels, by the one rule."""
    moved, _, _ = t_test(hi["err"] - lo["err"], float(np.hypot(lo["err_se"], hi["err_se"])),
                         lo["n_err"] + hi["n_err"] - 2, th.alpha, _magnitude(lo["err"], hi["err"]))
    return moved


def _noise_pairs(g: pd.DataFrame, sign: float, th: Thresholds) -> tuple[int, int, int, int]:
    """Over the pairs of noise levels of one group (sorted by level): those whose test errors differ, those of
    them where mu's change could be tested, and where mu changed the same way (agree) or the other (oppose)."""
    distinct = judged = agree = oppose = 0
    for i in range(len(g)):
        for j in range(i + 1, len(g)):
            lo, hi = g.iloc[i], g.iloc[j]
            if not _err_moved(lo, hi, th):
                continue
            distinct += 1
            d_mu = hi["mu"] - lo["mu"]
            changed, _, _ = t_test(d_mu, float(np.hypot(lo["mu_se"], hi["mu_se"])), lo["n"] + hi["n"] - 2, th.alpha,
                                   _magnitude(lo["mu"], hi["mu"]))
            if changed is None:
                continue
            judged += 1
            if changed:
                same = sign * np.sign(d_mu) == np.sign(hi["err"] - lo["err"])
                agree, oppose = agree + int(same), oppose + int(not same)
    return distinct, judged, agree, oppose


def _elasticity(g: pd.DataFrame, form: str, sign: float, th: Thresholds) -> float:
    """The change of f(mu) against the change of log err between the extreme noise levels of one group (sorted
    by level), NaN unless their test errors differ."""
    lo, hi = g.iloc[0], g.iloc[-1]
    if not (_err_moved(lo, hi, th) and min(hi["err"], lo["err"]) > 0 and np.isfinite([lo["mu"], hi["mu"]]).all()
            and (form != "log" or min(lo["mu"], hi["mu"]) > 0)):
        return np.nan
    d_err = np.log(hi["err"]) - np.log(lo["err"])
    if form == "log":
        d_mu = np.log(hi["mu"]) - np.log(lo["mu"])
    else:
        d_mu = (hi["mu"] - lo["mu"]) / abs(lo["mu"]) if lo["mu"] != 0 else np.nan
    return sign * d_mu / d_err
