"""Throughput of batched zoo training vs training the same models one by one with torch.optim.

Takes 16 width-64 MLPs of version 1 of the mnist1d-demogen grid (benchmarks/demogen_v1.py; batchnorm off;
dropout, weight decay, augmentation and seed vary), trains them for a few epochs both ways in one run, and
prints the ratio and the test accuracy of both (they follow the same trajectories up to float error and
dropout masks).

Timing: both ways are warmed up once, then timed in `--rounds` rounds, batched and one-by-one back to
back in each round (alternating which goes first), and the speed-up is the median of the per-round
ratios, so that both sides of a ratio see the same state of this shared, noisy machine. This is done
first with the system's malloc settings, then with the ones the `genbench` command sets at start-up
(freed memory kept for reuse, see genbench/harness/malloc.py), which is how `genbench zoo build` trains.
Usage: python benchmarks/train_zoo.py [--epochs 5] [--models 16] [--rounds 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from genbench.harness.malloc import keep_freed_memory
from genbench.zoo.data import load_pool
from genbench.zoo.recipe import load_recipe
from genbench.zoo.train import evaluate_model, init_model, train_group, train_one

from demogen_v1 import DEMOGEN_V1


def paired_rounds(batched, single, rounds: int) -> tuple[np.ndarray, np.ndarray, list, list]:
    """Seconds of `batched()` and `single()` in each round, which goes first alternating; and the
    results of the first round."""
    t_b, t_s, first = np.empty(rounds), np.empty(rounds), {}
    for r in range(rounds):
        order = [("b", batched, t_b), ("s", single, t_s)]
        for name, fn, out in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            result = fn()
            out[r] = time.perf_counter() - t0
            first.setdefault(name, result)
    return t_b, t_s, first["b"], first["s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    recipe = load_recipe("mnist1d-demogen", {**DEMOGEN_V1, "train.epochs": args.epochs, "train.lr_milestones": []})
    specs = [s for s in recipe.expand() if s.arch["width"] == 64 and not s.arch["batchnorm"]][:args.models]
    pool = load_pool(recipe.dataset)
    torch.set_flush_denormal(True)

    def batched():
        return train_group(specs, pool)

    def single():
        return [train_one(s, pool) for s in specs]

    train_group(specs[:2], pool), train_one(specs[0], pool)  # warm-up
    settings = {"system malloc": paired_rounds(batched, single, args.rounds)}
    if keep_freed_memory():
        settings["genbench CLI malloc (freed memory kept)"] = paired_rounds(batched, single, args.rounds)

    def test_acc(trained):
        accs = []
        for t in trained:
            model = init_model(t.spec, pool)
            model.load_state_dict(t.state)
            accs.append(evaluate_model(model, pool.x_test, pool.y_test)[0])
        return torch.tensor(accs)

    print(f"{len(specs)} width-64 MLPs x {args.epochs} epochs on MNIST-1D ({len(pool.y_train)} examples), "
          f"{torch.get_num_threads()} threads")
    for name, (t_b, t_s, _, _) in settings.items():
        ratios = t_s / t_b
        print(f"{name}: medians of {args.rounds} rounds, batched and one-by-one back to back in each")
        print(f"  batched: {np.median(t_b):.2f} s   one by one: {np.median(t_s):.2f} s")
        print(f"  speed-up batched / one-by-one: {np.median(ratios):.2f}x, median of the per-round ratios "
              f"(range {ratios.min():.2f}-{ratios.max():.2f}; target >= 4x)")
    _, _, batched_models, single_models = settings["system malloc"]
    a, b = test_acc(batched_models), test_acc(single_models)
    print(f"test accuracy batched: mean {a.mean():.4f} min {a.min():.4f} max {a.max():.4f}")
    print(f"test accuracy 1-by-1:  mean {b.mean():.4f} min {b.min():.4f} max {b.max():.4f}")
    print(f"largest per-model test-accuracy difference: {(a - b).abs().max():.4f}")


if __name__ == "__main__":
    main()
