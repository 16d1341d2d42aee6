"""gb.score(values, zoo): regression and rank scores of every measure in a value table, each with a 95% paired
bootstrap interval over models, and the reasons for anything that could not be computed or honestly reported."""
from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError, check_count, check_n_boot, check_seed, did_you_mean
from ..text import interval_end
from ..measures import get_measure
from ..zoo.storage import Zoo, load_zoo
from sklearn.base import clone
from threadpoolctl import threadpool_limits
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score

from ..measures.registry import TRANSFORMS
from . import rank
from .recipe import ALPHAS, RecipePlus, hparam_design, recipe_features, with_recipe
from .regression import (K_FOLDS, MODELS_PER_FEATURE, REPEATS, CrossValidation, PhiRegression, adjusted_r2,
                         bootstrap_adj_r2, cross_validate, enough_models)
from .resample import outside_text, percentile_interval, pooled_scores, resample_weights
from .spec import REGRESSION, SCORE_NAMES, MeasureScores, is_flat, phi_text, score_label

TARGETS = ("gap", "test_acc")


class Scores:
    """Scores of several measures on one zoo: `scores[name]` and `scores.table` (one row per measure)."""

    def __init__(self, zoo: str, target: str, items: dict[str, MeasureScores]):
        self.zoo, self.target, self.items = zoo, target, items

    def __contains__(self, name: object) -> bool:
        return name in self.items

    def __getitem__(self, name: str) -> MeasureScores:
        if name not in self.items:
            raise did_you_mean(name, self.items, what="scored measure")
        return self.items[name]

    def __iter__(self):
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        """A readable summary: per measure, best k-fold R^2 first, the headline scores with their 95% intervals and
        whether it behaves as it claims (AGAINST: its free slope or tau runs against its declared direction)."""
        def cell(s: MeasureScores, key: str) -> str:
            if key in s.refused:
                return "refused"
            v = s.values.get(key)
            if v is None or not np.isfinite(v):
                return "-"
            lo, hi = s.intervals.get(key, (np.nan, np.nan))
            return f"{v:.3f}" + (f" [{interval_end(lo, 3)}, {interval_end(hi, 3)}]" if np.isfinite(lo) and
                                 np.isfinite(hi) else "")

        keys = ("kfold_r2", "delta_r2", "adj_r2", "tau", "cmi")
        rows = [{"measure": s.measure, "phi": phi_text(s.transform_used, s.transform or ""), "n": s.n,
                 **{score_label(k): cell(s, k) for k in keys},
                 "claim": claim_of(s.direction) or "-",
                 "notes": len(s.notes) + len(s.refused)}
                for s in sorted(self, key=lambda s: -s.values.get("kfold_r2", -np.inf))]
        head = f"Scores on {self.zoo}, target {self.target}: {len(self)} measure(s), 95% paired bootstrap intervals"
        foot = ("notes: how many notes and refusals a measure has; scores[NAME].notes and .refused say them"
                if any(r["notes"] for r in rows) else "")
        return head + ("\n" + pd.DataFrame(rows).to_string(index=False) if rows else "") + (f"\n{foot}" if foot else "")

    @property
    def table(self) -> pd.DataFrame:
        """One row per measure: its kind, declared phi and the phi its fits used (phi_used), n and the models
        dropped, every score with its interval (NAME_lo, NAME_hi), the direction check (claim) and its notes."""
        rows = []
        for s in self.items.values():
            row = {"measure": s.measure, "kind": s.kind, "phi": s.transform or "",
                   "phi_used": phi_text(s.transform_used, s.transform or ""), "n": s.n, "dropped": s.dropped}
            for k in SCORE_NAMES:
                row[k] = s.values.get(k, np.nan)
                lo, hi = s.intervals.get(k, (np.nan, np.nan))
                row[k + "_lo"], row[k + "_hi"] = lo, hi
            row["claim"] = claim_of(s.direction)
            row["notes"] = "; ".join(s.notes)
            rows.append(row)
        return pd.DataFrame(rows)


def claim_of(direction: dict[str, Any]) -> str:
    """A scalar's direction check in a word: AGAINST its claim, flat, as claimed; '' when it declares none."""
    if not direction.get("claim"):
        return ""
    return "AGAINST" if direction.get("against") else "flat" if is_flat(direction) else "as claimed"


