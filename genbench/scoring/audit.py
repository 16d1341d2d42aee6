"""gb.audit(measure, zoo): the fragility audit of DESIGN section 7. Does a measure keep its value, trend and
scaling when training changes slightly (a twin) while the test error barely moves, does it see data complexity,
and is it blind to a function-preserving rescaling? Every verdict carries its thresholds and the evidence each
part rests on; it is 'robust' only when every part ran on enough evidence and passed.

One rule decides every part. Each statistic (a cell's mean change, a learning curve's slope, the change of a
slope, a change across noise levels) is computed in the same way from the measure's seed means and from the test
error's seed means, and its standard error follows from the seed-level standard errors of those means (the
measure's Monte-Carlo variance added in quadrature when the values carry it). A statistic Q *changed* when
|Q| > t * SE(Q), t the two-sided Student quantile at level `alpha` on the seeds' degrees of freedom. A twin is
*admitted* where the test error did not change (and moved at most `err_abs_tol`); the measure is *fragile* where
it changed. So the test error itself, or any affine function of it, can never fail a part: on an admitted cell or
curve its own statistic did not change, by construction."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError
from ..fileio import json_safe
from ..measures import Measure, get_measure
from ..zoo.storage import Zoo, load_zoo
from .scores import measure_matrix

BASE = "base"
CURVE_AXIS = "train_size"
DATA_AXIS = "label_noise"
REPLICATE = "seed"
ALPHAS = (0.1, 10.0)
LABELS = ("fragile-value", "fragile-trend", "fragile-scale", "data-blind")
MC_SUFFIX = ":mc_se"  # a value-table column `NAME:mc_se`: each model's Monte-Carlo standard error of the measure


@dataclass(frozen=True)
class Thresholds:
    """Every threshold of the audit (proposals of reference/fragility.md section 5, not the paper's)."""

    alpha: float = 0.05          # level of every test: Q changed when |Q| > t_{1-alpha/2, df} SE(Q)
    err_abs_tol: float = 0.05    # a twin cell is admissible only if its test error also moved at most this much
    scr: float = 0.5             # fragile-value: worst twin kind's share of admitted cells where mu changed, above
    trend_rate: float = 0.5      # fragile-trend: worst twin kind's share of judged curves whose slope flipped, above
    scale_rate: float = 0.5      # fragile-scale: worst twin kind's share of curves whose exponent changed, above
    df_tau: float = 0.5          # data-blind: net share of error-distinguishable noise pairs mu tracks, at or below
    elasticity: float = 0.1      # data-blind: |median elasticity of mu against test error| below this
    control_rv: float = 0.05     # fragile-value: relative change under the rescaling control above this
    # the least evidence a part needs before its outcome counts; below it the part is missing, not passed
    min_cells: int = 6           # value: admitted cells of one twin kind (a rate in steps of <= 1/6)
    min_curves: int = 3          # trend, scaling: judged learning curves of one twin kind
    min_points: int = 3          # a learning curve: train sizes with >= 2 values in both arms
    min_groups: int = 3          # data: baseline groups with test errors distinguishable across noise levels
    min_models: int = 2          # control: models on which the rescaling control was computed


def critical(df: float, alpha: float) -> float:
    """The two-sided Student-t critical value at level alpha (inf without degrees of freedom)."""
    from scipy.stats import t
    return float(t.ppf(1 - alpha / 2, df)) if df >= 1 else float("inf")


@dataclass
class Check:
    """One line of the verdict: which statistic, its value, the threshold, and whether it failed (None: n/a)."""

    part: str
    label: str
    statistic: str
    value: float
    threshold: str
    failed: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Evidence:
    """What one part of the audit rests on: n units (curves, cells, groups, models) against its minimum, and
    for the twin parts the units of each twin kind (a kind is judged only with at least `minimum` of them)."""

    part: str
    n: int
    unit: str
    minimum: int
    cause: str = ""  # why n is what it is (e.g. "the zoo has no twins"), shown when the part is missing
    by_twin: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def enough(self) -> bool:
        """Whether the part rests on at least its minimum."""
        return self.n >= self.minimum

    @property
    def shortfall(self) -> str:
        """The count against its minimum, e.g. '0 admitted twin curves < 3 per twin kind'."""
        return f"{self.n} {self.unit} < {self.minimum}" + (" per twin kind" if self.by_twin else "")

    @property
    def reason(self) -> str:
        """The shortfall and its cause, e.g. '0 judged twin curves < 3 per twin kind (the zoo has no twins)'."""
        return self.shortfall + (f" ({self.cause})" if self.cause else "")

    def to_dict(self) -> dict[str, Any]:
        """The record's form: n, unit, minimum, and the count of each twin kind where it applies."""
        out: dict[str, Any] = {"n": self.n, "unit": self.unit, "minimum": self.minimum}
        if self.by_twin:
            out["by_twin"] = dict(self.by_twin)
        return out


def missing_parts(checks: list[Check], evidence: list[Evidence], *, short: bool = False) -> dict[str, str]:
    """Parts that did not fail but could not run or rest on too little evidence, each with its reason (only
    the shortfall when `short`, as in the verdict)."""
    by_part = {e.part: e for e in evidence}
    missing: dict[str, str] = {}
    for part in dict.fromkeys(c.part for c in checks):
        own = [c for c in checks if c.part == part]
        if any(c.failed for c in own):
            continue  # a failure is evidence
        ev, undecided = by_part.get(part), [c for c in own if c.failed is None]
        if ev is None:
            missing[part] = "its evidence was not recorded"
        elif not ev.enough:
            missing[part] = ev.shortfall if short else ev.reason
        elif undecided:
            missing[part] = f"{undecided[0].statistic} could not be computed on {ev.n} {ev.unit}"
    return missing


def _grouped(missing: dict[str, str]) -> str:
    """'no trend, scaling: REASON; no data: REASON': parts with the same reason named together."""
    by_reason: dict[str, list[str]] = {}
    for part, why in missing.items():
        by_reason.setdefault(why, []).append(part)
    return "; ".join(f"no {', '.join(parts)}: {why}" for why, parts in by_reason.items())


def verdict_of(checks: list[Check], missing: dict[str, str]) -> str:
    """'robust' only when every part ran on enough evidence and passed; else the failed labels and/or
    'inconclusive' naming the missing parts, e.g. 'fragile-value; inconclusive: trend, scaling'."""
    failed = [lab for lab in LABELS if any(c.failed and c.label == lab for c in checks)]
    if failed and missing:
        return f"{', '.join(failed)}; inconclusive: {', '.join(missing)}"
    if failed:
        return ", ".join(failed)
    if missing:
        return f"inconclusive ({_grouped(missing)})"
    return "robust" if checks else "inconclusive (no part of the audit ran)"


def _compact(df: pd.DataFrame) -> dict[str, list[Any]]:
    """A table as {column: [values]}, floats to 6 significant digits (the record's `means` block)."""
    out: dict[str, list[Any]] = {}
    for col in df.columns:
        vals = df[col].tolist()
        if pd.api.types.is_float_dtype(df[col]):
            vals = [float(f"{v:.6g}") if v is not None and np.isfinite(v) else None for v in vals]
        out[str(col)] = vals
    return out


@dataclass
class FragilityReport:
    """The audit of one measure on one zoo: the tables of each part, the checks, their evidence, the verdict."""

    measure: str
    zoo: str
    form: str
    admitted: dict[str, float]
    checks: list[Check]
    evidence: list[Evidence]
    cells: pd.DataFrame
    curves: pd.DataFrame
    data: pd.DataFrame
    control: pd.DataFrame
    thresholds: Thresholds
    notes: list[str] = field(default_factory=list)
    means: pd.DataFrame = field(default_factory=pd.DataFrame)  # seed means per arm and grid point (the plots)

    @property
    def missing(self) -> dict[str, str]:
        """Part -> why it is missing (could not run, or too little evidence), for parts that did not fail."""
        return missing_parts(self.checks, self.evidence)

    @property
    def verdict(self) -> str:
        """'robust', the failed labels, 'inconclusive (...)', or both (see verdict_of)."""
        return verdict_of(self.checks, missing_parts(self.checks, self.evidence, short=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN as None), as stored in result records; `missing` as [{part, reason}, ...] and
        `means` column-wise ({arm: [...], train_size: [...], mu: [...], mu_se: [...], err: [...], ...})."""
        evidence = {e.part: e.to_dict() for e in self.evidence}
        missing = [{"part": part, "reason": why} for part, why in self.missing.items()]
        return json_safe({"measure": self.measure, "zoo": self.zoo, "form": self.form, "verdict": self.verdict,
                          "missing": missing, "evidence": evidence, "admitted": self.admitted,
                          "checks": [asdict(c) for c in self.checks], "thresholds": asdict(self.thresholds),
                          "notes": list(self.notes), "control": self.control.to_dict(orient="records"),
                          "curves": self.curves.to_dict(orient="records"),
                          "means": _compact(self.means) if not self.means.empty else None})


# ---------------------------------------------------------------- seed means and their standard errors


def _form(mu: np.ndarray) -> str:
    mu = mu[np.isfinite(mu)]
    return "log" if len(mu) and (mu > 0).all() else "linear"


def _change(new: np.ndarray | float, old: np.ndarray | float, form: str) -> np.ndarray | float:
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


def _test(d: float, se: float, df: float, th: Thresholds) -> tuple[bool | None, float, float]:
    """(changed, t statistic, critical value) of a difference d with standard error se on df degrees of
    freedom; changed is None when se is unknown. A zero se (values constant within each arm) makes any d != 0 a
    change."""
    if not (np.isfinite(d) and np.isfinite(se)):
        return None, np.nan, np.nan
    c = critical(df, th.alpha)
    tstat = d / se if se > 0 else (0.0 if d == 0 else np.sign(d) * np.inf)
    return bool(abs(d) > c * se), float(tstat), c


def twin_cells(cells: pd.DataFrame, keys: list[str], th: Thresholds, form: str) -> pd.DataFrame:
    """Parts 1-2: each twin grid point beside its baseline. Admitted: the test error did not change (and moved
    at most err_abs_tol); changed: mu did, by the same test."""
    base = cells[cells["arm"] == BASE].set_index(keys)
    rows = []
    for _, c in cells[cells["arm"] != BASE].iterrows():
        key = tuple(c[k] for k in keys) if len(keys) > 1 else c[keys[0]]
        if key not in base.index:
            continue
        b = base.loc[key]
        d_err = c["err"] - b["err"]
        err_moved, t_err, c_err = _test(d_err, float(np.hypot(b["err_se"], c["err_se"])),
                                        b["n_err"] + c["n_err"] - 2, th)
        tol = min(c_err * float(np.hypot(b["err_se"], c["err_se"])), th.err_abs_tol) if err_moved is not None \
            else np.nan
        admitted = err_moved is False and abs(d_err) <= th.err_abs_tol
        d_mu = c["mu"] - b["mu"]
        se_mu = float(np.hypot(b["mu_se"], c["mu_se"]))
        changed, t_mu, c_mu = _test(d_mu, se_mu, b["n"] + c["n"] - 2, th)
        rv = float(_change(c["mu"], b["mu"], form)) if changed is not None else np.nan
        log_err_change = abs(np.log(c["err"]) - np.log(b["err"])) if min(c["err"], b["err"]) > 0 else np.nan
        denom = max(log_err_change, tol / b["err"]) if b["err"] > 0 and np.isfinite(tol) else np.nan
        rows.append({"perturbation": c["arm"], **{k: c[k] for k in keys}, "n_base": int(b["n"]),
                     "n_twin": int(c["n"]), "err_base": b["err"], "err_twin": c["err"], "t_err": t_err,
                     "err_tol": tol, "admitted": bool(admitted), "mu_base": b["mu"], "mu_twin": c["mu"],
                     "mu_se": se_mu, "t": t_mu, "crit": c_mu, "testable": changed is not None,
                     "changed": bool(changed), "rv": rv, "vf": rv / denom if denom else np.nan})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- learning curves


def _slope(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x and its standard error from the points' standard errors."""
    xc = x - x.mean()
    w = xc / (xc @ xc)
    return float(w @ y), float(np.sqrt(w ** 2 @ se ** 2))


def _f_se(mean: np.ndarray, se: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """A curve's points and their standard errors in the fitted space: log of the seed mean (delta method) or
    the mean itself."""
    if log:
        return np.log(mean), se / mean
    return mean, se


def _sign_error(y_mu: np.ndarray, y_err: np.ndarray, sign: float) -> float:
    d_mu, d_err = np.sign(np.subtract.outer(y_mu, y_mu)), np.sign(np.subtract.outer(y_err, y_err))
    iu = np.triu_indices(len(y_mu), 1)
    return float(np.mean((1 - sign * d_mu[iu] * d_err[iu]) / 2))


def _r2(x: np.ndarray, y: np.ndarray) -> float:
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
    log = form == "log"
    rows = []
    twin_arms = sorted(a for a in cells["arm"].unique() if a != BASE)
    for arm in twin_arms:
        tw_all = cells[cells["arm"] == arm]
        groups = tw_all.groupby(context, dropna=False, sort=True) if context else [((), tw_all)]
        for ctx_key, tw in groups:
            ctx_key = ctx_key if isinstance(ctx_key, tuple) else (ctx_key,)
            ctx = dict(zip(context, ctx_key))
            sel = np.logical_and.reduce([cells[k] == v for k, v in ctx.items()]) if ctx else \
                np.ones(len(cells), bool)
            bs = cells[sel & (cells["arm"] == BASE)].set_index(CURVE_AXIS)
            tw = tw.set_index(CURVE_AXIS)
            sizes = sorted(set(bs.index) | set(tw.index))
            ok = [n for n in sizes if n in bs.index and n in tw.index
                  and min(bs.loc[n, "n"], tw.loc[n, "n"]) >= 2 and min(bs.loc[n, "n_err"], tw.loc[n, "n_err"]) >= 2
                  and min(bs.loc[n, "err"], tw.loc[n, "err"]) > 0
                  and (not log or min(bs.loc[n, "mu"], tw.loc[n, "mu"]) > 0)]
            no_value = int(sum(bs.loc[n, "n_err"] - bs.loc[n, "n"] for n in bs.index)
                           + sum(tw.loc[n, "n_err"] - tw.loc[n, "n"] for n in tw.index))
            tc = twins[(twins["perturbation"] == arm)
                       & np.logical_and.reduce([twins[k] == v for k, v in ctx.items()] if ctx else
                                               [np.ones(len(twins), bool)])] if not twins.empty else twins
            cells_ok = bool(len(tc)) and bool(tc["admitted"].all())
            row: dict[str, Any] = {"arm": arm, **ctx, "sizes": len(sizes), "points": len(ok),
                                   "lost": len(sizes) - len(ok), "no_value": no_value, "cells_admitted": cells_ok}
            if len(ok) >= 2:
                x = np.log(np.asarray(ok, dtype=float))
                pts = {}
                for name, frame in (("b", bs), ("t", tw)):
                    col = {c: frame.loc[ok, c].to_numpy(float) for c in ("mu", "mu_se", "err", "err_se", "n", "n_err")}
                    pts[name] = (*_f_se(col["mu"], col["mu_se"], log), *_f_se(col["err"], col["err_se"], True),
                                 col["n"], col["n_err"])
                (by, bs_mu, be, bs_e, bn, bn_e), (ty, ts_mu, te, ts_e, tn, tn_e) = pts["b"], pts["t"]
                beta_b, se_b = _slope(x, by, bs_mu)
                beta_t, se_t = _slope(x, ty, ts_mu)
                eb, se_eb = _slope(x, be, bs_e)
                et, se_et = _slope(x, te, ts_e)
                df_b, df_t = float((bn - 1).sum()), float((tn - 1).sum())
                df_eb, df_et = float((bn_e - 1).sum()), float((tn_e - 1).sum())
                d_mu, d_mu_se = _slope(x, ty - by, np.hypot(ts_mu, bs_mu))
                d_err, d_err_se = _slope(x, te - be, np.hypot(ts_e, bs_e))
                err_changed, t_derr, _ = _test(d_err, d_err_se, df_eb + df_et, th)
                exp_changed, t_dmu, _ = _test(d_mu, d_mu_se, df_b + df_t, th)
                base_trend, _, _ = _test(beta_b, se_b, df_b, th)
                twin_trend, _, _ = _test(beta_t, se_t, df_t, th)
                admitted = cells_ok and err_changed is False
                flip = bool(base_trend) and bool(twin_trend) and np.sign(beta_t) != np.sign(beta_b)
                row.update({"admitted": admitted, "twin_trend": bool(twin_trend), "beta_mu_base": beta_b,
                            "beta_mu_base_se": se_b, "beta_mu": beta_t, "beta_mu_se": se_t, "beta_err_base": eb,
                            "beta_err_base_se": se_eb, "beta_err": et, "beta_err_se": se_et,
                            "d_beta_mu": d_mu, "d_beta_mu_se": d_mu_se, "t_d_beta_mu": t_dmu,
                            "d_beta_err": d_err, "d_beta_err_se": d_err_se, "t_d_beta_err": t_derr,
                            "err_exponent_changed": bool(err_changed), "base_trend": bool(base_trend),
                            "flip": flip, "exponent_changed": bool(exp_changed),
                            "correct_trend_base": bool(np.sign(sign * beta_b) == np.sign(eb)),
                            "correct_trend": bool(np.sign(sign * beta_t) == np.sign(et)),
                            "sign_error_base": _sign_error(by, be, sign), "sign_error": _sign_error(ty, te, sign),
                            "powerlaw_r2_base": _r2(x, by), "powerlaw_r2": _r2(x, ty)})
            else:
                row["admitted"] = False
            rows.append(row)
    return pd.DataFrame(rows)


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
        distinct = judged = agree = oppose = 0
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                lo, hi = g.iloc[i], g.iloc[j]
                moved, _, _ = _test(hi["err"] - lo["err"], float(np.hypot(lo["err_se"], hi["err_se"])),
                                    lo["n_err"] + hi["n_err"] - 2, th)
                if not moved:
                    continue
                distinct += 1
                d_mu = hi["mu"] - lo["mu"]
                changed, _, _ = _test(d_mu, float(np.hypot(lo["mu_se"], hi["mu_se"])), lo["n"] + hi["n"] - 2, th)
                if changed is None:
                    continue
                judged += 1
                if changed:
                    same = sign * np.sign(d_mu) == np.sign(hi["err"] - lo["err"])
                    agree, oppose = agree + int(same), oppose + int(not same)
        lo, hi = g.iloc[0], g.iloc[-1]
        extreme, _, _ = _test(hi["err"] - lo["err"], float(np.hypot(lo["err_se"], hi["err_se"])),
                              lo["n_err"] + hi["n_err"] - 2, th)
        e = np.nan
        if extreme and min(hi["err"], lo["err"]) > 0 and np.isfinite([lo["mu"], hi["mu"]]).all() \
                and (form != "log" or min(lo["mu"], hi["mu"]) > 0):
            d_err = np.log(hi["err"]) - np.log(lo["err"])
            if form == "log":
                d_mu = np.log(hi["mu"]) - np.log(lo["mu"])
            else:
                d_mu = (hi["mu"] - lo["mu"]) / abs(lo["mu"]) if lo["mu"] != 0 else np.nan
            e = sign * d_mu / d_err
        rows.append({"arm": key[0], **dict(zip(others, key[1:])), "levels": len(g),
                     "pairs": len(g) * (len(g) - 1) // 2, "distinguishable": distinct, "judged": judged,
                     "agree": agree, "oppose": oppose, "tau": (agree - oppose) / judged if judged else np.nan,
                     "elasticity": e})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- assembling the verdicts


def _span(counts: pd.Series) -> str:
    """'4' when every count is 4, else 'min-max'."""
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _per_twin(units: pd.DataFrame, flag: str, arm_col: str, arms: list[str], minimum: int
              ) -> tuple[dict[str, int], dict[str, float], list[str]]:
    """Per twin kind: the units, the share flagged (judged kinds only: >= minimum units), the judged kinds."""
    counts = {a: int((units[arm_col] == a).sum()) if not units.empty else 0 for a in arms}
    judged = [a for a in arms if counts[a] >= minimum]
    rates = {a: float(units.loc[units[arm_col] == a, flag].astype(bool).mean()) for a in judged}
    return counts, rates, judged


def _kinds_text(counts: dict[str, int], rates: dict[str, float], units: pd.DataFrame, flag: str, arm_col: str,
                minimum: int, what: str) -> str:
    """'lr_x3 1/10, adam 4/8; not judged: batch_x2 (2 < 6)'."""
    judged = [f"{a} {int(units.loc[units[arm_col] == a, flag].astype(bool).sum())}/{counts[a]}" for a in rates]
    rest = [f"{a} ({counts[a]} < {minimum})" for a in counts if a not in rates]
    return (f"{what} per twin kind: " + (", ".join(judged) if judged else "none judged")
            + (f"; not judged: {', '.join(rest)}" if rest else ""))


def _value_check(cells: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
    """Part 2: per twin kind, the share of its admitted cells where mu changed; the worst judged kind decides."""
    stat = "spurious-change rate, worst twin kind (admitted cells where mu changed)"
    unit = "admitted twin cells"
    thr = f"> {th.scr} (changed: |d mu| > t_{{{1 - th.alpha / 2:g}, df}} SE)"
    if cells.empty:
        return ([Check("value", "fragile-value", stat, np.nan, thr, None,
                       "0 admitted twin cells: the zoo has no twins")],
                Evidence("value", 0, unit, th.min_cells, "the zoo has no twins"))
    arms = sorted(cells["perturbation"].unique())
    units = cells[cells["admitted"] & cells["testable"]]
    counts, rates, judged = _per_twin(units, "changed", "perturbation", arms, th.min_cells)
    n = sum(counts[a] for a in judged)
    admitted, untestable = int(cells["admitted"].sum()), int((cells["admitted"] & ~cells["testable"]).sum())
    cause = (f"{admitted} of {len(cells)} twin cells admitted" + (f", {untestable} of them without 2 values of mu in "
             "both arms" if untestable else "") + "; " + ", ".join(f"{a}: {counts[a]}" for a in arms))
    ev = Evidence("value", n, unit, th.min_cells, cause, by_twin=counts)
    if not judged:
        why = ("no twin is admissible (each moved the test error beyond its tolerance)" if admitted == 0 else
               f"no twin kind has {th.min_cells} admitted cells")
        return [Check("value", "fragile-value", stat, np.nan, thr, None,
                      f"{n} admitted twin cells in judged kinds ({cause}): {why}")], ev
    worst = max(rates, key=lambda a: rates[a])
    ok = units[units["perturbation"].isin(judged)]
    return [Check("value", "fragile-value", stat, rates[worst], thr, rates[worst] > th.scr,
                  f"{n} admitted twin cells in judged kinds ({admitted} of {len(cells)} admitted); "
                  + _kinds_text(counts, rates, units, "changed", "perturbation", th.min_cells, "changed cells")
                  + f"; worst: {worst}; median relative value change {ok['vf'].median():.3g} "
                  "(value change / test-error change)")], ev


def _lost_text(curves: pd.DataFrame) -> str:
    """'points per curve 4 of 4' or 'points per curve 2-4 of 4; adam@label_noise=0.1 lost 2 (3 models without
    a value)'."""
    if curves.empty:
        return ""
    text = f"points per curve {_span(curves['points'])} of {_span(curves['sizes'])}"
    lost = curves[curves["lost"] > 0]
    if not lost.empty:
        ctx = list(curves.columns[1:curves.columns.get_loc("sizes")])  # the rows are {arm, **context, sizes, ...}
        names = [f"{r['arm']}" + "".join(f"@{k}={r[k]}" for k in ctx) + f" lost {int(r['lost'])}"
                 for _, r in lost.iterrows()]
        text += f"; {len(lost)} curve(s) lost points ({', '.join(names)})"
    return text


def _curve_checks(curves: pd.DataFrame, th: Thresholds) -> tuple[list[Check], list[Evidence]]:
    """Parts 3-4: per twin kind, the share of its judged curves whose trend flipped (judged: admitted, enough
    points, a detectable baseline trend) or whose exponent changed (judged: admitted, enough points)."""
    trend_stat = "trend-flip rate, worst twin kind (judged curves whose slope of mu changed sign)"
    scale_stat = "exponent-change rate, worst twin kind (judged curves whose slope of mu changed)"
    trend_thr, scale_thr = f"> {th.trend_rate}", f"> {th.scale_rate}"
    unit = "judged twin curves"
    if curves.empty:
        cause = "no twin learning curves: needs twins and a 'train_size' axis with >= 3 sizes"
        return ([Check("trend", "fragile-trend", trend_stat, np.nan, trend_thr, None, f"0 {unit}: {cause}"),
                 Check("scaling", "fragile-scale", scale_stat, np.nan, scale_thr, None, f"0 {unit}: {cause}")],
                [Evidence("trend", 0, unit, th.min_curves, cause), Evidence("scaling", 0, unit, th.min_curves, cause)])
    arms = sorted(curves["arm"].unique())
    total = len(curves)
    enough = curves["points"] >= th.min_points
    admitted = curves["admitted"].astype(bool) & enough
    def flag(col: str) -> pd.Series:
        return curves[col].fillna(False).astype(bool) if col in curves else pd.Series(False, index=curves.index)
    # a trend can flip only where the baseline has one; an exponent is judged where either arm's slope, or
    # its change, is detectable (two undetectable slopes say nothing about the scaling)
    trend_units = curves[admitted & flag("base_trend")]
    scale_units = curves[admitted & (flag("base_trend") | flag("twin_trend") | flag("exponent_changed"))]
    lost = _lost_text(curves)
    short = int((~enough).sum())
    base = (f"{int(admitted.sum())} of {total} twin curves admitted with >= {th.min_points} points"
            + (f" ({short} with fewer points not judged)" if short else "") + f"; {lost}")
    out_checks, out_ev = [], []
    for part, label, stat, thr, units, flag, rate_thr, what in (
            ("trend", "fragile-trend", trend_stat, trend_thr, trend_units, "flip", th.trend_rate, "flips"),
            ("scaling", "fragile-scale", scale_stat, scale_thr, scale_units, "exponent_changed", th.scale_rate,
             "exponent changes")):
        counts, rates, judged = _per_twin(units, flag, "arm", arms, th.min_curves)
        n = sum(counts[a] for a in judged)
        extra = "" if int(admitted.sum()) == len(units) else (
            f"; {int(admitted.sum()) - len(units)} admitted curves without a detectable baseline trend"
            if part == "trend" else f"; {int(admitted.sum()) - len(units)} admitted curves where neither slope "
            "of mu nor its change is detectable")
        cause = base + extra + "; " + ", ".join(f"{a}: {counts[a]}" for a in arms)
        out_ev.append(Evidence(part, n, unit, th.min_curves, cause, by_twin=counts))
        if not judged:
            out_checks.append(Check(part, label, stat, np.nan, thr, None,
                                    f"{n} judged twin curves ({cause}): no twin kind has {th.min_curves}"))
            continue
        worst = max(rates, key=lambda a: rates[a])
        out_checks.append(Check(part, label, stat, rates[worst], thr, rates[worst] > rate_thr,
                                f"{n} judged twin curves in judged kinds ({base}{extra}); "
                                + _kinds_text(counts, rates, units, flag, "arm", th.min_curves, what)
                                + f"; worst: {worst}"))
    return out_checks, out_ev


def _data_checks(data: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
    """Part 5: the oriented, detectable-change Kendall tau and the elasticity across noise levels on the
    baseline, and the groups they rest on."""
    tau_stat = "oriented Kendall tau across noise levels (pairs where the test error changed; mu counts if it changed)"
    e_stat = "elasticity of mu against test error"
    base = data[data["arm"] == BASE] if not data.empty else data
    unit = "baseline noise groups with distinguishable errors"
    if base.empty:
        cause = "the zoo has no 'label_noise' axis with >= 2 levels"
        return ([Check("data", "data-blind", tau_stat, np.nan, f"<= {th.df_tau}", None, f"0 groups: {cause}"),
                 Check("data", "data-blind", e_stat, np.nan, f"|E| < {th.elasticity}", None, f"0 groups: {cause}")],
                Evidence("data", 0, unit, th.min_groups, cause))
    judged = base[base["judged"] > 0]
    used = len(judged)
    ev = Evidence("data", used, unit, th.min_groups,
                  f"{len(base) - used} of {len(base)} groups have no pair of noise levels whose test errors differ "
                  "detectably (or no values of mu there)")
    df_tau = float(judged["tau"].mean()) if used else np.nan
    e = float(np.nanmedian(judged["elasticity"])) if used and judged["elasticity"].notna().any() else np.nan
    levels = f"{_span(base['levels'])} noise levels each"
    pairs = f"{int(judged['judged'].sum())} judged pairs, {int(judged['agree'].sum())} agree, " \
            f"{int(judged['oppose'].sum())} oppose" if used else "no judged pairs"
    return [Check("data", "data-blind", tau_stat, df_tau, f"<= {th.df_tau}",
                  None if np.isnan(df_tau) or used < th.min_groups else df_tau <= th.df_tau,
                  f"mean over {used} of {len(base)} baseline groups ({levels}; {pairs})"),
            Check("data", "data-blind", e_stat, e, f"|E| < {th.elasticity}",
                  None if np.isnan(e) or used < th.min_groups else abs(e) < th.elasticity,
                  f"median over {int(judged['elasticity'].notna().sum()) if used else 0} of {len(base)} baseline "
                  f"groups ({levels}; extreme levels)")], ev


def _control_check(control: pd.DataFrame, th: Thresholds, reason: str | None) -> tuple[list[Check], Evidence]:
    """Part 6: the largest change under the function-preserving rescaling, and the models it rests on."""
    stat = "largest change under the ReLU rescaling control"
    unit = "control models"
    done = control[control["rv"].notna()] if not control.empty else control
    if done.empty:
        cause = reason or "the control could not be computed"
        return ([Check("control", "fragile-value", stat, np.nan, f"> {th.control_rv}", None, f"0 models: {cause}")],
                Evidence("control", 0, unit, th.min_models, cause))
    n = int(done["model_id"].nunique())
    tol = done["tol"] if "tol" in done else pd.Series(th.control_rv, index=done.index)
    over = done["rv"] > tol
    worst = done.loc[(done["rv"] - tol).idxmax()]
    mc = " or its Monte-Carlo allowance" if "tol" in done and (done["tol"] > th.control_rv).any() else ""
    return ([Check("control", "fragile-value", stat, float(done["rv"].max()),
                   f"> {th.control_rv}{mc} (alpha in {list(ALPHAS)})", bool(over.any()),
                   f"{n} models x {done['alpha'].nunique()} alphas; worst at alpha={worst['alpha']:g}")],
            Evidence("control", n, unit, th.min_models))


def audit_table(t: pd.DataFrame, *, axes: list[str], sign: float = 1.0, thresholds: Thresholds | None = None
                ) -> dict[str, Any]:
    """Parts 1-5 on a table with columns arm ('base' or a twin's name), the grid `axes` (those of the twin's
    baseline), mu (the measure; NaN where it failed), err (test error) and optionally mu_mc_se (each value's
    Monte-Carlo standard error). Returns the tables, checks, the evidence of each part, the seed means, and the
    missing parts and verdict of these parts (the rescaling control is not among them)."""
    th = thresholds or Thresholds()
    form = _form(t["mu"].to_numpy(float))
    keys = [a for a in axes if a != REPLICATE]
    notes = [] if form == "log" else ["the measure takes values <= 0: changes are relative (|new - old| / |old|) "
                                      "and slopes are fitted to mu itself, not log mu"]
    cells = cell_stats(t, keys) if keys else pd.DataFrame()
    has_twins = bool(keys) and bool((t["arm"] != BASE).any())
    twins = twin_cells(cells, keys, th, form) if has_twins else pd.DataFrame()
    admitted: dict[str, float] = {}
    if not twins.empty:
        admitted = {str(p): float(g["admitted"].mean()) for p, g in twins.groupby("perturbation")}
        admitted["all"] = float(twins["admitted"].mean())
    curves = pd.DataFrame()
    if CURVE_AXIS in keys and has_twins:
        curves = learning_curves(cells, twins, keys, form, sign, th)
    data = data_sensitivity(cells, keys, form, sign, th) if DATA_AXIS in keys else pd.DataFrame()
    checks, value_ev = _value_check(twins, th)
    curve_checks, curve_ev = _curve_checks(curves, th)
    data_checks, data_ev = _data_checks(data, th)
    checks, evidence = checks + curve_checks + data_checks, [value_ev, *curve_ev, data_ev]
    if not has_twins:
        notes.append("the zoo has no twins (models with `twin_of`): value, trend and scaling fragility need them")
    if not curves.empty and (curves["lost"] > 0).any():
        notes.append("learning curves that lost points (train sizes with < 2 values of mu in an arm): "
                     + _lost_text(curves).split("; ", 1)[-1] + f"; curves with < {th.min_points} points are not "
                     "judged")
    verdict = verdict_of(checks, missing_parts(checks, evidence, short=True))
    return {"form": form, "cells": twins, "curves": curves, "data": data, "checks": checks, "evidence": evidence,
            "missing": missing_parts(checks, evidence), "verdict": verdict, "admitted": admitted, "notes": notes,
            "means": cells.copy()}


def assemble_report(measure: str, zoo: str, parts: dict[str, Any], control: pd.DataFrame, th: Thresholds,
                    control_reason: str | None = None, notes: list[str] | None = None) -> FragilityReport:
    """The report from audit_table's parts and the rescaling control (part 6), with every part's evidence."""
    control_checks, control_ev = _control_check(control, th, control_reason)
    return FragilityReport(measure=measure, zoo=zoo, form=parts["form"], admitted=parts["admitted"],
                           checks=parts["checks"] + control_checks, evidence=parts["evidence"] + [control_ev],
                           cells=parts["cells"], curves=parts["curves"], data=parts["data"], control=control,
                           thresholds=th, notes=(notes or []) + parts["notes"],
                           means=parts.get("means", pd.DataFrame()))


# ---------------------------------------------------------------- on a zoo


def _signature_fit() -> Any:
    """The gap regression of a signature: ridge (penalty chosen inside the training fold) on phi(signature)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .baselines import ALPHAS as RIDGE_ALPHAS
    return make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))


def cross_fit(x: np.ndarray, gap: np.ndarray, fold: np.ndarray, is_base: np.ndarray, transform: str | None
              ) -> tuple[np.ndarray, Any]:
    """Cross-fitted gap predictions of a signature: the models of fold k (baselines and their twins, which share
    the fold of their baseline) are predicted by the fit on the baseline models of the other folds, so every
    audited value, baseline or twin, is out of sample. Returns the predictions (NaN where the signature is not
    usable) and a fit on every usable baseline (the rescaling control's scalar)."""
    from sklearn.base import clone
    phi = np.log if transform == "log" else (lambda a: a)
    usable = np.isfinite(x).all(1) & ((x > 0).all(1) if transform == "log" else True)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(usable[:, None], phi(np.where(usable[:, None], x, 1.0)), np.nan)
    train_ok = usable & is_base & np.isfinite(gap)
    pred = np.full(len(x), np.nan)
    est = _signature_fit()
    for k in np.unique(fold):
        fit_on = train_ok & (fold != k)
        target = usable & (fold == k)
        if not target.any():
            continue
        if fit_on.sum() < 3:
            raise GenbenchError(f"a cross-fitting fold leaves only {int(fit_on.sum())} baseline models to fit on")
        pred[target] = clone(est).fit(z[fit_on], gap[fit_on]).predict(z[target])
    full = clone(est).fit(z[train_ok], gap[train_ok])
    return pred, full


def _scalar_values(m: Measure, values: pd.DataFrame, zoo: Zoo, base_ids: list[str], anchors: pd.Series
                   ) -> tuple[pd.Series, Any, str]:
    """The audited scalar per model: the measure itself, or for a signature its cross-fitted ridge prediction of
    the gap (leave-one-seed-out over the baseline models; a twin is predicted by its baseline's fold), returned
    with the function that maps a signature to the full fit's prediction (for the rescaling control)."""
    x = measure_matrix(values, m.name)
    ids = values["model_id"].astype(str).to_numpy()
    if m.kind == "scalar":
        return pd.Series(x[:, 0], index=ids), (lambda v: float(np.asarray(v, float).reshape(-1)[0])), ""
    phi = np.log if m.transform == "log" else (lambda a: a)
    table = zoo.table.set_index(zoo.table["model_id"].astype(str))
    is_base = np.isin(ids, base_ids)
    usable = np.isfinite(x).all(1) & ((x > 0).all(1) if m.transform == "log" else True)
    if (usable & is_base).sum() < 6:
        raise GenbenchError(f"{m.name} is a signature: the audit cross-fits its gap prediction on the baseline "
                            f"models, but only {int((usable & is_base).sum())} have usable values")
    anchor = np.array([str(anchors.get(i, i)) for i in ids])
    seed_col = f"hp.{REPLICATE}"
    if seed_col in table.columns and table.loc[anchor, seed_col].nunique() >= 2:
        fold = pd.factorize(table.loc[anchor, seed_col].to_numpy())[0]
        how = "leave-one-seed-out"
    else:
        order = {mid: i for i, mid in enumerate(sorted(base_ids))}
        fold = np.array([order.get(a, 0) % 5 for a in anchor])
        how = "5-fold"
    gap = table.loc[ids, "gap"].to_numpy(float)
    pred, full = cross_fit(x, gap, fold, is_base, m.transform)
    to_scalar = (lambda v: float(full.predict(phi(np.asarray(v, float).reshape(1, -1)))[0]))
    note = (f"{m.name} is a signature: the audited scalar is its ridge prediction of the gap from "
            f"{m.transform or 'linear'}(signature), cross-fitted {how} on the {int((usable & is_base).sum())} "
            "baseline models (each model, baseline or twin, predicted by a fit that never saw its baseline)")
    return pd.Series(pred, index=ids), to_scalar, note


def rescaling_control(m: Measure, zoo: Zoo, ids: list[str], to_scalar: Any, *, device: str, seed: int,
                      form: str, mc_se: pd.Series | None = None, th: Thresholds | None = None) -> pd.DataFrame:
    """Part 6: the measure on each model and on copies rescaled by alpha / 1/alpha around a ReLU (same function).
    `tol`: the relative change allowed, control_rv or, for a stochastic measure whose values carry their
    Monte-Carlo standard error, t * sqrt(2) * mc_se / |mu| when larger."""
    import copy

    from ..harness.evaluate import make_context, run_measure
    from ..measures.weights import rescale_relu_pair
    th = th or Thresholds()
    rows = []
    for mid in ids:
        model = zoo.load_model(mid, device=device)
        train = zoo.training_set(mid)
        init = zoo.load_model(mid, init=True, device=device) if "init_weights" in m.needs else None

        def value(net: Any) -> float:
            ctx = make_context(m, model=net, train=train, init_model=lambda: copy.deepcopy(init), memo={},
                               device=device, seed=seed, budget_s=None)
            out = run_measure(m, ctx)
            if out["error"]:
                raise GenbenchError(f"{m.name} failed on {mid} during the rescaling control: {out['error']}")
            return to_scalar(out["value"])
        original = value(model)
        se = float(mc_se.get(mid, np.nan)) if mc_se is not None else np.nan
        allow = critical(np.inf, th.alpha) * np.sqrt(2) * se / abs(original) if np.isfinite(se) and original else 0.0
        for alpha in ALPHAS:
            scaled = value(rescale_relu_pair(model, alpha))
            both_pos = original > 0 and scaled > 0
            rv = float(_change(scaled, original, "log" if form == "log" and both_pos else "linear"))
            rows.append({"model_id": mid, "alpha": alpha, "mu": original, "mu_rescaled": scaled, "rv": rv,
                         "tol": max(th.control_rv, allow)})
    return pd.DataFrame(rows)


def _control_models(base_ids: list[str], n: int) -> list[str]:
    """`n` baseline models spread evenly over the (sorted) grid."""
    if n <= 0 or not base_ids:
        return []
    picks = np.unique(np.linspace(0, len(base_ids) - 1, min(n, len(base_ids))).round().astype(int))
    return [base_ids[i] for i in picks]


def audit(measure: str | Measure, zoo: str | Zoo, values: pd.DataFrame | None = None, *, device: str | None = None,
          seed: int = SEED, control_models: int = 4, n_boot: int = N_BOOT, thresholds: Thresholds | None = None,
          cache: bool = True, progress: bool = True) -> FragilityReport:
    """The fragility audit (DESIGN section 7) of one measure on a zoo, computing its values first if needed.

    On a zoo without twins or learning curves, the parts that need them are reported as missing, and the
    verdict is then 'inconclusive' (or a failure label followed by the missing parts), never 'robust'. A value
    column `NAME:mc_se` (each model's Monte-Carlo standard error) enters the seed-level standard errors.
    `n_boot` is accepted for callers' sake: the audit's tests are analytic (seed-level standard errors)."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    del n_boot
    m = measure if isinstance(measure, Measure) else get_measure(measure)
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    th = thresholds or Thresholds()
    device = resolve_device(device)
    if values is None:
        values = evaluate([m], zoo, device=device, seed=seed, cache=cache, progress=progress)
    table = zoo.table.copy()
    table["model_id"] = table["model_id"].astype(str)
    twin_of = table["twin_of"] if "twin_of" in table else pd.Series(None, index=table.index)
    is_twin = twin_of.notna() & (twin_of.astype(str) != "")
    base_ids = sorted(table.loc[~is_twin, "model_id"])
    anchors = pd.Series(twin_of.astype(str).where(is_twin, table["model_id"]).to_numpy(),
                        index=table["model_id"])  # a twin takes its baseline's grid point
    mu, to_scalar, note = _scalar_values(m, values, zoo, base_ids, anchors)
    notes = [note] if note else []
    mc_col = m.name + MC_SUFFIX
    mc = pd.Series(values[mc_col].to_numpy(float), index=values["model_id"].astype(str)) \
        if mc_col in values.columns and m.kind == "scalar" else None
    axes = [a for a in zoo.hparams if f"hp.{a}" in table.columns]
    by_id = table.set_index("model_id")
    rows = []
    for mid, row in by_id.iterrows():
        anchor = anchors[mid]
        src = by_id.loc[anchor] if anchor in by_id.index else row
        rows.append({"model_id": mid, "arm": str(row["perturbation"]) if anchor != mid else BASE,
                     **{a: src[f"hp.{a}"] for a in axes}, "mu": mu.get(mid, np.nan), "err": 1.0 - row["test_acc"],
                     **({"mu_mc_se": mc.get(mid, np.nan)} if mc is not None else {})})
    t = pd.DataFrame(rows)
    bad = int((~np.isfinite(t["mu"].astype(float))).sum())
    if bad:
        notes.append(f"{bad} model(s) without a value (failed): left out of the measure's seed means, kept in the "
                     "test error's (admission does not depend on the measure)")
    if mc is not None:
        notes.append(f"the values carry their Monte-Carlo standard errors ({mc_col}): their variance is added to "
                     "the seed variance of every mean of mu")
    sign = -1.0 if m.higher_means == "smaller_gap" else 1.0
    parts = audit_table(t, axes=axes, sign=sign, thresholds=th)
    control, reason = pd.DataFrame(), None
    try:
        control = rescaling_control(m, zoo, _control_models(base_ids, control_models), to_scalar,
                                    device=device, seed=seed, form=parts["form"], mc_se=mc, th=th)
    except (GenbenchError, ValueError) as e:
        reason = str(e)
    if control_models <= 0:
        reason = "no control models were asked for (control_models=0)"
    return assemble_report(m.name, zoo.name, parts, control, th, control_reason=reason, notes=notes)
