"""Planted zoos for the scoring tests: a table on disk (zoo.json + models.parquet, no checkpoints) whose gap is a
known function of the grid, value tables as gb.evaluate makes them, scikit-learn's pooled k-fold reference, and what
every scored entry promises. Tests import it as a sibling module (`from planted import write_zoo, ...`)."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import KFold, cross_val_predict

from genbench.scoring.regression import K_FOLDS, REPEATS
from genbench.scoring.spec import MeasureScores
from genbench.zoo.storage import Zoo

SHUFFLES = range(REPEATS)


def write_zoo(root, grid, gap_fn, *, name="planted", seed=0, converged=None, shuffle=0):
    """A zoo folder with one model per grid point; gap_fn(table, rng) -> gaps. Train accuracy and loss are noisy
    and only loosely tied to the gap (they are baseline inputs, not the answer)."""
    rng = np.random.default_rng(seed)
    keys = list(grid)
    rows = [{"model_id": f"m{i:03d}", **{f"hp.{k}": v for k, v in zip(keys, combo)}}
            for i, combo in enumerate(itertools.product(*grid.values()))]
    t = pd.DataFrame(rows)
    t["gap"] = np.asarray(gap_fn(t, rng), float)
    t["train_acc"] = 0.9 + 0.1 * rng.random(len(t))
    t["test_acc"] = t["train_acc"] - t["gap"]
    t["train_loss"] = -np.log(t["train_acc"]) + 0.05 * rng.random(len(t))
    if converged is not None:
        t["converged"] = converged(len(t))
    if shuffle:  # the table's row order is the builder's, not the model-id order
        t = t.sample(frac=1.0, random_state=shuffle).reset_index(drop=True)
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "version": 1, "files": {}, "grid": grid, "dataset": {"name": "none"}, "test_size": 500}
    (root / "zoo.json").write_text(json.dumps(manifest))
    t.to_parquet(root / "models.parquet", index=False)
    return Zoo(root)


GRID = {"width": [16, 32, 64], "lr": [0.01, 0.1], "noise": [0.0, 0.2, 0.4], "seed": [0, 1, 2, 3]}  # 72 models


def planted_gap(t, rng):
    w = np.log2(t["hp.width"].to_numpy()) - 5
    lr = (t["hp.lr"].to_numpy() == 0.1) * 1.0
    noise = t["hp.noise"].to_numpy()
    return 0.1 + 0.04 * w + 0.03 * lr + 0.2 * noise + 0.1 * w * noise + 0.015 * rng.normal(size=len(t))


def gap_of(zoo):
    """The gap in model-id order (the order folds and resamples are assigned in)."""
    return zoo.table.sort_values("model_id")["gap"].to_numpy(float)


def values_of(zoo, columns, *, kind="scalar", transform="linear", higher_means="larger_gap", name="test.m"):
    """A value table as gb.evaluate makes it: one column per feature (name[i] for a signature), in model-id order."""
    ids = sorted(zoo.model_ids)
    columns = np.asarray(columns, float)
    if columns.ndim == 1:
        df = pd.DataFrame({"model_id": ids, name: columns})
    else:
        df = pd.DataFrame({"model_id": ids, **{f"{name}[{i}]": columns[:, i] for i in range(columns.shape[1])}})
    df[f"{name}:error"] = None
    df.attrs["measures"] = {name: {"kind": kind, "transform": transform, "higher_means": higher_means}}
    return df


def pooled_cv(estimator, x, y, shuffles=SHUFFLES, k=K_FOLDS):
    """scikit-learn's pooled k-fold R^2 and MSE of each shuffle: cross_val_predict + r2_score / mean_squared_error."""
    preds = [cross_val_predict(estimator, x, y, cv=KFold(k, shuffle=True, random_state=r)) for r in shuffles]
    return (np.array(preds), np.array([r2_score(y, p) for p in preds]),
            np.array([mean_squared_error(y, p) for p in preds]))


def assert_honest(s: MeasureScores):
    """What every scored entry promises: each interval holds its estimate; a refused score has no number."""
    for key, (lo, hi) in s.intervals.items():
        assert key in s.values and lo - 1e-12 <= s.values[key] <= hi + 1e-12, (key, s.values.get(key), lo, hi)
    for key in s.refused:
        assert key not in s.values and key not in s.intervals, key
