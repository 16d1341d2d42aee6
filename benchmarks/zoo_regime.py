"""Where a built zoo sits: how many models fit their training set, test accuracy and gap ranges, and a balanced
ANOVA of the gap over the grid's axes (issue 26's regime targets, the figures the README quotes).

The ANOVA share of an axis is the sum of squares between its levels' mean gaps over the total sum of squares
(for a balanced full grid the main effects are orthogonal); a pair of axes is the share of its cells' means (both
main effects and their interaction), "cells" the share of every hyperparameter cell (all axes but the seed).
Usage: python benchmarks/zoo_regime.py ZOO [--pair augment,dropout]
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np
import pandas as pd

from genbench.zoo.storage import load_zoo


def share(table: pd.DataFrame, columns: list[str], y: str = "gap") -> float:
    """Sum of squares of the cell means over `columns` (weighted by cell size) over the total sum of squares."""
    grand = table[y].mean()
    cells = table.groupby(columns)[y].agg(["mean", "size"])
    return float((cells["size"] * (cells["mean"] - grand) ** 2).sum() / ((table[y] - grand) ** 2).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("zoo")
    ap.add_argument("--pair", action="append", default=[], help="two axes, comma-separated: their cells' share")
    args = ap.parse_args()
    zoo = load_zoo(args.zoo)
    t = zoo.table
    n = len(t)
    conv = t["converged"].fillna(False).astype(bool)
    print(f"{zoo.name} v{zoo.version}: {n} models")
    print(f"  converged (met the stopping rule): {conv.sum()} of {n} ({conv.mean():.0%}); "
          f"train accuracy {t.train_acc.min():.3f}-{t.train_acc.max():.3f}, >= 0.99: {(t.train_acc >= 0.99).mean():.0%}")
    print(f"  test accuracy {t.test_acc.min():.3f}-{t.test_acc.max():.3f}; >= 0.75: {(t.test_acc >= 0.75).mean():.0%}")
    p5, p95 = np.percentile(t.gap, [5, 95])
    print(f"  gap {t.gap.min():.3f}-{t.gap.max():.3f}; 5th-95th percentile {p5:.3f}-{p95:.3f} (span {p95 - p5:.3f})")
    print(f"  epochs {int(t.epochs.min())}-{int(t.epochs.max())}, median {int(t.epochs.median())}")
    axes = [a for a, levels in zoo.hparams.items() if len(levels) > 1]
    hp = [a for a in axes if a != "seed"]
    print("  balanced ANOVA of the gap, share of its variance:")
    for a in axes:
        print(f"    {a}: {share(t, ['hp.' + a]):.1%}")
    pairs = [p.split(",") for p in args.pair] or list(itertools.combinations(hp, 2))
    best = sorted(((share(t, ["hp." + a for a in p]), p) for p in pairs), reverse=True)[:3]
    for s, p in best:
        print(f"    {' x '.join(p)} (cells): {s:.1%}")
    cells = share(t, ["hp." + a for a in hp])
    print(f"    the {t.groupby(['hp.' + a for a in hp]).ngroups} hyperparameter cells: {cells:.1%} (the seeds "
          f"{1 - cells:.1%})")


if __name__ == "__main__":
    main()