def measure_matrix(values: pd.DataFrame, name: str) -> np.ndarray:
    """The columns of one measure in a value table: [n, 1] for a scalar, [n, p] for a signature."""
    cols = [c for c in values.columns if c == name or (c.startswith(name + "[") and c.endswith("]"))]
    if not cols:
        raise GenbenchError(f"the value table has no column for measure {name!r}; "
                            f"run `genbench evaluate {name} --zoo ZOO` first")
    try:
        return values[cols].to_numpy(dtype=float)
    except (TypeError, ValueError):  # a value that is no number: name it, not numpy's conversion
        for c in cols:
            bad = pd.to_numeric(values[c], errors="coerce").isna() & values[c].notna()
            if bad.any():
                row = values.index.get_loc(bad.idxmax())
                model = values["model_id"].iloc[row] if "model_id" in values else row
                raise GenbenchError(f"the value table's column {c!r} holds {values[c].iloc[row]!r} for model "
                                    f"{model!r}, which is no number: a value table holds numbers (a failure is "
                                    "NaN, its reason in the NAME:error column)") from None
        raise


def grid_table(zoo: Zoo, ids: list[str]) -> pd.DataFrame:
    """The grid axes of the given models (hp.* columns, renamed to the axis names)."""
    t = zoo.table.set_index("model_id").loc[ids]
    axes = [a for a in zoo.hparams if f"hp.{a}" in t.columns]
    return t[[f"hp.{a}" for a in axes]].rename(columns=lambda c: c[3:]).reset_index(drop=True)


MIN_SCORED_MODELS = 3  # below this, no score of a measure is computed (each gets a note saying so)
# the recipe's features of the scored models, its own k-fold fit, and that fit's k-fold R^2 on the paired resamples
Recipe = tuple[np.ndarray, CrossValidation, np.ndarray]


def score_measure(name: str, x: np.ndarray, y: np.ndarray, hp: pd.DataFrame, ids: list[str], *, kind: str,
                  transform: str, target: str, n_test: int, weights: np.ndarray, higher_means: str | None = None,
                  dropped: int = 0, unconverged: int | None = None, k: int = K_FOLDS, repeats: int = REPEATS,
                  estimator: Any = None, recipe: Recipe | str | None = None) -> MeasureScores:
    """Every score of one measure on its models with values (weights: the zoo's paired resamples, [B, n] over these
    models); what cannot be computed or honestly reported gets no number, and a note or a refusal says why.
    `estimator` replaces the least-squares fit of phi(x) (the baselines' regularised fits: no adjusted R^2).
    `recipe`: the hyperparameter levels of these models and the recipe's own cross-validation, for what the
    measure adds to it (delta_r2); a string says why there is nothing to add to."""
    s = MeasureScores(measure=name, kind=kind, transform=transform, target=target, n=len(y), dropped=dropped,
                      features=x.shape[1], unconverged=unconverged)
    if dropped:
        s.notes.append(f"{dropped} model(s) without a value (failed) were dropped, not imputed")
    if unconverged:
        s.notes.append(f"{unconverged} of the {len(y)} scored models did not converge")
    if len(y) < MIN_SCORED_MODELS:
        s.notes.append(f"only {len(y)} models have values: nothing can be scored")
        return s
    if np.ptp(y) == 0:
        s.notes.append(f"the target {target!r} is constant over these models: no score is defined")
        return s
    if kind == "scalar" and estimator is None and x.shape[1] == 1 and np.ptp(x[:, 0]) == 0:
        s.notes.append(f"the measure takes one value on every model ({x[0, 0]:.6g}): it cannot tell them apart, and "
                       "every score is that of predicting the mean gap")
    claim = _direction(kind, higher_means, estimator, target)
    held = claim if kind == "scalar" and estimator is None else None
    cv = _add_regression(s, x, y, weights, k=k, repeats=repeats, estimator=estimator, direction=held)
    if cv is not None:
        s.heldout = cv.heldout
        s.predictions = pd.Series(cv.heldout[0], index=ids, name="heldout_prediction")
    _add_delta(s, x, y, weights, recipe, k=k, repeats=repeats, regressed=cv is not None,
               phi="linear" if estimator is not None else _offered_phi(s.transform, x))
    if kind == "scalar" and estimator is None:
        ranked = x[:, 0]
    elif cv is not None:
        ranked = cv.heldout.mean(0)  # g_hat: the held-out predictions, averaged over the shuffles
    else:
        s.notes.append("rank scores need a scalar or the k-fold predictions of a signature: skipped")
        _keep_honest(s)
        return s
    _add_rank(s, ranked, y, hp, weights, n_test, direction=claim)
    if kind == "scalar" and estimator is None:
        _check_direction(s, higher_means, held, cv)
    _keep_honest(s)
    return s


