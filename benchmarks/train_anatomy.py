"""Where the time of a batched training step goes, against one model's step: what bounds the speed-up of batching.

For one shape group (the workloads of benchmarks/train_zoo.py: `--family`, `--data`, `--base-channels`, `--models`)
three things are timed in one process, in alternating rounds, each per model and per step of one batch:

- `one`: one model's `torch.optim` step (forward, backward, update), as `train_one` takes it;
- `stacked`: the stacked step of `train_group` (the family's hand-written gradient, or autograd through its stacked
  forward, then the stacked optimizer);
- `kernels`: the stacked step's compute kernels (matrix products and convolutions) timed in place, in rounds of
  their own (kernels.Kernels), and replayed alone at the shapes, strides and arguments the step calls them with, on
  fresh tensors (which come from memory, where the step's kernels read what the op before them wrote).

It prints stacked / one (the step's speed-up, data loading and augmentation left out on both sides), the kernels'
share of the stacked step, and one / kernels in place: the speed-up if everything but the kernels (batchnorm, ReLU,
dropout, the shifted adds, the update: work that reads and writes whole activations) were free, the ceiling of this
layout (and the same with the kernels replayed alone).
Usage: python benchmarks/train_anatomy.py [--family cnn1d|nin|mlp] [--data cifar|mnist1d] [--base-channels 32]
       [--models 16] [--rounds 9]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import genbench.zoo.train as T
from genbench.harness.malloc import keep_freed_memory

from kernels import Kernels, replayer
from train_zoo import workload


def _stacked_step(specs, pool):
    """The stacked training step of one shape group on one batch per model (what train_group repeats)."""
    models = [T.init_model(s, pool) for s in specs]
    stack = T.Stack(specs, models, "cpu")
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(0, len(pool.y_train), (len(specs), T._Batches(specs[0], pool).bs), generator=g)
    x, y = pool.x_train[rows], pool.y_train[rows]

    def step():
        stack.step(x, y, 1.0)

    return step, models[0], x[0], y[0], specs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=("mlp", "cnn1d", "nin"), default="cnn1d")
    ap.add_argument("--data", choices=("cifar", "mnist1d"), default="mnist1d")
    ap.add_argument("--base-channels", type=int, default=32)
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_flush_denormal(True)
    keep_freed_memory()  # as `genbench zoo build` trains
    specs, pool, what = workload(args.family, 1, args.models, args.base_channels, args.data)
    stacked, model, x1, y1, spec = _stacked_step(specs, pool)
    t = spec.train
    opt = torch.optim.SGD(model.parameters(), lr=t["lr"], momentum=t["momentum"], weight_decay=t["weight_decay"])
    model.train()

    def one():
        loss = F.cross_entropy(model(x1), y1)
        opt.zero_grad()
        loss.backward()
        opt.step()

    stacked()
    with Kernels() as rec:
        stacked()
    kernels = replayer(rec.calls)
    m = len(specs)
    def in_place() -> float:
        with Kernels() as timer:
            for _ in range(4):
                stacked()
        return timer.seconds

    sides = {"one": (one, 1, 4 * m), "stacked": (stacked, m, 4), "kernels": (kernels, m, 4), "in place": (None, m, 4)}
    ms: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            fn, per, reps = sides[name]
            if fn is None:
                ms[name].append(in_place() / reps / per * 1e3)
                continue
            fn()
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            ms[name].append((time.perf_counter() - start) / reps / per * 1e3)
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"{m} {what}, one training step (batch {len(y1)}), {torch.get_num_threads()} threads, "
          f"medians of {args.rounds} alternating rounds, per model:")
    print(f"  one model, torch.optim loop: {med['one']:.3f} ms")
    print(f"  stacked step:                {med['stacked']:.3f} ms  -> speed-up {med['one'] / med['stacked']:.2f}x")
    print(f"  its {len(rec.calls)} compute kernels in place: {med['in place']:.3f} ms  "
          f"({100 * med['in place'] / med['stacked']:.0f}% of the stacked step); replayed alone on fresh tensors: "
          f"{med['kernels']:.3f} ms ({100 * med['kernels'] / med['stacked']:.0f}%)")
    print(f"  ceiling if all but the kernels were free: {med['one'] / med['in place']:.2f}x "
          f"({med['one'] / med['kernels']:.2f}x with the kernels replayed alone); the stacked step at "
          f"{100 * med['in place'] / med['stacked']:.0f}% of it")


if __name__ == "__main__":
    main()
