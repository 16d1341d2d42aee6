"""gb.audit(measure, zoo): the fragility audit (docs/fragility.md). Does a measure keep its value, trend and
scaling when training changes slightly (a twin) while the test error barely moves, does it see data complexity,
and is it blind to a function-preserving rescaling? Every verdict carries its thresholds and the evidence each
part rests on; it is 'robust' only when every part ran on enough evidence and passed.

This module runs it: the audited values (through the harness; a signature's cross-fitted gap prediction), the
rescaling control on real networks, and the report assembled from the statistics of `audit_stats` (the one rule
every part is decided by) and the checks and verdict rules of `audit_report`."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError, check_seed
from ..measures import Measure, get_measure
from ..measures.registry import resolve_measures
from ..zoo.storage import Zoo, load_zoo
from .audit_report import (LABELS, Check, Evidence, FragilityReport, Thresholds, control_check, curve_checks,
                           data_checks, lost_text, missing_parts, value_check, verdict_of)
from .audit_stats import (BASE, CURVE_AXIS, DATA_AXIS, REPLICATE, cell_stats, critical, data_sensitivity,
                          learning_curves, twin_cells, value_change, value_form)
from .scores import check_ids, check_table_form, measure_matrix

ALPHAS = (0.1, 10.0)
MC_SUFFIX = ":mc_se"  # a value-table column `NAME:mc_se`: each model's Monte-Carlo standard error of the measure

__all__ = ["ALPHAS", "BASE", "CURVE_AXIS", "DATA_AXIS", "LABELS", "MC_SUFFIX", "REPLICATE", "Check", "Evidence",
           "FragilityReport", "Thresholds", "assemble_report", "audit", "audit_table", "cell_stats",
           "check_audit_zoo", "critical",
           "has_twins",
           "cross_fit", "data_sensitivity", "learning_curves", "missing_parts", "pick_control_models",
           "rescaling_control", "twin_cells", "verdict_of"]


# ---------------------------------------------------------------- parts 1-5 and the report


def audit_table(t: pd.DataFrame, *, axes: list[str], sign: float = 1.0, thresholds: Thresholds | None = None
                ) -> dict[str, Any]:
    """Parts 1-5 on a table with columns arm ('base' or a twin's name), the grid `axes` (those of the twin's
    baseline), mu (the measure; NaN where it failed), err (test error) and optionally mu_mc_se (each value's
    Monte-Carlo standard error). Returns the tables, checks, the evidence of each part, the seed means, and the
    missing parts and verdict of these parts (the rescaling control is not among them)."""
    th = thresholds or Thresholds()
    form = value_form(t["mu"].to_numpy(float))
    keys = [a for a in axes if a != REPLICATE]
    cells = cell_stats(t, keys) if keys else pd.DataFrame()
    has_twins = bool(keys) and bool((t["arm"] != BASE).any())
    twins = twin_cells(cells, keys, th, form) if has_twins else pd.DataFrame()
    curves = learning_curves(cells, twins, keys, form, sign, th) if CURVE_AXIS in keys and has_twins \
        else pd.DataFrame()
    data = data_sensitivity(cells, keys, form, sign, th) if DATA_AXIS in keys else pd.DataFrame()
    value, value_ev = value_check(twins, th)
    trend_scale, curve_ev = curve_checks(curves, th)
    data_part, data_ev = data_checks(data, th)
    checks, evidence = value + trend_scale + data_part, [value_ev, *curve_ev, data_ev]
    verdict = verdict_of(checks, missing_parts(checks, evidence, short=True))
    return {"form": form, "cells": twins, "curves": curves, "data": data, "checks": checks, "evidence": evidence,
            "missing": missing_parts(checks, evidence), "verdict": verdict, "admitted": _admitted(twins),
            "notes": _table_notes(form, has_twins, curves, th, t["mu"].to_numpy(float)), "means": cells.copy()}


def _admitted(twins: pd.DataFrame) -> dict[str, float]:
    """The share of admitted twin cells per twin kind and over all ('all'); empty without twins."""
    if twins.empty:
        return {}
    admitted = {str(p): float(g["admitted"].mean()) for p, g in twins.groupby("perturbation")}
    admitted["all"] = float(twins["admitted"].mean())
    return admitted


def _table_notes(form: str, has_twins: bool, curves: pd.DataFrame, th: Thresholds, mu: np.ndarray
                 ) -> list[str]:
    """What a reader of parts 1-5 must know: a linear form, no twins, learning curves that lost points."""
    notes = [] if form == "log" else ["the measure takes values <= 0: changes are relative (|new - old| / |old|) "
                                      "and slopes are fitted to mu itself, not log mu"]
    if not np.isfinite(mu).any():  # value_form says 'linear' then: no value is <= 0 either
        notes = ["no model has a value of the measure: no part could be judged"]
    if not has_twins:
        notes.append("the zoo has no twins (models with `twin_of`): value, trend and scaling fragility need them")
    if not curves.empty and (curves["lost"] > 0).any():
        notes.append("learning curves that lost points (train sizes with < 2 values of mu in an arm): "
                     + lost_text(curves).split("; ", 1)[-1] + f"; curves with < {th.min_points} points are not "
                     "judged")
    return notes


def assemble_report(measure: str, zoo: str, parts: dict[str, Any], control: pd.DataFrame, th: Thresholds,
                    control_reason: str | None = None, notes: list[str] | None = None,
                    table_sha256: str | None = None) -> FragilityReport:
    """The report from audit_table's parts and the rescaling control (part 6), with every part's evidence."""
    control_checks, control_ev = control_check(control, th, control_reason, ALPHAS)
    return FragilityReport(measure=measure, zoo=zoo, form=parts["form"], admitted=parts["admitted"],
                           checks=parts["checks"] + control_checks, evidence=parts["evidence"] + [control_ev],
                           cells=parts["cells"], curves=parts["curves"], data=parts["data"], control=control,
                           thresholds=th, notes=(notes or []) + parts["notes"],
                           means=parts.get("means", pd.DataFrame()), zoo_table_sha256=table_sha256)


# ---------------------------------------------------------------- the audited values


def _signature_fit() -> Any:
    """The gap regression of a signature: ridge (penalty chosen inside the training fold) on phi(signature)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .recipe import ALPHAS as RIDGE_ALPHAS
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
    fold, how = _folds(table, np.array([str(anchors.get(i, i)) for i in ids]), base_ids)
    pred, full = cross_fit(x, table.loc[ids, "gap"].to_numpy(float), fold, is_base, m.transform)
    to_scalar = (lambda v: float(full.predict(phi(np.asarray(v, float).reshape(1, -1)))[0]))
    note = (f"{m.name} is a signature: the audited scalar is its ridge prediction of the gap from "
            f"{m.transform or 'linear'}(signature), cross-fitted {how} on the {int((usable & is_base).sum())} "
            "baseline models (each model, baseline or twin, predicted by a fit that never saw its baseline)")
    return pd.Series(pred, index=ids), to_scalar, note


