"""Baseline rows: how well what a reader already knows predicts the gap. The training recipe (the zoo's
hyperparameters), every built-in scalar measure at once, statistics of the final weights (Unterthiner et al. 2020;
scoring/weight_stats.py), and the final training loss and accuracy are scored exactly as a measure is, on the same
folds and the same paired resamples; a measure below `baseline.hparams` adds nothing the recipe did not say. The
regularised baselines are not held to the n >= 10 (p + 1) rule of least squares: their penalty (and, for
baseline.weight_stats, the choice between ridge and trees), chosen inside each training fold, controls how much they
fit, and their k-fold R^2 is judged on held-out models only (no adjusted R^2 is reported for them)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError
from ..zoo.storage import Zoo
from .recipe import hparam_design, recipe_estimator, ridge
from .regression import K_FOLDS, REPEATS
from .scores import Scores, score_columns, sorted_values, zoo_resamples
from .spec import MeasureScores
from .weight_stats import INNER_FOLDS, weight_features, weight_stats_estimator


@dataclass(frozen=True)
class Baseline:
    """One baseline row: its name and what it predicts the gap from."""

    name: str
    citation: str


BASELINES = (
    Baseline("baseline.hparams", "the gap predicted from the zoo's hyperparameters alone: one-hot levels and their "
                                 "pairwise interactions, ridge penalty chosen inside each training fold"),
    Baseline("baseline.hparams_main", "the gap predicted from the zoo's hyperparameters alone: one-hot levels "
                                      "(main effects only), ridge penalty chosen inside each training fold"),
    Baseline("baseline.all_measures", "ridge regression on every built-in scalar measure (log of the positive "
                                      "ones, standardised, a missing value replaced by the training folds' median), "
                                      "penalty chosen inside each training fold"),
    Baseline("baseline.weight_stats", "the gap predicted from statistics of the final weights (Unterthiner et al. "
                                      "2020): the mean, variance and 0/25/50/75/100% quantiles of each layer's "
                                      "weights and of its biases (a layer: a weight of two or more dimensions with "
                                      "its bias; batchnorm's scale and shift left out), or, where the models' "
                                      "layers differ, of the first layer, the last and all layers pooled; ridge or "
                                      "gradient-boosted trees, chosen inside each training fold"),
    Baseline("baseline.train_loss", "the final training loss from the zoo table, scored as a scalar measure"),
    Baseline("baseline.train_acc", "the final training accuracy from the zoo table, scored as a scalar measure"),
)
BASELINE_NAMES = tuple(b.name for b in BASELINES)
_TABLE_COLUMNS = {"baseline.train_loss": ("train_loss", "smaller_gap"),
                  "baseline.train_acc": ("train_acc", "larger_gap")}


def measure_design(values: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The scalar measures' columns, log-scaled where every value is positive; columns without any value dropped."""
    absent = [n for n in names if n not in values.columns]
    if absent:
        raise GenbenchError(f"the value table has no column for {absent}: evaluate them first "
                            f"(`genbench evaluate {' '.join(absent)} --zoo ZOO`)")
    cols = []
    for name in names:
        x = values[name].to_numpy(dtype=float)
        if not np.isfinite(x).any():
            continue
        finite = x[np.isfinite(x)]
        cols.append(np.log(x) if (finite > 0).all() else x)
    return np.stack(cols, 1) if cols else np.zeros((len(values), 0))


