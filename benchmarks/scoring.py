"""Cost of scoring the whole catalogue on a zoo (what `genbench score --zoo NAME` does once the values exist), before
and after the batched fits, in one run, and whether every number is the same (rtol 1e-9).

The values are the per-model values stored in the shipped records of the zoo (leaderboard/results/NAME/*.json), read
as `genbench leaderboard rescore` reads them, so no measure is evaluated; the zoo must be built here with the table
the records cite. Before: the reference path, scikit-learn's estimators cloned and fitted fold by fold
(regression.BATCHED = False), the measures one after another, on one BLAS thread (--before-threads default: numpy's
default threads, as the scorer shipped). After: the scorer as it ships (every fold of a size fitted at once,
folds.py; the measures side by side, one BLAS thread each). The rank scores' exact integer pair counts are shared
by both paths; the after run's seconds in each part of a measure's scores (rank scores, k-fold R^2, delta_r2),
summed over the measures, are printed too. `--records` also re-scores every shipped record whose zoo is built
here with the table it cites (measures and baseline rows, as `genbench leaderboard rescore` does) and compares
each with the record (rtol 1e-9).
Usage: python benchmarks/scoring.py [--zoo mnist1d-demogen] [--records] [--before-threads one|default]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from genbench.entries.rescore import rescore_baselines, rescore_record, value_table
from genbench.errors import GenbenchError
from genbench.scoring import regression, scores
from genbench.zoo import load_zoo

RESULTS = Path(__file__).resolve().parents[1] / "leaderboard" / "results"
RTOL = 1e-9
ATOL = 1e-12  # scores are O(1) (R^2, tau, ...): delta_r2, a difference of two R^2 near 1, rounds in absolute terms


def records_of(zoo: str) -> list[dict[str, Any]]:
    """The shipped records of a zoo, as JSON."""
    return [json.loads(p.read_text()) for p in sorted((RESULTS / zoo).glob("*.json"))]


def catalogue_values(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Every measure record's per-model values merged into one value table, with each measure's kind and phi."""
    table, meta = None, {}
    for rec in records:
        if rec.get("baseline") is True or rec.get("status") != "ok":
            continue
        v = value_table(rec)
        table = v if table is None else table.merge(v, on="model_id", how="outer")
        meta[rec["measure"]] = {"kind": rec.get("kind"), "transform": rec["scores"].get("transform"),
                                "higher_means": rec.get("higher_means")}
    if table is None:
        raise GenbenchError("no measure record with values to score")
    table.attrs["measures"] = meta
    return table


@contextlib.contextmanager
def reference_path(default_threads: bool) -> Iterator[None]:
    """The scorer as it was: fold by fold with scikit-learn, one measure at a time (on numpy's default BLAS threads
    with `default_threads`, as it shipped; else on one, as the new path)."""
    saved = regression.BATCHED, scores._workers, scores.threadpool_limits
    regression.BATCHED, scores._workers = False, lambda jobs: 1
    if default_threads:
        scores.threadpool_limits = lambda limits: contextlib.nullcontext()
    try:
        yield
    finally:
        regression.BATCHED, scores._workers, scores.threadpool_limits = saved


def differences(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Where two nested structures of numbers, text and arrays differ (numbers: beyond rtol 1e-9 and atol 1e-12; NaN
    equals NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                yield f"{path}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>")
            else:
                yield from differences(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple, np.ndarray)) and isinstance(b, (list, tuple, np.ndarray)):
        if len(a) != len(b):
            yield path, f"{len(a)} items", f"{len(b)} items"
        else:
            for i, (u, v) in enumerate(zip(a, b)):
                yield from differences(u, v, f"{path}[{i}]")
    elif (a is None and _number(b) and math.isnan(b)) or (b is None and _number(a) and math.isnan(a)):
        return  # a record's JSON holds NaN as null
    elif _number(a) and _number(b):
        u, v = float(a), float(b)
        if not (u == v or (math.isnan(u) and math.isnan(v)) or abs(u - v) <= ATOL + RTOL * max(abs(u), abs(v))):
            yield path, u, v
        elif u != v and math.isfinite(u) and math.isfinite(v):
            WORST["abs"] = max(WORST["abs"], abs(u - v))
            WORST["rel"] = max(WORST["rel"], abs(u - v) / max(abs(u), abs(v)))
    elif a != b:
        yield path, a, b


WORST = {"abs": 0.0, "rel": 0.0}  # the largest deviation within the tolerance, printed
PARTS = ("_add_rank", "_add_regression", "_add_delta")  # a measure's scores: rank scores, k-fold R^2, delta_r2