def _folds(table: pd.DataFrame, anchor: np.ndarray, base_ids: list[str]) -> tuple[np.ndarray, str]:
    """The cross-fitting fold of each model by its baseline `anchor`: its seed where the zoo has several, else
    one of 5 folds over the sorted baselines; with how they were made."""
    seed_col = f"hp.{REPLICATE}"
    if seed_col in table.columns and table.loc[anchor, seed_col].nunique() >= 2:
        return pd.factorize(table.loc[anchor, seed_col].to_numpy())[0], "leave-one-seed-out"
    order = {mid: i for i, mid in enumerate(sorted(base_ids))}
    return np.array([order.get(a, 0) % 5 for a in anchor]), "5-fold"


# ---------------------------------------------------------------- the rescaling control (part 6)


def rescaling_control(m: Measure, zoo: Zoo, ids: list[str], to_scalar: Any, *, device: str, seed: int,
                      form: str, mc_se: pd.Series | None = None, th: Thresholds | None = None,
                      executor: Any = None) -> pd.DataFrame:
    """Part 6: the measure on each model and on copies rescaled by alpha / 1/alpha around a ReLU (same function),
    each call made by `executor` (default: here). `tol`: the relative change allowed, control_rv or, for a
    stochastic measure whose values carry their Monte-Carlo standard error, t * sqrt(2) * mc_se / |mu| when
    larger."""
    from ..harness.executor import Executor
    from ..measures.weights import rescale_relu_pair
    th = th or Thresholds()
    run = executor or Executor()
    rows = []
    for mid in ids:
        def value(alpha: float | None) -> float:
            """The audited scalar of the measure on this model, rescaled by `alpha` when given."""
            out = run.run(zoo, mid, [m], device=device, seed=seed, budget_s=None, alpha=alpha)[m.name]
            if out["error"]:
                raise GenbenchError(f"{m.name} failed on {mid} during the rescaling control: {out['error']}")
            return to_scalar(out["value"])
        original = value(None)
        model = zoo.load_model(mid, device=device)
        se = float(mc_se.get(mid, np.nan)) if mc_se is not None else np.nan
        allow = critical(np.inf, th.alpha) * np.sqrt(2) * se / abs(original) if np.isfinite(se) and original else 0.0
        for alpha in ALPHAS:
            rescale_relu_pair(model, alpha)  # a network it cannot rescale says why (ValueError) before any call
            scaled = value(alpha)
            both_pos = original > 0 and scaled > 0
            rv = float(value_change(scaled, original, "log" if form == "log" and both_pos else "linear"))
            rows.append({"model_id": mid, "alpha": alpha, "mu": original, "mu_rescaled": scaled, "rv": rv,
                         "tol": max(th.control_rv, allow)})
    return pd.DataFrame(rows)


