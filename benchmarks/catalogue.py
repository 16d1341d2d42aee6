"""Time of the whole built-in catalogue on a zoo (default: the 216-model mnist1d-demogen), per measure family, and
of each search measure batched against one model at a time.

Runs `gb.evaluate` on the measures with the cache off, so each value is computed; work shared between measures of
one model (the margin pass, the training-set logits, folded weights, the sigma searches) is done once per model and
charged to the first measure that asks for it. Prints seconds per family and in total, and, with --limit, the
projection to the whole zoo. Each measure with a batched implementation (the PAC-Bayes and sharpness searches,
measures/batched.py) is run alone twice on the same models, one model at a time and stacked by shape, and gets a
line `MEASURE: batched / per-model N.NNx, same values: True|False` (the speed-up of the batched path, measured in
this run, and whether every model got the same value from both; the load average is printed with them). With
--ceiling, each batched run is repeated with its compute kernels recorded and timed in place (kernels.py):
`ceiling N.NNx` is per-model / the kernels' seconds in the pass, the speed-up if everything but the stacked matrix
products and convolutions were free (as train_anatomy.py measures it for a training step), and the batched ratio is
said as a share of it. The kernels replayed alone (each distinct call repeated on the same tensors, in cache) are
printed beside it: they take about 0.7x their time in the pass, a ceiling no pass can reach.
Usage: python benchmarks/catalogue.py [--zoo mnist1d-demogen] [--limit N] [--measures 'norm.*' ...] [--ceiling]
"""
from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import numpy as np
import pandas as pd

import genbench as gb
from genbench.harness.executor import Executor
from genbench.harness.malloc import keep_freed_memory
from genbench.measures.registry import resolve_measures

from kernels import Kernels, kernel_seconds


def timed(measures: list[str], zoo: gb.Zoo, ids: list[str], batch: bool = True) -> tuple[pd.DataFrame, float]:
    """The value table of `measures` on `ids` (cache off) and its wall time."""
    t0 = time.perf_counter()
    df = gb.evaluate(measures, zoo, models=ids, cache=False, executor=Executor(batch=batch), progress=False)
    return df, time.perf_counter() - t0


def same_values(a: pd.DataFrame, b: pd.DataFrame, name: str) -> tuple[bool, str]:
    """Whether two tables give every model the same value of `name` (rtol 1e-5, same failures), and how many differ."""
    cols = [c for c in a.columns if c == name or c.startswith(name + "[")]
    x, y = a[cols].to_numpy(float), b[cols].to_numpy(float)
    close = np.isclose(x, y, rtol=1e-5, atol=0, equal_nan=True).all(axis=1)
    errors_equal = (a[f"{name}:error"].fillna("") == b[f"{name}:error"].fillna("")).to_numpy()
    ok = close & errors_equal
    if ok.all():
        return True, ""
    rel = np.nanmax(np.abs(x - y) / np.maximum(np.abs(x), 1e-300))
    return False, f" ({int((~ok).sum())} of {len(ok)} models differ, by up to {rel:.2g} relative)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default="mnist1d-demogen")
    ap.add_argument("--limit", type=int, default=None, help="only the first N models")
    ap.add_argument("--measures", nargs="*", default=["*"])
    ap.add_argument("--ceiling", action="store_true", help="also time each batched search's compute kernels alone")
    args = ap.parse_args()
    keep_freed_memory()  # as the `genbench` command does
    zoo = gb.load_zoo(args.zoo)
    ids = zoo.model_ids[:args.limit] if args.limit else zoo.model_ids
    measures = resolve_measures(args.measures)
    searched = [m.name for m in measures if m.batched is not None]
    others = [m.name for m in measures if m.batched is None]
    print(f"zoo {zoo.name}: {len(ids)} of {len(zoo)} models, {len(measures)} measures; "
          f"load average {os.getloadavg()[0]:.2f}")
    seconds: dict[str, float] = {}
    failures: dict[str, int] = {}
    wall = 0.0
    if others:
        df, wall = timed(others, zoo, ids)
        seconds.update(df.attrs["seconds"])
        failures.update({n: int(df[f"{n}:error"].notna().sum()) for n in others})
    for name in searched:
        per, t_per = timed([name], zoo, ids, batch=False)
        bat, t_bat = timed([name], zoo, ids)
        same, why = same_values(per, bat, name)
        print(f"{name}: batched / per-model {t_per / t_bat:.2f}x, same values: {same}{why}   "
              f"({t_bat:.1f} s against {t_per:.1f} s; load average {os.getloadavg()[0]:.2f})", flush=True)
        if args.ceiling:
            with Kernels() as rec:
                timed([name], zoo, ids)
            if not rec.calls:
                print(f"  {name}: no compute kernel recorded (the search ran in another thread): no ceiling")
            else:
                alone = kernel_seconds(rec.calls)
                print(f"  {name}: ceiling {t_per / rec.seconds:.2f}x ({len(rec.calls)} kernels, {rec.seconds:.1f} s "
                      f"in the pass; replayed alone {alone:.1f} s, ceiling {t_per / alone:.2f}x); batched at "
                      f"{100 * rec.seconds / t_bat:.0f}% of it (load average {os.getloadavg()[0]:.2f})", flush=True)
        seconds[name] = bat.attrs["seconds"].get(name, 0.0)
        failures[name] = int(bat[f"{name}:error"].notna().sum())
        wall += t_bat
    families: dict[str, float] = defaultdict(float)
    for name, s in seconds.items():
        families[name.split(".")[0]] += s
    for fam, s in sorted(families.items(), key=lambda kv: -kv[1]):
        print(f"  {fam:<10} {s:8.1f} s   {s / len(ids):6.3f} s/model")
    print(f"  {'total':<10} {wall:8.1f} s wall ({wall / len(ids):.3f} s/model, model loading included"
          f"{'; search measures timed one by one, their shared searches not shared' if len(searched) > 1 else ''})")
    if len(ids) < len(zoo):
        print(f"  projected to all {len(zoo)} models: {wall / len(ids) * len(zoo) / 60:.1f} min (target <= 15 min)")
    bad = {n: k for n, k in failures.items() if k}
    print("failures: " + (", ".join(f"{n} on {k} models" for n, k in bad.items()) if bad else "none"))


if __name__ == "__main__":
    main()
