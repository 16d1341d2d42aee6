"""The fragility audit's report (docs/fragility.md): its thresholds, checks, evidence and the report itself with
their record forms, and the verdict rules: how each part's tables become checks resting on evidence, and how the
checks and the missing evidence become a verdict. No torch, no measures, no zoo."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from ..errors import GenbenchError
from ..fileio import json_safe
from .audit_stats import BASE

LABELS = ("fragile-value", "fragile-trend", "fragile-scale", "data-blind")

__all__ = ["LABELS", "Check", "Evidence", "FragilityReport", "Thresholds", "compact", "control_check",
           "curve_checks", "data_checks", "lost_text", "missing_parts", "value_check", "verdict_of"]


@dataclass(frozen=True)
class Thresholds:
    """Every threshold of the audit (its own proposals, not the paper's; docs/fragility.md)."""

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

    def __post_init__(self) -> None:
        """Refuse a threshold no audit can mean (alpha 1.5, a nan tolerance, a rate of -1, 0 curves): one line
        naming the field, not a verdict on nonsense or a TypeError from inside a part."""
        for f in fields(self):
            value, default = getattr(self, f.name), f.default
            whole = isinstance(default, int)
            ok_type = isinstance(value, int if whole else (int, float)) and not isinstance(value, bool)
            if not ok_type or not np.isfinite(value):
                raise GenbenchError(f"Thresholds({f.name}={value!r}): {f.name} must be a finite "
                                    f"{'whole number' if whole else 'number'} (default {default})")
            lo, hi, what = _RANGES.get(f.name, (0.0, np.inf, "0 or more"))
            if not (lo < value < hi if f.name == "alpha" else lo <= value <= hi):
                raise GenbenchError(f"Thresholds({f.name}={value!r}): {f.name} must be {what} (default {default})")


_RANGES = {"alpha": (0.0, 1.0, "between 0 and 1 (the level of every test)"),
           **{k: (0.0, 1.0, "a share between 0 and 1") for k in ("scr", "trend_rate", "scale_rate", "df_tau")},
           **{k: (1, np.inf, "1 or more") for k in ("min_cells", "min_curves", "min_points", "min_groups",
                                                    "min_models")}}


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


# ---------------------------------------------------------------- the verdict


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


# ---------------------------------------------------------------- the report


def compact(df: pd.DataFrame) -> dict[str, list[Any]]:
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
    zoo_table_sha256: str | None = None  # the audit zoo's table: which build of it the verdict rests on

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
                          "means": compact(self.means) if not self.means.empty else None,
                          **({"zoo_table_sha256": self.zoo_table_sha256} if self.zoo_table_sha256 else {})})


# ---------------------------------------------------------------- the checks of each part


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