def pick_control_models(base_ids: list[str], n: int) -> list[str]:
    """`n` baseline models spread evenly over the (sorted) grid."""
    if n <= 0 or not base_ids:
        return []
    picks = np.unique(np.linspace(0, len(base_ids) - 1, min(n, len(base_ids))).round().astype(int))
    return [base_ids[i] for i in picks]


def _control(m: Measure, zoo: Zoo, ids: list[str], to_scalar: Any, **kw: Any) -> tuple[pd.DataFrame, str | None]:
    """The rescaling control on `ids`, or an empty table and why it could not be computed."""
    try:
        return rescaling_control(m, zoo, ids, to_scalar, **kw), None
    except (GenbenchError, ValueError) as e:
        return pd.DataFrame(), str(e)


# ---------------------------------------------------------------- on a zoo


def audit(measure: str | Measure, zoo: str | Zoo, values: pd.DataFrame | None = None, *, device: str | None = None,
          seed: int = SEED, control_models: int = 4, n_boot: int = N_BOOT, thresholds: Thresholds | None = None,
          cache: bool = True, progress: bool = True, executor: Any = "local", allow_partial: bool = False
          ) -> FragilityReport:
    """The fragility audit (docs/fragility.md) of one measure on a zoo, computing its values first if needed; the
    measure calls (values and the rescaling control) are made by `executor` (harness/executor.py).

    On a zoo without twins or learning curves, the parts that need them are reported as missing, and the
    verdict is then 'inconclusive' (or a failure label followed by the missing parts), never 'robust'. A value
    column `NAME:mc_se` (each model's Monte-Carlo standard error) enters the seed-level standard errors.
    `n_boot` is accepted for callers' sake: the audit's tests are analytic (seed-level standard errors). A partial
    zoo (an interrupted build) is refused unless `allow_partial`: its missing cells change the verdict, and a
    record of it could not be told from one on the whole zoo. The report cites the zoo's table sha256."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    del n_boot
    check_seed("seed", seed)
    m = resolve_measures(measure)[0] if callable(measure) and not isinstance(measure, Measure) else \
        get_measure(measure)  # a name, a Measure, or a registered function as evaluate takes it
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    partial = check_audit_zoo(zoo, allow_partial=allow_partial)
    th = thresholds or Thresholds()
    device = resolve_device(device)
    if values is None:
        values = evaluate([m], zoo, device=device, seed=seed, cache=cache, progress=progress, executor=executor)
    else:  # the caller's table: values of another zoo gave a verdict on nothing
        check_table_form(values, "audit")
        check_ids(values, zoo)
    table = zoo.table.copy()
    table["model_id"] = table["model_id"].astype(str)
    base_ids, anchors = _anchors(table)
    mu, to_scalar, note = _scalar_values(m, values, zoo, base_ids, anchors)
    mc_col = m.name + MC_SUFFIX
    mc = pd.Series(values[mc_col].to_numpy(float), index=values["model_id"].astype(str)) \
        if mc_col in values.columns and m.kind == "scalar" else None
    axes = [a for a in zoo.hparams if f"hp.{a}" in table.columns]
    t = _audit_frame(table, anchors, axes, mu, mc)
    notes = ([partial] if partial else []) + ([note] if note else []) + _value_notes(t, mc_col if mc is not None
                                                                                     else None)
    parts = audit_table(t, axes=axes, sign=-1.0 if m.higher_means == "smaller_gap" else 1.0, thresholds=th)
    from ..harness.executor import resolve_executor
    control, reason = _control(m, zoo, pick_control_models(base_ids, control_models), to_scalar, device=device,
                               seed=seed, form=parts["form"], mc_se=mc, th=th, executor=resolve_executor(executor))
    if control_models <= 0:
        reason = "no control models were asked for (control_models=0)"
    return assemble_report(m.name, zoo.name, parts, control, th, control_reason=reason, notes=notes,
                           table_sha256=zoo.table_sha256)


def check_audit_zoo(zoo: Zoo, *, allow_partial: bool = False, flag: str | None = "allow_partial=True") -> str:
    """Refuse a partial audit zoo (a GenbenchError naming the count and the fix, and `flag` where the caller has
    one) unless `allow_partial`; then the note its report carries ('' for a complete zoo)."""
    if zoo.complete:
        return ""
    counts = f"{len(zoo)} of {zoo.expected_models} models"
    if not allow_partial:
        anyway = f"; pass {flag} to audit it anyway, the report then says so" if flag else ""
        raise GenbenchError(f"audit zoo {zoo.name!r} is partial: {counts}; {zoo.completion_hint()} (its missing "
                            f"cells change the verdict{anyway})")
    return f"the audit zoo is partial ({counts}): the verdict rests on those models only"


def has_twins(zoo: Zoo) -> bool:
    """Whether `zoo` holds twins (models trained again with one small change, `twin_of` in its table): without them
    the audit's value, trend and scaling parts cannot run and its verdict can only be inconclusive."""
    table = zoo.table.copy()
    table["model_id"] = table["model_id"].astype(str)
    return len(_anchors(table)[0]) < len(table)


