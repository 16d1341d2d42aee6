"""Throughput of batched zoo training vs training the same models one by one with torch.optim.

Takes 16 width-64 MLPs of the mnist1d-demogen grid (batchnorm off; dropout, weight decay, augmentation
and seed vary), trains them for a few epochs both ways in one run, and prints the ratio and the test
accuracy of both (they follow the same trajectories up to float error and dropout masks).
Usage: python benchmarks/train_zoo.py [--epochs 5] [--models 16]
"""
from __future__ import annotations

import argparse
import time

import torch

from genbench.zoo.data import load_pool
from genbench.zoo.recipe import load_recipe
from genbench.zoo.train import evaluate_model, init_model, train_group, train_one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--models", type=int, default=16)
    args = ap.parse_args()
    recipe = load_recipe("mnist1d-demogen", {"train.epochs": args.epochs, "train.lr_milestones": []})
    specs = [s for s in recipe.expand() if s.arch["width"] == 64 and not s.arch["batchnorm"]][:args.models]
    pool = load_pool(recipe.dataset)
    torch.set_flush_denormal(True)
    train_group(specs[:2], pool)  # warm-up
    t0 = time.perf_counter()
    batched = train_group(specs, pool)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = [train_one(s, pool) for s in specs]
    t_single = time.perf_counter() - t0

    def test_acc(trained):
        accs = []
        for t in trained:
            model = init_model(t.spec, pool)
            model.load_state_dict(t.state)
            accs.append(evaluate_model(model, pool.x_test, pool.y_test)[0])
        return torch.tensor(accs)

    a, b = test_acc(batched), test_acc(single)
    print(f"{len(specs)} width-64 MLPs x {args.epochs} epochs on MNIST-1D ({len(pool.y_train)} examples), "
          f"{torch.get_num_threads()} threads")
    print(f"batched: {t_batched:.2f} s   one by one: {t_single:.2f} s")
    print(f"speed-up batched / one-by-one: {t_single / t_batched:.2f}x  (target >= 4x)")
    print(f"test accuracy batched: mean {a.mean():.4f} min {a.min():.4f} max {a.max():.4f}")
    print(f"test accuracy 1-by-1:  mean {b.mean():.4f} min {b.min():.4f} max {b.max():.4f}")
    print(f"largest per-model test-accuracy difference: {(a - b).abs().max():.4f}")


if __name__ == "__main__":
    main()