def value_check(cells: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
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


def lost_text(curves: pd.DataFrame) -> str:
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


@dataclass(frozen=True)
class _CurvePart:
    """What differs between the two curve parts: their names, the flag counted, its threshold's field."""

    part: str
    label: str
    statistic: str
    flag: str        # the column of a curve that counts against the measure
    what: str        # the flagged curves, as named per twin kind
    rate: str        # the field of Thresholds the worst kind's rate is held to
    unjudged: str    # the admitted curves this part leaves out


_TREND = _CurvePart("trend", "fragile-trend", "trend-flip rate, worst twin kind (judged curves whose slope of mu "
                    "changed sign)", "flip", "flips", "trend_rate",
                    "admitted curves without a detectable baseline trend")
_SCALING = _CurvePart("scaling", "fragile-scale", "exponent-change rate, worst twin kind (judged curves whose slope "
                      "of mu changed)", "exponent_changed", "exponent changes", "scale_rate",
                      "admitted curves where neither slope of mu nor its change is detectable")
_CURVE_UNIT = "judged twin curves"


def _flag(curves: pd.DataFrame, col: str) -> pd.Series:
    """A boolean column of the curves, False where it is missing or NaN."""
    return curves[col].fillna(False).astype(bool) if col in curves else pd.Series(False, index=curves.index)


def curve_checks(curves: pd.DataFrame, th: Thresholds) -> tuple[list[Check], list[Evidence]]:
    """Parts 3-4: per twin kind, the share of its judged curves whose trend flipped (judged: admitted, enough
    points, a detectable baseline trend) or whose exponent changed (judged: admitted, enough points)."""
    if curves.empty:
        cause = "no twin learning curves: needs twins and a 'train_size' axis with >= 3 sizes"
        return ([Check(p.part, p.label, p.statistic, np.nan, f"> {getattr(th, p.rate)}", None,
                       f"0 {_CURVE_UNIT}: {cause}") for p in (_TREND, _SCALING)],
                [Evidence(p.part, 0, _CURVE_UNIT, th.min_curves, cause) for p in (_TREND, _SCALING)])
    enough = curves["points"] >= th.min_points
    admitted = curves["admitted"].astype(bool) & enough
    # a trend can flip only where the baseline has one; an exponent is judged where either arm's slope, or
    # its change, is detectable (two undetectable slopes say nothing about the scaling)
    trend_units = curves[admitted & _flag(curves, "base_trend")]
    scale_units = curves[admitted & (_flag(curves, "base_trend") | _flag(curves, "twin_trend")
                                     | _flag(curves, "exponent_changed"))]
    short = int((~enough).sum())
    base = (f"{int(admitted.sum())} of {len(curves)} twin curves admitted with >= {th.min_points} points"
            + (f" ({short} with fewer points not judged)" if short else "") + f"; {lost_text(curves)}")
    arms = sorted(curves["arm"].unique())
    trend = _curve_check(_TREND, trend_units, arms, int(admitted.sum()), base, th)
    scaling = _curve_check(_SCALING, scale_units, arms, int(admitted.sum()), base, th)
    return [trend[0], scaling[0]], [trend[1], scaling[1]]


def _curve_check(p: _CurvePart, units: pd.DataFrame, arms: list[str], admitted: int, base: str, th: Thresholds
                 ) -> tuple[Check, Evidence]:
    """One curve part on its judged curves `units` (of `admitted` admitted ones): its check and evidence."""
    thr, rate_thr = f"> {getattr(th, p.rate)}", getattr(th, p.rate)
    counts, rates, judged = _per_twin(units, p.flag, "arm", arms, th.min_curves)
    n = sum(counts[a] for a in judged)
    extra = "" if admitted == len(units) else f"; {admitted - len(units)} {p.unjudged}"
    cause = base + extra + "; " + ", ".join(f"{a}: {counts[a]}" for a in arms)
    ev = Evidence(p.part, n, _CURVE_UNIT, th.min_curves, cause, by_twin=counts)
    if not judged:
        return Check(p.part, p.label, p.statistic, np.nan, thr, None,
                     f"{n} judged twin curves ({cause}): no twin kind has {th.min_curves}"), ev
    worst = max(rates, key=lambda a: rates[a])
    return Check(p.part, p.label, p.statistic, rates[worst], thr, rates[worst] > rate_thr,
                 f"{n} judged twin curves in judged kinds ({base}{extra}); "
                 + _kinds_text(counts, rates, units, p.flag, "arm", th.min_curves, p.what)
                 + f"; worst: {worst}"), ev


def data_checks(data: pd.DataFrame, th: Thresholds) -> tuple[list[Check], Evidence]:
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


def control_check(control: pd.DataFrame, th: Thresholds, reason: str | None, alphas: tuple[float, ...]
                  ) -> tuple[list[Check], Evidence]:
    """Part 6: the largest change under the function-preserving rescaling by `alphas`, and the models it rests
    on; `reason` says why the control is empty, when it is."""
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
                   f"> {th.control_rv}{mc} (alpha in {list(alphas)})", bool(over.any()),
                   f"{n} models x {done['alpha'].nunique()} alphas; worst at alpha={worst['alpha']:g}")],
            Evidence("control", n, unit, th.min_models))
