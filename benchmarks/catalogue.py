"""Time of the whole built-in catalogue on a zoo (default: the 216-model mnist1d-demogen), per measure family.

Runs `gb.evaluate` on every built-in measure with the cache off, so each value is computed; work shared
between measures of one model (the margin pass, the training-set logits, folded weights, the sigma
searches) is done once per model and charged to the first measure that asks for it. Prints seconds per
family and in total, and, with --limit, the projection to the whole zoo.
Usage: python benchmarks/catalogue.py [--zoo mnist1d-demogen] [--limit N] [--measures 'norm.*' ...]
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import genbench as gb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default="mnist1d-demogen")
    ap.add_argument("--limit", type=int, default=None, help="only the first N models")
    ap.add_argument("--measures", nargs="*", default=["*"])
    args = ap.parse_args()
    zoo = gb.load_zoo(args.zoo)
    ids = zoo.model_ids[:args.limit] if args.limit else zoo.model_ids
    t0 = time.perf_counter()
    df = gb.evaluate(args.measures, zoo, models=ids, cache=False)
    wall = time.perf_counter() - t0
    families: dict[str, float] = defaultdict(float)
    for name, s in df.attrs["seconds"].items():
        families[name.split(".")[0]] += s
    failures = {n: int(df[f"{n}:error"].notna().sum()) for n in df.attrs["measures"]}
    print(f"zoo {zoo.name}: {len(ids)} of {len(zoo)} models, {len(df.attrs['measures'])} measures, "
          f"device {df.attrs['device']}")
    for fam, s in sorted(families.items(), key=lambda kv: -kv[1]):
        print(f"  {fam:<10} {s:8.1f} s   {s / len(ids):6.3f} s/model")
    print(f"  {'total':<10} {wall:8.1f} s wall ({wall / len(ids):.3f} s/model, model loading included)")
    if len(ids) < len(zoo):
        print(f"  projected to all {len(zoo)} models: {wall / len(ids) * len(zoo) / 60:.1f} min (target <= 15 min)")
    bad = {n: k for n, k in failures.items() if k}
    print("failures: " + (", ".join(f"{n} on {k} models" for n, k in bad.items()) if bad else "none"))


if __name__ == "__main__":
    main()