def _direction(kind: str, higher_means: str | None, estimator: Any, target: str) -> float | None:
    """The sign of the association with the target that the measure claims: for a scalar, +1 when a higher value
    claims a larger gap (a lower test accuracy), -1 the opposite, None when it does not say; predictions of the
    target (signatures, baselines) claim +1."""
    if kind != "scalar" or estimator is not None:
        return 1.0
    claim = {"larger_gap": 1.0, "smaller_gap": -1.0}.get(higher_means or "")
    return None if claim is None else claim * (-1.0 if target == "test_acc" else 1.0)


def _check_direction(s: MeasureScores, higher_means: str | None, held: float | None,
                     cv: CrossValidation | None) -> None:
    """Whether a scalar behaves as it claims: the sign of its free slope (all models) and of its Kendall tau
    against the declared direction; "against its claim" when either runs the other way."""
    if held is None:
        s.direction = {"claim": None, "against": False}
        s.notes.append("no direction check: the measure declares no direction (higher_means)")
        return
    slope = float(np.sign(s.coef[0])) if s.coef else float("nan")
    tau = float(np.sign(s.values["tau"])) if np.isfinite(s.values.get("tau", np.nan)) else float("nan")
    against = bool(slope * held < 0 or tau * held < 0)
    s.direction = {"claim": higher_means, "slope": slope, "tau": tau, "against": against,
                   "flat_folds": cv.flat if cv else None, "folds": cv.folds if cv else None}
    if against:
        wrong = [w for w, v in (("free slope", slope), ("Kendall \u03c4", tau)) if v * held < 0]
        s.notes.append(f"against its claim: it declares {higher_means!r} but its {' and '.join(wrong)} "
                       f"run{'' if len(wrong) > 1 else 's'} the other way; the ranking k-fold R\u00b2 holds the "
                       "slope to the claim"
                       + (f" ({cv.flat} of {cv.folds} training folds predicted their mean)" if cv else ""))


def _offered_phi(transform: str, x: np.ndarray) -> str:
    """The phi a fit may use: "select" offers log only when every value is positive, else linear."""
    return "linear" if transform == "select" and (x <= 0).any() else transform


def _regression_inputs(s: MeasureScores, x: np.ndarray, n: int) -> str | None:
    """The phi to fit with, or None (and the refusal) when no regression score can be reported."""
    phi = s.transform
    if (x <= 0).any() and phi == "log":
        _refuse(s, REGRESSION, f"{int((x <= 0).any(axis=1).sum())} model(s) have a non-positive value under the "
                               "declared log transform")
        return None
    if phi != _offered_phi(phi, x):
        s.notes.append("phi: linear (log needs every value positive)")
        phi = "linear"
    p = x.shape[1]
    if not enough_models(n, p):
        _refuse(s, REGRESSION, f"too few models: {n} < {MODELS_PER_FEATURE} (p + 1) = "
                               f"{MODELS_PER_FEATURE * (p + 1)} for p = {p} feature(s)")
        return None
    return phi


