"""gb.audit(measure, zoo): the fragility audit of DESIGN section 7. Does a measure keep its value, trend
and scaling when training changes slightly (a twin) while the test error barely moves, does it see data
complexity, and is it blind to a function-preserving rescaling? Every verdict carries its thresholds and the
evidence each part rests on; it is 'robust' only when every part ran on enough evidence and passed."""
from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError
from ..fileio import json_safe
from ..measures import Measure, get_measure
from ..zoo.storage import Zoo, load_zoo
from .rank import hoeffding_weight
from .scores import measure_matrix

BASE = "base"
CURVE_AXIS = "train_size"
DATA_AXIS = "label_noise"
REPLICATE = "seed"
ALPHAS = (0.1, 10.0)
LABELS = ("fragile-value", "fragile-trend", "fragile-scale", "data-blind")


@dataclass(frozen=True)
class Thresholds:
    """Every threshold of the audit (proposals of reference/fragility.md section 5, not the paper's)."""

    z: float = 2.0               # a measure "moved" when |mean change| > z combined seed standard errors
    err_abs_tol: float = 0.05    # a twin is admissible only if its test error moved at most this much
    hoeffding_conf: float = 0.05  # floor of the error tolerance: 2 sqrt(ln(2/conf) / (2 n_test))
    scr: float = 0.5             # fragile-value: spurious-change rate above this
    p_flip: float = 0.5          # fragile-trend: bootstrap probability of a slope-sign flip above this
    sf: float = 2.0              # fragile-scale: exponent change / error-exponent change above this
    elasticity: float = 0.1      # data-blind: |elasticity of mu against test error| below this
    df_tau: float = 0.0          # data-blind: oriented Kendall tau across noise levels at or below this
    control_rv: float = 0.05     # fragile-value: change under the rescaling control above this
    level: float = 0.95          # bootstrap interval level
    # the least evidence a part needs before its pass counts; below it the part is missing, not passed
    min_cells: int = 6           # value: admitted twin cells (a rate of spurious changes in steps of <= 1/6)
    min_curves: int = 3          # trend, scaling: admitted twin learning curves, each beside its baseline
    min_groups: int = 3          # data: baseline groups whose noise levels give distinguishable test errors
    min_models: int = 2          # control: models on which the rescaling control was computed


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
    """What one part of the audit rests on: n units (curves, cells, groups, models) against its minimum."""

    part: str
    n: int
    unit: str
    minimum: int
    cause: str = ""  # why n is what it is (e.g. "the zoo has no twins"), shown when the part is missing

    @property
    def enough(self) -> bool:
        """Whether the part rests on at least its minimum."""
        return self.n >= self.minimum

    @property
    def shortfall(self) -> str:
        """The count against its minimum, e.g. '0 admitted twin curves < 3'."""
        return f"{self.n} {self.unit} < {self.minimum}"

    @property
    def reason(self) -> str:
        """The shortfall and its cause, e.g. '0 admitted twin curves < 3 (the zoo has no twins)'."""
        return self.shortfall + (f" ({self.cause})" if self.cause else "")


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

    @property
    def missing(self) -> dict[str, str]:
        """Part -> why it is missing (could not run, or too little evidence), for parts that did not fail."""
        return missing_parts(self.checks, self.evidence)

    @property
    def verdict(self) -> str:
        """'robust', the failed labels, 'inconclusive (...)', or both (see verdict_of)."""
        return verdict_of(self.checks, missing_parts(self.checks, self.evidence, short=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN as None), as stored in result records; `missing` as [{part, reason}, ...]."""
        evidence = {e.part: {"n": e.n, "unit": e.unit, "minimum": e.minimum} for e in self.evidence}
        missing = [{"part": part, "reason": why} for part, why in self.missing.items()]
        return json_safe({"measure": self.measure, "zoo": self.zoo, "form": self.form, "verdict": self.verdict,
                          "missing": missing, "evidence": evidence, "admitted": self.admitted,
                          "checks": [asdict(c) for c in self.checks], "thresholds": asdict(self.thresholds),
                          "notes": list(self.notes), "control": self.control.to_dict(orient="records"),
                          "curves": self.curves.to_dict(orient="records")})


# ---------------------------------------------------------------- the statistics, on a plain table


def _form(mu: np.ndarray) -> str:
    return "log" if (mu > 0).all() else "linear"


def _f(mu: np.ndarray | float, form: str) -> np.ndarray | float:
    return np.log(mu) if form == "log" else mu


def _change(new: np.ndarray | float, old: np.ndarray | float, form: str) -> np.ndarray | float:
    """|log new - log old| (log form), or |new - old| / |old| when the measure can be <= 0."""
    if form == "log":
        return np.abs(np.log(new) - np.log(old))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(np.asarray(new) - old) / np.abs(old)


def _cells(t: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Seed means, standard deviations and counts of mu and test error per (arm, grid point)."""
    g = t.groupby(["arm", *keys], dropna=False, sort=True)
    out = g.agg(mu=("mu", "mean"), mu_sd=("mu", "std"), err=("err", "mean"), err_sd=("err", "std"),
                S=("mu", "size")).reset_index()
    return out.fillna({"mu_sd": 0.0, "err_sd": 0.0})


def _hoeffding_tol(n_test: int, th: Thresholds) -> float:
    return 2.0 * float(np.sqrt(np.log(2.0 / th.hoeffding_conf) / (2.0 * n_test)))


def twin_cells(cells: pd.DataFrame, keys: list[str], n_test: int, th: Thresholds, form: str) -> pd.DataFrame:
    """Parts 1-2: each twin grid point beside its baseline: admissible?, value change, z-score."""
    base = cells[cells["arm"] == BASE].set_index(keys)
    rows = []
    for _, c in cells[cells["arm"] != BASE].iterrows():
        key = tuple(c[k] for k in keys) if len(keys) > 1 else c[keys[0]]
        if key not in base.index:
            continue
        b = base.loc[key]
        se_err = np.sqrt(b["err_sd"] ** 2 / b["S"] + c["err_sd"] ** 2 / c["S"])
        tol = min(max(th.z * se_err, _hoeffding_tol(n_test, th)), th.err_abs_tol)
        d_err = c["err"] - b["err"]
        se_mu = np.sqrt(b["mu_sd"] ** 2 / b["S"] + c["mu_sd"] ** 2 / c["S"])
        d_mu = abs(c["mu"] - b["mu"])
        z = d_mu / se_mu if se_mu > 0 else (np.inf if d_mu > 0 else 0.0)
        rv = float(_change(c["mu"], b["mu"], form))
        log_err_change = abs(np.log(c["err"]) - np.log(b["err"])) if min(c["err"], b["err"]) > 0 else np.nan
        denom = max(log_err_change, tol / b["err"]) if b["err"] > 0 else np.nan
        rows.append({"perturbation": c["arm"], **{k: c[k] for k in keys}, "err_base": b["err"], "err_twin": c["err"],
                     "err_tol": tol, "admitted": bool(abs(d_err) <= tol), "mu_base": b["mu"], "mu_twin": c["mu"],
                     "rv": rv, "z": z, "vf": rv / denom if denom else np.nan})
    return pd.DataFrame(rows)


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS slopes of y (..., K) on x (K,), over the last axis."""
    xc = x - x.mean()
    return (y - y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)


def _ci(s: np.ndarray, level: float) -> tuple[float, float]:
    s = s[np.isfinite(s)]
    if len(s) < 10:
        return (np.nan, np.nan)
    a = (1 - level) / 2
    return (float(np.quantile(s, a)), float(np.quantile(s, 1 - a)))


def _excludes_zero(ci: tuple[float, float]) -> bool:
    return bool(np.isfinite(ci[0]) and (ci[0] > 0 or ci[1] < 0))


def _curve_boot(t: pd.DataFrame, sizes: list[Any], form: str, rng_seed: int, n_boot: int) -> dict[str, np.ndarray]:
    """Seed-bootstrap (resample seeds within each train size) of one learning curve: [B, K] means of f(mu) and
    log err. The generator is seeded by the curve's context only, so a twin and its baseline share draws."""
    rng = np.random.default_rng(rng_seed)
    mu_b, err_b = [], []
    for n in sizes:
        rows = t[t[CURVE_AXIS] == n].sort_values(REPLICATE) if REPLICATE in t else t[t[CURVE_AXIS] == n]
        mu, err = rows["mu"].to_numpy(float), rows["err"].to_numpy(float)
        idx = rng.integers(0, len(mu), size=(n_boot, len(mu)))
        mu_b.append(mu[idx].mean(1))
        err_b.append(err[idx].mean(1))
    mu_b, err_b = np.stack(mu_b, 1), np.stack(err_b, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"mu": _f(mu_b, form) if form == "linear" or (mu_b > 0).all() else np.full_like(mu_b, np.nan),
                "err": np.log(err_b)}


def learning_curves(t: pd.DataFrame, context: list[str], form: str, sign: float, th: Thresholds,
                    n_boot: int, seed: int) -> pd.DataFrame:
    """Parts 3-4: slope of f(mu) and log err against log n per (arm, context), with seed-bootstrap draws."""
    rows, draws = [], {}
    groups = t.groupby(["arm", *context], dropna=False, sort=True) if context else t.groupby(["arm"], sort=True)
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        arm, ctx = key[0], dict(zip(context, key[1:]))
        sizes = sorted(g[CURVE_AXIS].unique())
        if len(sizes) < 3:
            continue
        cell = g.groupby(CURVE_AXIS)[["mu", "err"]].mean().loc[sizes]
        x = np.log(np.asarray(sizes, dtype=float))
        if (cell["err"] <= 0).any() or (form == "log" and (cell["mu"] <= 0).any()):
            continue
        y_mu, y_err = _f(cell["mu"].to_numpy(), form), np.log(cell["err"].to_numpy())
        # a stable hash (not Python's per-process str hash), so a record's bootstrap reproduces in any process
        ctx_seed = seed + zlib.crc32(repr(sorted(ctx.items())).encode()) % 99991 if ctx else seed
        boot = _curve_boot(g, sizes, form, ctx_seed, n_boot)
        b_mu, b_err = _slopes(x, boot["mu"]), _slopes(x, boot["err"])
        draws[(arm, *ctx.values())] = (b_mu, b_err)
        beta_mu, beta_err = float(_slopes(x, y_mu)), float(_slopes(x, y_err))
        resid = y_mu - (y_mu.mean() + beta_mu * (x - x.mean()))
        r2 = 1 - float(resid @ resid) / float(((y_mu - y_mu.mean()) ** 2).sum()) if np.ptp(y_mu) > 0 else np.nan
        d_mu, d_err = np.sign(np.subtract.outer(y_mu, y_mu)), np.sign(np.subtract.outer(y_err, y_err))
        iu = np.triu_indices(len(sizes), 1)
        rows.append({"arm": arm, **ctx, "sizes": len(sizes), "beta_mu": beta_mu, "beta_mu_ci": _ci(b_mu, th.level),
                     "beta_err": beta_err, "beta_err_ci": _ci(b_err, th.level), "powerlaw_r2": r2,
                     "correct_trend": bool(np.sign(sign * beta_mu) == np.sign(beta_err)),
                     "sign_error": float(np.mean((1 - sign * d_mu[iu] * d_err[iu]) / 2))})
    curves = pd.DataFrame(rows)
    if curves.empty:
        return curves
    return _compare_twins(curves, draws, context, th)


def _compare_twins(curves: pd.DataFrame, draws: dict, context: list[str], th: Thresholds) -> pd.DataFrame:
    """Trend flip (with its bootstrap probability) and scaling fragility of each twin curve vs its baseline."""
    extra = []
    for _, c in curves.iterrows():
        ctx = tuple(c[k] for k in context)
        base = draws.get((BASE, *ctx))
        if c["arm"] == BASE or base is None:
            extra.append({})
            continue
        b_row = curves[(curves["arm"] == BASE) & np.logical_and.reduce([curves[k] == v for k, v in zip(context, ctx)]
                                                                       if context else [np.ones(len(curves), bool)])]
        b = b_row.iloc[0]
        tw_mu, tw_err = draws[(c["arm"], *ctx)]
        p_flip = float(np.mean(np.sign(tw_mu) != np.sign(base[0])))
        flip = (np.sign(c["beta_mu"]) != np.sign(b["beta_mu"])) and p_flip > th.p_flip \
            and _excludes_zero(c["beta_mu_ci"]) and _excludes_zero(b["beta_mu_ci"])
        tau_alpha = float(np.subtract(*reversed(b["beta_err_ci"])))
        d_alpha_mu, d_alpha_err = abs(c["beta_mu"] - b["beta_mu"]), abs(c["beta_err"] - b["beta_err"])
        d_ci = _ci(tw_mu - base[0], th.level)
        sf = d_alpha_mu / max(d_alpha_err, tau_alpha) if max(d_alpha_err, tau_alpha) > 0 else np.nan
        extra.append({"err_exponent_within_ci": bool(d_alpha_err <= tau_alpha), "p_flip": p_flip, "trend_flip": bool(flip),
                      "d_alpha_mu": d_alpha_mu, "d_alpha_err": d_alpha_err, "tau_alpha": tau_alpha, "sf": sf,
                      "d_alpha_mu_ci": d_ci, "scale_fragile": bool(sf > th.sf and _excludes_zero(d_ci)),
                      "d_sign_error": abs(c["sign_error"] - b["sign_error"])})
    return pd.concat([curves.reset_index(drop=True), pd.DataFrame(extra)], axis=1)


def data_sensitivity(cells: pd.DataFrame, keys: list[str], form: str, sign: float, n_test: int) -> pd.DataFrame:
    """Part 5: per arm and fixed other axes, Kendall tau across noise levels between mu and test error (a
    Hoeffding-weighted sign agreement when there are two levels) and the elasticity of mu against error."""
    others = [k for k in keys if k != DATA_AXIS]
    rows = []
    for key, g in cells.groupby(["arm", *others], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(DATA_AXIS)
        if len(g) < 2:
            continue
        mu, err = g["mu"].to_numpy(), g["err"].to_numpy()
        iu = np.triu_indices(len(g), 1)
        agree = sign * np.sign(np.subtract.outer(mu, mu))[iu] * np.sign(np.subtract.outer(err, err))[iu]
        weight = float(hoeffding_weight(np.array([err[-1] - err[0]]), n_test)[0]) if len(g) == 2 else 1.0
        lo, hi = g.iloc[0], g.iloc[-1]
        d_err = np.log(hi["err"]) - np.log(lo["err"]) if min(hi["err"], lo["err"]) > 0 else np.nan
        d_mu = (np.log(hi["mu"]) - np.log(lo["mu"])) if form == "log" else (hi["mu"] - lo["mu"]) / abs(lo["mu"])
        rows.append({"arm": key[0], **dict(zip(others, key[1:])), "levels": len(g), "tau": float(agree.mean()),
                     "weight": weight, "elasticity": sign * d_mu / d_err if d_err else np.nan})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- assembling the verdicts


def _span(counts: pd.Series) -> str:
    """'4' when every count is 4, else 'min-max'."""
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _value_check(cells: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
    """Part 2: the spurious-change rate over admitted twin cells, and the cells it rests on."""
    stat = "spurious-change rate (admitted twin cells where mu moved > z seed SEs)"
    unit = "admitted twin cells"
    if cells.empty:
        return ([Check("value", "fragile-value", stat, np.nan, f"> {th.scr}", None,
                       "0 admitted twin cells: the zoo has no twins")],
                Evidence("value", 0, unit, th.min_cells, "the zoo has no twins"))
    ok = cells[cells["admitted"]]
    ev = Evidence("value", len(ok), unit, th.min_cells,
                  f"{len(cells) - len(ok)} of {len(cells)} twin cells not admissible")
    if ok.empty:
        return [Check("value", "fragile-value", stat, np.nan, f"> {th.scr}", None,
                      f"0 of {len(cells)} twin cells admitted: no twin is admissible (each moved the test error "
                      "by more than its tolerance)")], ev
    scr = float((ok["z"] > th.z).mean())
    arms = ", ".join(map(str, ok["perturbation"].unique()))
    return [Check("value", "fragile-value", stat, scr, f"> {th.scr} (z = {th.z})", scr > th.scr,
                  f"{len(ok)} of {len(cells)} twin cells admitted ({arms}); "
                  f"median relative value change {ok['vf'].median():.3g} (value change / test-error change)")], ev


def _curve_checks(curves: pd.DataFrame, th: Thresholds) -> tuple[list[Check], list[Evidence]]:
    """Parts 3-4: trend flips and scaling changes over admitted twin curves, and the curves they rest on."""
    trend_stat, scale_stat = "bootstrap probability of a slope-sign flip", "exponent change / error-exponent change"
    unit = "admitted twin curves"
    twins = curves[curves["arm"] != BASE] if not curves.empty and "p_flip" in curves else pd.DataFrame()
    if twins.empty:
        cause = "no twin learning curves: needs twins and a 'train_size' axis with >= 3 sizes"
        return ([Check("trend", "fragile-trend", trend_stat, np.nan, f"> {th.p_flip}", None, f"0 {unit}: {cause}"),
                 Check("scaling", "fragile-scale", scale_stat, np.nan, f"> {th.sf}", None, f"0 {unit}: {cause}")],
                [Evidence("trend", 0, unit, th.min_curves, cause), Evidence("scaling", 0, unit, th.min_curves, cause)])
    total = len(twins)
    admitted = twins["admitted"].astype(bool) if "admitted" in twins else pd.Series(False, index=twins.index)
    twins = twins[admitted & twins["p_flip"].notna()]
    scaled = twins[np.isfinite(twins["sf"].astype(float))] if not twins.empty else twins
    evidence = [Evidence("trend", len(twins), unit, th.min_curves, f"{total - len(twins)} of {total} twin curves "
                         "not admissible"),
                Evidence("scaling", len(scaled), unit, th.min_curves, f"{total - len(scaled)} of {total} twin curves "
                         "not admissible or without a finite exponent ratio")]
    if twins.empty:
        reason = (f"0 of {total} twin curves admitted: no twin learning curve is admissible (at some train size "
                  "its test error moved too much)")
        return [Check("trend", "fragile-trend", trend_stat, np.nan, f"> {th.p_flip}", None, reason),
                Check("scaling", "fragile-scale", scale_stat, np.nan, f"> {th.sf}", None, reason)], evidence
    flips = twins[twins["trend_flip"].astype(bool)]
    worst = twins.loc[twins["p_flip"].idxmax()]
    sizes = f"{_span(twins['sizes'])} train sizes each"
    trend = Check("trend", "fragile-trend", trend_stat, float(worst["p_flip"]),
                  f"> {th.p_flip}, sign differs, both 95% intervals exclude 0", bool(len(flips)),
                  f"{len(flips)} of {len(twins)} admitted twin curves flip ({total} twin curves, {sizes}); "
                  f"worst: {worst['arm']}")
    big = scaled.loc[scaled["sf"].astype(float).idxmax()] if not scaled.empty else worst
    scale = Check("scaling", "fragile-scale", scale_stat, float(big["sf"]),
                  f"> {th.sf} with the exponent change's 95% interval excluding 0",
                  bool(scaled["scale_fragile"].astype(bool).any()) if not scaled.empty else None,
                  f"{int(scaled['scale_fragile'].astype(bool).sum())} of {len(scaled)} admitted twin curves with a "
                  f"finite ratio ({total} twin curves, {sizes}); worst: {big['arm']}")
    return [trend, scale], evidence


def _data_checks(data: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
    """Part 5: Kendall tau and elasticity across noise levels on the baseline, and the groups they rest on."""
    base = data[data["arm"] == BASE] if not data.empty else data
    unit = "baseline noise groups with distinguishable errors"
    if base.empty:
        cause = "the zoo has no 'label_noise' axis with >= 2 levels"
        return ([Check("data", "data-blind", "oriented Kendall tau across noise levels", np.nan,
                       f"<= {th.df_tau}", None, f"0 groups: {cause}"),
                 Check("data", "data-blind", "elasticity of mu against test error", np.nan,
                       f"|E| < {th.elasticity}", None, f"0 groups: {cause}")],
                Evidence("data", 0, unit, th.min_groups, cause))
    w = base["weight"].to_numpy()
    used = int((w > 0).sum())
    ev = Evidence("data", used, unit, th.min_groups,
                  f"{len(base) - used} of {len(base)} groups have test errors across noise levels within the "
                  "test set's resolution (Hoeffding weight 0)")
    df_tau = float(np.average(base["tau"], weights=w)) if w.sum() > 0 else np.nan
    e = float(np.nanmedian(base["elasticity"])) if base["elasticity"].notna().any() else np.nan
    how = "Hoeffding-weighted mean over" if (base["levels"] == 2).all() else "mean over"
    levels = f"{_span(base['levels'])} noise levels each"
    return [Check("data", "data-blind", "oriented Kendall tau across noise levels", df_tau, f"<= {th.df_tau}",
                  None if np.isnan(df_tau) else df_tau <= th.df_tau,
                  f"{how} {len(base)} baseline groups ({used} with weight > 0, {levels})"),
            Check("data", "data-blind", "elasticity of mu against test error", e, f"|E| < {th.elasticity}",
                  None if np.isnan(e) else abs(e) < th.elasticity,
                  f"median over {int(base['elasticity'].notna().sum())} baseline groups ({levels})")], ev


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
    worst = done.loc[done["rv"].idxmax()]
    return ([Check("control", "fragile-value", stat, float(worst["rv"]),
                   f"> {th.control_rv} (alpha in {list(ALPHAS)})", bool(worst["rv"] > th.control_rv),
                   f"{n} models x {done['alpha'].nunique()} alphas; worst at alpha={worst['alpha']:g}")],
            Evidence("control", n, unit, th.min_models))


def audit_table(t: pd.DataFrame, *, axes: list[str], n_test: int, sign: float = 1.0, n_boot: int = N_BOOT,
                seed: int = SEED, thresholds: Thresholds | None = None) -> dict[str, Any]:
    """Parts 1-5 on a table with columns arm ('base' or a twin's perturbation), the grid `axes` (those of the
    twin's baseline), mu (the measure) and err (test error). Returns the tables, checks, the evidence of each
    part, and the missing parts and verdict of these parts (the rescaling control is not among them)."""
    th = thresholds or Thresholds()
    form = _form(t["mu"].to_numpy(float))
    keys = [a for a in axes if a != REPLICATE]
    notes = [] if form == "log" else ["the measure takes values <= 0: changes are relative (|new - old| / |old|) "
                                      "and slopes are fitted to mu itself, not log mu"]
    cells = _cells(t, keys) if keys else pd.DataFrame()
    twins = twin_cells(cells, keys, n_test, th, form) if keys and (t["arm"] != BASE).any() else pd.DataFrame()
    admitted: dict[str, float] = {}
    admitted_curve = None
    if not twins.empty:
        admitted = {str(p): float(g["admitted"].mean()) for p, g in twins.groupby("perturbation")}
        admitted["all"] = float(twins["admitted"].mean())
        ctx = [k for k in keys if k != CURVE_AXIS]
        admitted_curve = twins.groupby(["perturbation", *ctx])["admitted"].all() if ctx else \
            twins.groupby("perturbation")["admitted"].all()
    curves = pd.DataFrame()
    if CURVE_AXIS in keys:
        context = [k for k in keys if k != CURVE_AXIS]
        curves = learning_curves(t, context, form, sign, th, n_boot, seed)
    data = data_sensitivity(cells, keys, form, sign, n_test) if DATA_AXIS in keys else pd.DataFrame()
    checks, value_ev = _value_check(twins, th)
    if not curves.empty and admitted_curve is not None:
        ctx = [k for k in keys if k != CURVE_AXIS]
        curves["admitted"] = [row["arm"] == BASE or bool(admitted_curve.get(
            tuple(row[k] for k in ["arm", *ctx]) if ctx else row["arm"], False)) for _, row in curves.iterrows()]
    curve_checks, curve_ev = _curve_checks(curves, th)
    data_checks, data_ev = _data_checks(data, th)
    checks, evidence = checks + curve_checks + data_checks, [value_ev, *curve_ev, data_ev]
    if twins.empty:
        notes.append("the zoo has no twins (models with `twin_of`): value, trend and scaling fragility need them")
    verdict = verdict_of(checks, missing_parts(checks, evidence, short=True))
    return {"form": form, "cells": twins, "curves": curves, "data": data, "checks": checks, "evidence": evidence,
            "missing": missing_parts(checks, evidence), "verdict": verdict, "admitted": admitted, "notes": notes}


def assemble_report(measure: str, zoo: str, parts: dict[str, Any], control: pd.DataFrame, th: Thresholds,
                    control_reason: str | None = None, notes: list[str] | None = None) -> FragilityReport:
    """The report from audit_table's parts and the rescaling control (part 6), with every part's evidence."""
    control_checks, control_ev = _control_check(control, th, control_reason)
    return FragilityReport(measure=measure, zoo=zoo, form=parts["form"], admitted=parts["admitted"],
                           checks=parts["checks"] + control_checks, evidence=parts["evidence"] + [control_ev],
                           cells=parts["cells"], curves=parts["curves"], data=parts["data"], control=control,
                           thresholds=th, notes=(notes or []) + parts["notes"])


# ---------------------------------------------------------------- on a zoo


def _scalar_values(m: Measure, values: pd.DataFrame, zoo: Zoo, base_ids: list[str]) -> tuple[pd.Series, Any, str]:
    """The audited scalar per model: the measure itself, or for a signature its linear prediction of the gap
    fitted on the baseline models (returned with the function that maps a signature to it)."""
    x = measure_matrix(values, m.name)
    ids = values["model_id"].astype(str).to_numpy()
    if m.kind == "scalar":
        return pd.Series(x[:, 0], index=ids), (lambda v: float(np.asarray(v, float).reshape(-1)[0])), ""
    from sklearn.linear_model import LinearRegression
    phi = np.log if m.transform == "log" else (lambda a: a)
    ok = np.isfinite(x).all(1) & np.isin(ids, base_ids) & ((x > 0).all(1) if m.transform == "log" else True)
    if ok.sum() < x.shape[1] + 2:
        raise GenbenchError(f"{m.name} is a signature: the audit fits its gap prediction on the baseline models, "
                            f"but only {int(ok.sum())} have usable values")
    gap = zoo.table.set_index("model_id").loc[ids[ok], "gap"].to_numpy(float)
    reg = LinearRegression().fit(phi(x[ok]), gap)
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = reg.predict(np.nan_to_num(phi(np.where(x > 0, x, np.nan)) if m.transform == "log" else x, nan=0.0))
    pred[~np.isfinite(x).all(1)] = np.nan
    to_scalar = (lambda v: float(reg.predict(phi(np.asarray(v, float).reshape(1, -1)))[0]))
    note = (f"{m.name} is a signature: the audited scalar is its linear prediction of the gap from "
            f"{m.transform or 'linear'}(signature), fitted on the {int(ok.sum())} baseline models")
    return pd.Series(pred, index=ids), to_scalar, note


def rescaling_control(m: Measure, zoo: Zoo, ids: list[str], to_scalar: Any, *, device: str, seed: int,
                      form: str) -> pd.DataFrame:
    """Part 6: the measure on each model and on copies rescaled by alpha / 1/alpha around a ReLU (same function)."""
    import copy

    from ..harness.evaluate import make_context, run_measure
    from ..measures.weights import rescale_relu_pair
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
        for alpha in ALPHAS:
            scaled = value(rescale_relu_pair(model, alpha))
            both_pos = original > 0 and scaled > 0
            rv = float(_change(scaled, original, "log" if form == "log" and both_pos else "linear"))
            rows.append({"model_id": mid, "alpha": alpha, "mu": original, "mu_rescaled": scaled, "rv": rv})
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
    verdict is then 'inconclusive' (or a failure label followed by the missing parts), never 'robust'."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
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
    mu, to_scalar, note = _scalar_values(m, values, zoo, base_ids)
    notes = [note] if note else []
    axes = [a for a in zoo.hparams if f"hp.{a}" in table.columns]
    by_id = table.set_index("model_id")
    rows = []
    anchors = twin_of.astype(str).where(is_twin, table["model_id"])  # a twin takes its baseline's grid point
    for (mid, row), anchor in zip(by_id.iterrows(), anchors):
        src = by_id.loc[anchor] if anchor in by_id.index else row
        rows.append({"model_id": mid, "arm": str(row["perturbation"]) if anchor != mid else BASE,
                     **{a: src[f"hp.{a}"] for a in axes}, "mu": mu.get(mid, np.nan), "err": 1.0 - row["test_acc"]})
    t = pd.DataFrame(rows)
    bad = int((~np.isfinite(t["mu"])).sum())
    if bad:
        notes.append(f"{bad} model(s) without a value (failed) were dropped, not imputed")
        t = t[np.isfinite(t["mu"])]
    sign = -1.0 if m.higher_means == "smaller_gap" else 1.0
    n_test = int(zoo.manifest.get("test_size", 10_000))
    parts = audit_table(t, axes=axes, n_test=n_test, sign=sign, n_boot=n_boot, seed=seed, thresholds=th)
    control, reason = pd.DataFrame(), None
    try:
        control = rescaling_control(m, zoo, _control_models(base_ids, control_models), to_scalar,
                                    device=device, seed=seed, form=parts["form"])
    except (GenbenchError, ValueError) as e:
        reason = str(e)
    return assemble_report(m.name, zoo.name, parts, control, th, control_reason=reason, notes=notes)