def score_baselines(zoo: Zoo, values: pd.DataFrame | None = None, *, measures: list[str] | None = None,
                    target: str = "gap", k: int = K_FOLDS, repeats: int = REPEATS, seed: int = SEED,
                    n_boot: int = N_BOOT, only: tuple[str, ...] = BASELINE_NAMES,
                    resample_table: str | None = None) -> tuple[Scores, list[str]]:
    """Score the baseline rows on a zoo (`values`: the built-in scalar measures, for baseline.all_measures, with
    `measures` naming its columns); returns their scores and notes on the baselines that could not be made.
    `resample_table`: whose resamples (scores.score's)."""
    table = sorted_values(zoo.table[["model_id"]], zoo)
    ids = table["model_id"].tolist()
    weights = zoo_resamples(zoo, seed=seed, n_boot=n_boot, ids=ids, table_sha256=resample_table)
    items: dict[str, MeasureScores] = {}
    notes: list[str] = []
    recipes: dict = {}

    def add(name: str, x: np.ndarray, estimator: object | None, higher_means: str | None = None,
            recipe: str | bool = True) -> None:
        kind = "scalar" if estimator is None else "baseline"
        items[name] = score_columns(name, x, table, zoo, weights, kind=kind, transform="select",
                                    higher_means=higher_means, target=target, estimator=estimator, k=k,
                                    repeats=repeats, seed=seed, recipe=recipe, recipes=recipes,
                                    resample_table=resample_table)
        items[name].kind = "baseline"
        if estimator is not None:
            items[name].transform = None  # the pipeline scales its own inputs: no phi

    hp = hparam_design(zoo, ids)
    wanted = set(only)
    if {"baseline.hparams", "baseline.hparams_main"} & wanted and hp.shape[1] == 0:
        notes.append(f"no baseline.hparams: zoo {zoo.name!r} has no varied hyperparameter column (hp.*)")
    elif hp.shape[1]:
        x = hp.to_numpy(dtype=object)
        if "baseline.hparams" in wanted:
            add("baseline.hparams", x, recipe_estimator(), recipe="it is the recipe")
        if "baseline.hparams_main" in wanted:
            add("baseline.hparams_main", x, ridge(OneHotEncoder(handle_unknown="ignore", sparse_output=False)),
                recipe="it is the recipe (main effects only)")
    if "baseline.all_measures" in wanted:
        names = list(measures or [])
        if values is None or not names:
            notes.append("no baseline.all_measures: it needs the values of the built-in scalar measures")
        else:
            v = sorted_values(values, zoo)
            if v["model_id"].tolist() != ids:
                notes.append("no baseline.all_measures: the value table does not cover every model of the zoo")
            else:
                x = measure_design(v, names)
                add("baseline.all_measures", x, ridge(SimpleImputer(strategy="median"), StandardScaler()))
    if "baseline.weight_stats" in wanted:
        _add_weight_stats(zoo, ids, add, items, notes)
    for name, (column, higher_means) in _TABLE_COLUMNS.items():
        if name in wanted:
            col = zoo.table.set_index("model_id").loc[ids, column].to_numpy(dtype=float)[:, None]
            add(name, col, None, higher_means)
    return Scores(zoo.name, target, items), notes


def _add_weight_stats(zoo: Zoo, ids: list[str], add: Callable[..., None], items: dict[str, MeasureScores],
                      notes: list[str]) -> None:
    """baseline.weight_stats from the zoo's checkpoints, with notes saying which features were made and which
    regressor the training folds chose; a zoo without checkpoints (or with one that cannot be read) gets a note."""
    name = "baseline.weight_stats"
    if "checkpoint" not in zoo.table.columns:
        notes.append(f"no {name}: zoo {zoo.name!r} has no checkpoints to read weights from")
        return
    try:
        x, _, how = weight_features(zoo, ids)
    except GenbenchError as e:
        notes.append(f"no {name}: {e}")
        return
    add(name, x, weight_stats_estimator())
    s = items[name]
    s.notes.append(f"weight statistics {how}")
    chosen = s.transform_used.pop("folds", None)  # the scorer counts a fit's phi_: here, the regressor chosen
    if chosen:
        total = sum(chosen.values())
        s.notes.append(f"regressor chosen inside the {total} training folds (inner {INNER_FOLDS}-fold MSE): "
                       + ", ".join(f"{k} {chosen.get(k, 0)}" for k in ("ridge", "trees")))