def _add_regression(s: MeasureScores, x: np.ndarray, y: np.ndarray, weights: np.ndarray, *, k: int, repeats: int,
                    estimator: Any, direction: float | None) -> CrossValidation | None:
    """adjusted R^2 (least squares only), pooled repeated k-fold R^2 and MSE, with their resample distributions.
    With a `direction`, the ranking k-fold fit holds the slope to it and the free fit is kept as kfold_r2_free."""
    n = len(y)
    free = None
    if estimator is None:
        phi = _regression_inputs(s, x, n)
        if phi is None:
            return None
        free = PhiRegression(phi)
        estimator = free if direction is None else PhiRegression(phi, direction=direction)
        full = clone(free).fit(x, y)
        z = np.log(x) if full.phi_ == "log" else x
        s.values["adj_r2"] = float(adjusted_r2(r2_score(y, full.predict(x)), n, x.shape[1]))
        s.coef, s.intercept = full.reg_.coef_.tolist(), float(full.reg_.intercept_)
        s.transform_used["all"] = full.phi_
        s.samples["adj_r2"] = bootstrap_adj_r2(z, y, weights)
    else:
        if n < k:  # a regularised fit asks no n per feature, but each of k folds needs a model
            _refuse(s, REGRESSION, f"too few models: {n} < {k} for {k}-fold cross-validation")
            return None
        s.refused["adj_r2"] = "a regularised fit has no adjusted R\u00b2 (it needs the least-squares p)"
    cv = cross_validate(estimator, x, y, k=k, repeats=repeats)
    if cv.chosen:
        s.transform_used["folds"] = dict(sorted(cv.chosen.items()))
    s.values.update(kfold_r2=cv.kfold_r2, mse=cv.kfold_mse)
    s.spread = {"kfold_r2": cv.r2.tolist(), "mse": cv.mse.tolist()}
    s.samples["kfold_r2"], s.samples["mse"] = pooled_scores(y, cv.heldout, weights)
    free_cv = cv if free is None or direction is None else cross_validate(free, x, y, k=k, repeats=repeats)
    s.values["kfold_r2_free"] = free_cv.kfold_r2
    s.samples["kfold_r2_free"] = s.samples["kfold_r2"] if free_cv is cv else pooled_scores(y, free_cv.heldout,
                                                                                           weights)[0]
    s.fold_mean_r2 = free_cv.fold_mean_r2  # the paper's protocol: the free fit
    return cv


def _add_delta(s: MeasureScores, x: np.ndarray, y: np.ndarray, weights: np.ndarray, recipe: Recipe | str | None, *,
               k: int, repeats: int, regressed: bool, phi: str) -> None:
    """delta_r2: the k-fold R^2 of the recipe plus the measure minus the recipe's alone, on the same folds, with
    the paired resamples' interval. Refused when the measure has no regression score or the zoo no recipe."""
    if recipe is None:
        return
    if isinstance(recipe, str):
        s.refused["delta_r2"] = recipe
        return
    if not regressed:
        s.refused["delta_r2"] = s.refused.get("kfold_r2", "the measure has no k-fold R\u00b2")
        return
    features, alone, alone_draws = recipe
    plus = cross_validate(RecipePlus(features.shape[1], phi), with_recipe(features, x), y, k=k, repeats=repeats)
    s.values["delta_r2"] = plus.kfold_r2 - alone.kfold_r2
    s.samples["delta_r2"] = pooled_scores(y, plus.heldout, weights)[0] - alone_draws
    if "kfold_r2" in s.samples:  # the ranking score against the recipe's own: does the measure beat it?
        d = s.samples["kfold_r2"] - alone_draws
        iv = percentile_interval(d)
        point = s.values["kfold_r2"] - alone.kfold_r2
        if iv is not None and iv[0] - 1e-12 <= point <= iv[1] + 1e-12:
            s.vs_recipe = [float(point), *iv]
        s.samples["vs_recipe"] = d


def _refuse(s: MeasureScores, keys: tuple[str, ...], reason: str) -> None:
    for key in keys:
        s.refused[key] = reason
        s.values.pop(key, None)