@contextlib.contextmanager
def timed_parts(spent: dict[str, float]) -> Iterator[None]:
    """Seconds spent in each part of scoring a measure, summed over the measures (and the workers running them)."""
    saved = {name: getattr(scores, name) for name in PARTS}
    lock = threading.Lock()

    def timed(name: str, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        return run
    for name, fn in saved.items():
        setattr(scores, name, timed(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(scores, name, fn)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def everything(s: scores.MeasureScores) -> dict[str, Any]:
    """Every number a measure's scores hold: the record's block, the resample draws and the held-out predictions."""
    return {"scores": s.to_dict(), "samples": {k: np.asarray(v) for k, v in s.samples.items()},
            "heldout": s.heldout, "predictions": None if s.predictions is None else s.predictions.to_numpy()}


def compare_records(name: str) -> tuple[int, list[str]]:
    """Re-score every shipped record of a zoo built here (its cited table) and compare it with the record."""
    recs = records_of(name)
    zoo = load_zoo(name)
    cited = {r["zoo"].get("table_sha256") for r in recs}
    if cited != {zoo.table_sha256}:
        return 0, [f"{name}: the records cite {sorted(cited)}, the zoo built here is {zoo.table_sha256}"]
    bad: list[str] = []
    done = 0
    for rec in recs:
        if rec.get("baseline") is True or rec.get("status") != "ok":
            continue
        new = rescore_record(rec, zoo)
        bad += [f"{name}/{rec['name']}{p}: {u!r} != {v!r}" for p, u, v in
                differences({"scores": {k: v for k, v in rec["scores"].items() if k != "notes"},
                             "values": rec["values"]},
                            {"scores": {k: v for k, v in new["scores"].items() if k != "notes" and k in rec["scores"]},
                             "values": new["values"]})]  # keys a record predates (verdicts, vs_recipe) are new, not changed
        done += 1
    baselines = {r["name"]: r for r in recs if r.get("baseline") is True and r.get("status") == "ok"}
    try:
        remade = rescore_baselines(zoo, baselines, RESULTS / name) if baselines else []
    except GenbenchError as e:
        print(f"records: {name}: baselines not re-made: {e}")
        remade = []
    if remade:
        for new in remade:
            old = baselines[new["name"]]
            bad += [f"{name}/{new['name']}{p}: {u!r} != {v!r}" for p, u, v in
                    differences({"scores": old["scores"], "values": old["values"]},
                                {"scores": new["scores"], "values": new["values"]})]
            done += 1
    return done, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--zoo", default="mnist1d-demogen")
    parser.add_argument("--records", action="store_true", help="also re-score every shipped record of a zoo built "
                        "here and compare it with the record")
    parser.add_argument("--before-threads", choices=("one", "default"), default="one",
                        help="BLAS threads of the before path: one (the algorithms compared on equal terms) or numpy's "
                        "default, as the scorer shipped (on a busy machine its tiny products thrash: minutes more)")
    args = parser.parse_args()
    recs = records_of(args.zoo)
    if not recs:
        raise SystemExit(f"no shipped records of {args.zoo} under {RESULTS}")
    zoo = load_zoo(args.zoo)
    cited = {r["zoo"].get("table_sha256") for r in recs}
    if cited != {zoo.table_sha256}:
        raise SystemExit(f"the records cite table {sorted(cited)}; zoo {args.zoo} built here has {zoo.table_sha256}")
    values = catalogue_values(recs)
    names = list(values.attrs["measures"])
    print(f"{args.zoo}: {len(zoo)} models, {len(names)} measures, table {zoo.table_sha256[:12]}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with reference_path(args.before_threads == "default"):
        start = time.perf_counter()
        before = scores.score(values, zoo, measures=names)
        t_before = time.perf_counter() - start
    spent: dict[str, float] = {}
    with timed_parts(spent):
        start = time.perf_counter()
        after = scores.score(values, zoo, measures=names)
        t_after = time.perf_counter() - start
    print(f"load {os.getloadavg()[0]:.1f} after both runs", flush=True)
    bad, compared = [], 0
    for name in names:
        diff = list(differences(everything(before[name]), everything(after[name])))
        compared += 1
        bad += [f"{name}{p}: {u!r} != {v!r}" for p, u, v in diff]
    for line in bad[:20]:
        print("  differs:", line)
    print(f"compared every score of {compared} measures (values, intervals, draws, held-out predictions): largest "
          f"deviation {WORST['abs']:.1e} absolute, {WORST['rel']:.1e} relative (tolerance rtol {RTOL}, atol {ATOL})")
    print(f"scoring: before {t_before:.1f} s, after {t_after:.1f} s, same numbers: {not bad} "
          f"(x{t_before / t_after:.1f})")
    print(f"after, per part (seconds summed over the measures, {scores._workers(len(names))} side by side): rank "
          f"scores {spent.get('_add_rank', 0):.1f}, k-fold R^2 {spent.get('_add_regression', 0):.1f}, delta_r2 "
          f"{spent.get('_add_delta', 0):.1f}")
    if args.records:
        total, wrong = 0, []
        for folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
            try:
                z = load_zoo(folder.name)
            except GenbenchError:
                print(f"records: {folder.name} skipped (zoo not built here)")
                continue
            if not z.complete:
                print(f"records: {folder.name} skipped (zoo {z.state()})")
                continue
            done, diff = compare_records(folder.name)
            total += done
            wrong += diff
            print(f"records: {folder.name}: {done} re-scored, {len(diff)} difference(s)")
        for line in wrong[:20]:
            print("  differs:", line)
        print(f"records: {total} re-scored, same numbers: {not wrong}")


if __name__ == "__main__":
    main()