def _anchors(table: pd.DataFrame) -> tuple[list[str], pd.Series]:
    """The baseline models (sorted), and each model's anchor: itself, or for a twin its baseline (whose grid
    point it takes)."""
    twin_of = table["twin_of"] if "twin_of" in table else pd.Series(None, index=table.index)
    is_twin = twin_of.notna() & (twin_of.astype(str) != "")
    base_ids = sorted(table.loc[~is_twin, "model_id"])
    anchors = pd.Series(twin_of.astype(str).where(is_twin, table["model_id"]).to_numpy(), index=table["model_id"])
    return base_ids, anchors


def _audit_frame(table: pd.DataFrame, anchors: pd.Series, axes: list[str], mu: pd.Series, mc: pd.Series | None
                 ) -> pd.DataFrame:
    """audit_table's input: per model its arm, its anchor's grid point, mu, the test error and mu's
    Monte-Carlo standard error (when the values carry it)."""
    by_id = table.set_index("model_id")
    rows = []
    for mid, row in by_id.iterrows():
        anchor = anchors[mid]
        src = by_id.loc[anchor] if anchor in by_id.index else row
        rows.append({"model_id": mid, "arm": str(row["perturbation"]) if anchor != mid else BASE,
                     **{a: src[f"hp.{a}"] for a in axes}, "mu": mu.get(mid, np.nan), "err": 1.0 - row["test_acc"],
                     **({"mu_mc_se": mc.get(mid, np.nan)} if mc is not None else {})})
    return pd.DataFrame(rows)


def _value_notes(t: pd.DataFrame, mc_col: str | None) -> list[str]:
    """Notes on the audited values: models without one, and Monte-Carlo errors entering the seed means."""
    notes = []
    bad = int((~np.isfinite(t["mu"].astype(float))).sum())
    if bad:
        notes.append(f"{bad} model(s) without a value (failed): left out of the measure's seed means, kept in the "
                     "test error's (admission does not depend on the measure)")
    if mc_col is not None:
        notes.append(f"the values carry their Monte-Carlo standard errors ({mc_col}): their variance is added to "
                     "the seed variance of every mean of mu")
    return notes