def _add_rank(s: MeasureScores, mu: np.ndarray, y: np.ndarray, hp: pd.DataFrame, weights: np.ndarray,
              n_test: int, *, direction: float | None) -> None:
    s.values["tau"] = float(rank.kendall_tau(mu, y))
    s.samples["tau"] = np.asarray(rank.kendall_tau(mu, y, weights=weights))
    try:
        psi, axes = rank.granulated_psi(mu, y, hp)
        s.values["psi"], s.psi_axes = float(psi), {a: float(v) for a, v in axes.items()}
        s.samples["psi"] = np.asarray(rank.granulated_psi(mu, y, hp, weights=weights)[0])
        cmi, sign, pgdl = rank.grid_scores(mu, y, hp)
        cmi_b, sign_b, pgdl_b = rank.grid_scores(mu, y, hp, weights=weights)
        s.cmi_sign = float(sign)
        if direction is None:
            s.values["cmi"], s.samples["cmi"] = float(cmi), np.asarray(cmi_b)
            s.notes.append("CMI is unsigned: the measure declares no direction (higher_means)")
        else:  # signed by the declared direction: negative when the association runs against the claim
            s.values["cmi"] = float(cmi) * (1.0 if sign * direction >= 0 else -1.0)
            s.samples["cmi"] = np.asarray(cmi_b) * np.where(np.asarray(sign_b) * direction >= 0, 1.0, -1.0)
        if pgdl is None:
            rank.pgdl_cmi(mu, y, hp)  # fewer than two varied axes: its error says so
        s.values["cmi_pgdl"] = float(pgdl)
        s.samples["cmi_pgdl"] = np.asarray(pgdl_b)
    except ValueError as e:
        s.notes.append(f"grid scores (Psi, CMI) skipped: {e}")
    try:
        se = rank.robust_sign_error(mu, y, hp, n_test=n_test)
        for key in ("worst", "p90", "mean"):
            if np.isfinite(se[key]):
                s.values[f"sign_error_{key}"] = float(se[key])
        if any(np.isfinite(se[key]) for key in ("worst", "p90", "mean")):
            se_b = rank.robust_sign_error(mu, y, hp, n_test=n_test, weights=weights)
            for key in ("worst", "p90", "mean"):
                s.samples[f"sign_error_{key}"] = np.asarray(se_b[key])
        if se.get("reason"):
            s.notes.append(f"robust sign-error: {se['reason']}")
    except ValueError as e:
        s.notes.append(f"robust sign-error skipped: {e}")


def _keep_honest(s: MeasureScores) -> None:
    """Give each score its percentile interval over the paired resamples; a score whose estimate lies outside its
    own interval is refused, and a degenerate resample distribution gives no interval (said in a note)."""
    for key, draws in s.samples.items():
        if key not in s.values:
            continue
        iv = percentile_interval(draws)
        v = s.values[key]
        if iv is None:
            s.notes.append(f"{score_label(key)}: no interval (the resampled values are degenerate or too few)")
        elif not iv[0] - 1e-12 <= v <= iv[1] + 1e-12:
            v, lo, hi = outside_text(v, *iv)
            _refuse(s, (key,), f"the estimate {v} lies outside its own 95% bootstrap interval [{lo}, {hi}]: the "
                               "resamples do not support it")
        else:
            s.intervals[key] = iv


def score(values: pd.DataFrame, zoo: str | Zoo, target: str = "gap", transform: str = "declared", *,
          measures: list[str] | None = None, k: int = K_FOLDS, repeats: int = REPEATS, seed: int = SEED,
          n_boot: int = N_BOOT, allow_partial: bool = False, progress: Callable[[str], None] | None = None,
          resample_table: str | None = None) -> Scores:
    """Score every measure of a value table (from `gb.evaluate`) against the zoo's `target`.

    transform "declared" uses each measure's own phi (its `register_measure(transform=...)`); "log", "linear" or
    "select" force one. Every measure is judged on the same bootstrap resamples of the zoo's models (a function
    of the zoo's table hash and `seed`), so entries can be compared pairwise. A partial zoo (not every model of
    its recipe built or downloaded) is refused unless `allow_partial`; a value table without some of the zoo's
    models is scored on the rest, with a note on every measure. `measures`: names or glob patterns of the table's
    measures (default: all of them). Measures are scored side by side;
    `progress(name)` is called as each one is done, in the table's order. `resample_table`: the table hash whose
    resamples are drawn (a training of a grid is scored on training 0's, so that its trainings pair model for
    model); default the zoo's own."""
    check_table_form(values, "score")
    check_n_boot("n_boot", n_boot)
    for what, count in (("k", k), ("repeats", repeats)):
        check_count(what, count)
    if k < 2:
        raise GenbenchError(f"k must be at least 2 (the folds of k-fold cross-validation), got {k}")
    check_seed("seed", seed)
    if target not in TARGETS:
        raise GenbenchError(f"target must be one of {TARGETS}, got {target!r}")
    if transform not in ("declared", *TRANSFORMS):
        raise GenbenchError(f"transform must be 'declared' or one of {TRANSFORMS}, got {transform!r}")
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    info = values.attrs.get("measures", {})
    values = sorted_values(values, zoo)
    if k > len(values):
        raise GenbenchError(f"k={k} folds for {len(values)} models: k-fold cross-validation needs at most one fold "
                            "per model (the default is 10)")
    columns = sorted({c.split("[")[0].split(":")[0] for c in values.columns} - {"model_id"})
    names = _measure_names(measures, columns) if measures else list(info) or columns
    weights = zoo_resamples(zoo, seed=seed, n_boot=n_boot, ids=values["model_id"], table_sha256=resample_table)
    recipes: dict[tuple[str, ...], Recipe | str] = {}
    jobs = {}
    for name in names:
        meta = info.get(name) or _meta(get_measure(name))
        jobs[name] = (measure_matrix(values, name), meta, meta["transform"] if transform == "declared" else transform)

    def one(name: str) -> MeasureScores:
        x, meta, phi = jobs[name]
        return score_columns(name, x, values, zoo, weights, kind=meta["kind"], transform=phi,
                             higher_means=meta.get("higher_means"), target=target, k=k, repeats=repeats, seed=seed,
                             recipes=recipes, resample_table=resample_table)

    items = {}
    with threadpool_limits(limits=1), ThreadPoolExecutor(max_workers=_workers(len(names))) as pool:
        if names:  # the first measure fits the recipe its models share (cached for the others)
            items[names[0]] = one(names[0])
            if progress is not None:
                progress(names[0])
        for name, s in zip(names[1:], pool.map(one, names[1:])):
            items[name] = s
            if progress is not None:
                progress(name)
    if len(values) < len(zoo.table):  # scores on some of the models: not those of the zoo (nor the leaderboard's)
        for s in items.values():
            s.notes.append(f"scored on the {len(values)} of the zoo's {len(zoo.table)} models the value table has "
                           "a row for: not comparable with scores on the whole zoo")
    return Scores(zoo.name, target, items)


