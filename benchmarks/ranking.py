"""Cost of the leaderboard's paired rank groups: the bootstrap draws of 50 entries' pooled k-fold R^2 (10 shuffles of
held-out predictions of 216 models, 1000 resamples), computed in one batched product as the leaderboard does, and
entry by entry, and a plain `numpy` pass over the same arrays (the sum of squared held-out errors, the unit).
Each round times all three back to back; each ratio is the median of the per-round ratios.
Usage: python benchmarks/ranking.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from genbench.scoring.resample import paired_groups, pooled_scores, resample_weights


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, entries, repeats, n_boot = 216, 50, 10, 1000
    gap = rng.normal(0.15, 0.1, n)
    stack = gap + rng.normal(0, 1, (entries, repeats, n)) * np.linspace(0.02, 0.1, entries)[:, None, None]
    w = resample_weights(n, table_sha256="benchmark", seed=0, n_boot=n_boot)

    def batched():
        draws = pooled_scores(gap, stack, w)[0]
        paired_groups(sorted(draws.mean(1), reverse=True), draws[np.argsort(-draws.mean(1))])

    def one_by_one():
        np.stack([pooled_scores(gap, h, w)[0] for h in stack])

    def unit():
        ((stack - gap) ** 2).sum(-1)

    batched(), one_by_one()  # warm up
    t = np.array([[seconds(batched), seconds(one_by_one), seconds(unit)] for _ in range(args.rounds)])
    print(f"{entries} entries x {repeats} shuffles x {n} models, {n_boot} resamples; medians of {args.rounds} rounds")
    print(f"  draws + groups, batched      {np.median(t[:, 0]) * 1e3:8.1f} ms")
    print(f"  draws, entry by entry        {np.median(t[:, 1]) * 1e3:8.1f} ms")
    print(f"  squared errors (the unit)    {np.median(t[:, 2]) * 1e3:8.1f} ms")
    print(f"  entry by entry / batched = {np.median(t[:, 1] / t[:, 0]):.1f}x; "
          f"batched / unit = {np.median(t[:, 0] / t[:, 2]):.1f}x")


if __name__ == "__main__":
    main()