def _measure_names(measures: Any, columns: list[str]) -> list[str]:
    """The measures asked for: names or glob patterns ('norm.*') matched against the value table's columns; one
    string is one name."""
    import fnmatch
    asked = [measures] if isinstance(measures, str) else measures
    if not isinstance(asked, (list, tuple)) or not all(isinstance(m, str) for m in asked):
        raise GenbenchError(f"measures takes a list of measure names or glob patterns, got {measures!r}")
    names: list[str] = []
    for m in asked:
        found = fnmatch.filter(columns, m) if any(c in m for c in "*?[") else [m]
        if not found:
            raise GenbenchError(f"no measure of the value table matches {m!r}; its measures: {columns}")
        names += [n for n in found if n not in names]
    return names


def _workers(jobs: int) -> int:
    """Measures scored side by side: one a core (up to 4), their linear algebra on one thread each (the matrices
    are small: more threads per product only wait on each other, badly on a busy machine)."""
    return max(1, min(jobs, os.cpu_count() or 1, 4))


def check_table_form(values: Any, who: str) -> None:
    """Refuse what is not a value table: no DataFrame (a path, say), or one without a model_id column."""
    if not isinstance(values, pd.DataFrame):
        raise GenbenchError(f"{who} takes a value table (the DataFrame gb.evaluate returns; a saved one: "
                            f"pd.read_parquet(PATH)), got {type(values).__name__}")
    if "model_id" not in values.columns:
        raise GenbenchError(f"{who} takes a value table (the DataFrame gb.evaluate returns: one row per model, a "
                            f"model_id column); this one has no model_id column (columns {list(values.columns)[:8]})")


def sorted_values(values: pd.DataFrame, zoo: Zoo) -> pd.DataFrame:
    """The value table in model-id order (folds and resamples are assigned by position), checked against the zoo."""
    check_ids(values, zoo)
    return values.sort_values("model_id", kind="stable").reset_index(drop=True)


def check_ids(values: pd.DataFrame, zoo: Zoo) -> None:
    """Refuse a value table with a model twice or a model the zoo does not have (values of another zoo)."""
    repeated = values["model_id"][values["model_id"].duplicated()].unique()
    if len(repeated):
        raise GenbenchError(f"the value table holds {len(repeated)} model id(s) more than once (e.g. {repeated[0]!r}): "
                            "one row per model, or a model would count twice; drop the repeats, e.g. "
                            "pd.concat([a, b]).drop_duplicates('model_id')")
    known = set(zoo.table["model_id"])
    missing = [m for m in values["model_id"] if m not in known]
    if missing:
        raise GenbenchError(f"{len(missing)} model id(s) of the value table are not in zoo {zoo.name!r} "
                            f"(e.g. {missing[0]!r}): were the values computed on another zoo?")


def zoo_resamples(zoo: Zoo, *, seed: int, n_boot: int, ids: Any = None, table_sha256: str | None = None
                  ) -> np.ndarray:
    """The zoo's paired resample matrix [n_boot, N] over all its N models in model-id order, or its columns for
    the models `ids` (a value table without some models is judged on the same resamples of the rest); drawn from
    `table_sha256` when given (training 0's, for a training of a grid), else the zoo's own table hash."""
    everyone = sorted(zoo.table["model_id"].astype(str))
    w = resample_weights(len(everyone), table_sha256=table_sha256 or zoo.table_sha256, seed=seed, n_boot=n_boot)
    if ids is None:
        return w
    where = {m: i for i, m in enumerate(everyone)}
    return w[:, [where[str(m)] for m in ids]]


def unconverged_count(zoo: Zoo, ids: list[str]) -> int | None:
    """How many of these models did not converge (None when the zoo does not record convergence)."""
    conv = zoo.table.set_index("model_id").loc[ids].get("converged")
    if conv is None or conv.isna().all():
        return None
    return int((conv == False).sum())  # noqa: E712 (a column of booleans and NaN)


def score_columns(name: str, x: np.ndarray, values: pd.DataFrame, zoo: Zoo, weights: np.ndarray, *, kind: str,
                  transform: str, higher_means: str | None, target: str, estimator: Any = None,
                  k: int = K_FOLDS, repeats: int = REPEATS, seed: int = SEED, recipe: str | bool = True,
                  recipes: dict[tuple[str, ...], Recipe | str] | None = None,
                  resample_table: str | None = None) -> MeasureScores:
    """Score one measure's columns x [n, p] (rows in the order of `values`): models without a finite value are
    dropped, the resamples restricted to the rest; the record keeps the held-out predictions of every model. An
    `estimator` (a baseline's pipeline) takes every row as it is, missing values included. `recipe` False (or the
    reason, a string) scores no delta_r2; `recipes` caches the recipe's own fit per set of models."""
    ok = np.ones(len(x), bool) if estimator is not None else np.isfinite(x).all(axis=1)
    ids = list(values["model_id"][ok])
    y = zoo.table.set_index("model_id").loc[ids, target].to_numpy(dtype=float)
    plan: Recipe | str | None = recipe if isinstance(recipe, str) else None
    if recipe is True and len(ids) >= 3:
        cache = {} if recipes is None else recipes
        key = (target, *map(str, ids))
        if key not in cache:
            cache[key] = recipe_fit(zoo, ids, y, weights[:, ok], k=k, repeats=repeats)
        plan = cache[key]
    s = score_measure(name, x[ok], y, grid_table(zoo, ids), ids, kind=kind, transform=transform, target=target,
                      n_test=int(zoo.manifest.get("test_size", 10_000)), weights=weights[:, ok],
                      higher_means=higher_means, dropped=int((~ok).sum()), unconverged=unconverged_count(zoo, ids),
                      k=k, repeats=repeats, estimator=estimator, recipe=plan)
    if (zoo.manifest.get("imported") or {}).get("kind") == "pgdl":
        _add_pgdl_score(s)
    if s.heldout is not None:
        full = np.full((s.heldout.shape[0], len(ok)), np.nan)
        full[:, ok] = s.heldout
        s.heldout = full
    s.kfold = {"k": k, "repeats": repeats, "seeds": list(range(repeats))}
    s.bootstrap = {"seed": seed, "n_boot": len(weights), "table_sha256": resample_table or zoo.table_sha256}
    return s


def _add_pgdl_score(s: MeasureScores) -> None:
    """On an imported PGDL task: the competition's score as its organisers printed it, 100 x CMI (PGDL)."""
    if "cmi_pgdl" in s.refused:
        s.refused["pgdl_score"] = s.refused["cmi_pgdl"]
    elif np.isfinite(s.values.get("cmi_pgdl", np.nan)):
        s.values["pgdl_score"] = 100.0 * s.values["cmi_pgdl"]
        if "cmi_pgdl" in s.intervals:
            s.intervals["pgdl_score"] = tuple(100.0 * v for v in s.intervals["cmi_pgdl"])
        if "cmi_pgdl" in s.samples:
            s.samples["pgdl_score"] = 100.0 * np.asarray(s.samples["cmi_pgdl"])


def recipe_fit(zoo: Zoo, ids: list[str], y: np.ndarray, weights: np.ndarray, *, k: int = K_FOLDS,
               repeats: int = REPEATS) -> Recipe | str:
    """The recipe's features of these models, its own cross-validation (baseline.hparams' fit, on features encoded
    once) and that fit's k-fold R^2 on the resamples `weights` [B, n]; or why a measure has no recipe to add to."""
    levels = hparam_design(zoo, ids)
    if levels.shape[1] == 0:
        return f"zoo {zoo.name!r} varies no hyperparameter but the seed: there is no recipe to add to"
    if np.ptp(y) == 0:
        return "the target is constant over these models"
    if len(ids) < k:
        return f"too few models for the recipe's {k}-fold fit: {len(ids)} < {k}"
    x = recipe_features(levels.to_numpy(dtype=object))
    cv = cross_validate(RidgeCV(alphas=ALPHAS), x, y, k=k, repeats=repeats)
    return x, cv, pooled_scores(y, cv.heldout, weights)[0]


def _meta(m: Any) -> dict[str, Any]:
    return {"kind": m.kind, "transform": m.transform, "higher_means": m.higher_means}


@dataclass
class Transfer:
    """A regression fitted on one zoo and judged on another: R^2, MSE and Kendall tau of its predictions."""

    measure: str
    source: str
    target_zoo: str
    target: str
    transform: str | None
    n_fit: int
    n_eval: int
    r2: float
    mse: float
    tau: float
    source_kfold_r2: float
    notes: list[str] = field(default_factory=list)


def _complete(values: pd.DataFrame, zoo: Zoo, name: str, target: str, phi: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Features and target of the models with a usable value (positive under log), and how many were dropped."""
    x = measure_matrix(values, name)
    ok = np.isfinite(x).all(axis=1) & ((x > 0).all(axis=1) if phi == "log" else True)
    y = zoo.table.set_index("model_id").loc[list(values["model_id"][ok]), target].to_numpy(dtype=float)
    return x[ok], y, int((~ok).sum())


def transfer(measure: str, source: tuple[pd.DataFrame, str | Zoo], to: tuple[pd.DataFrame, str | Zoo], *,
             target: str = "gap", transform: str = "declared") -> Transfer:
    """Fit target ~ phi(measure) on the source zoo's models, predict the other zoo's: does the fit carry over?"""
    (va, za), (vb, zb) = source, to
    meta = va.attrs.get("measures", {}).get(measure) or _meta(get_measure(measure))
    phi = meta["transform"] if transform == "declared" else transform
    za, zb = (z if isinstance(z, Zoo) else load_zoo(z) for z in (za, zb))
    xa, ya, da = _complete(va, za, measure, target, phi)
    xb, yb, db = _complete(vb, zb, measure, target, phi)
    if xa.shape[1] != xb.shape[1]:
        raise GenbenchError(f"{measure} has {xa.shape[1]} features on {za.name} but {xb.shape[1]} on {zb.name}: "
                            "a fit only transfers between zoos whose signatures have the same length")
    if not enough_models(len(ya), xa.shape[1]) or len(yb) < 3:
        raise GenbenchError(f"too few models with values to transfer ({len(ya)} on {za.name}, {len(yb)} on "
                            f"{zb.name}; the fit needs {MODELS_PER_FEATURE} (p + 1) = "
                            f"{MODELS_PER_FEATURE * (xa.shape[1] + 1)} on the source and 3 on the target)")
    if phi == "select" and ((xa <= 0).any() or (xb <= 0).any()):
        phi = "linear"
    fitted = PhiRegression(phi).fit(xa, ya)
    pred = fitted.predict(xb)
    notes = [f"{d} model(s) of {z.name} without a usable value were dropped" for d, z in ((da, za), (db, zb)) if d]
    if np.ptp(yb) == 0:
        notes.append(f"the target is constant on {zb.name}: R^2 is undefined")
    return Transfer(measure=measure, source=za.name, target_zoo=zb.name, target=target, transform=fitted.phi_,
                    n_fit=len(ya), n_eval=len(yb), r2=float(r2_score(yb, pred)) if np.ptp(yb) else float("nan"),
                    mse=float(mean_squared_error(yb, pred)), tau=float(rank.kendall_tau(pred, yb)),
                    source_kfold_r2=cross_validate(PhiRegression(phi), xa, ya).kfold_r2, notes=notes)
