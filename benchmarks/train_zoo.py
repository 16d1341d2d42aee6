"""Throughput of batched zoo training vs training the same models one by one with torch.optim.

`--family mlp` (default) takes 16 width-64 MLPs of version 1 of the mnist1d-demogen grid
(benchmarks/demogen_v1.py; batchnorm off; dropout, weight decay, augmentation and seed vary). `--family cnn1d`
takes 1-D CNNs on MNIST-1D (32 channels, depth 3, stride 2; batchnorm, dropout, weight decay and augmentation
vary), `--family nin` DEMOGEN's Network-in-Network on CIFAR-shaped inputs (random 3 x 32 x 32 tensors: the real
data cannot be downloaded here, and throughput does not depend on it; `--base-channels` sets its width), or with
`--data mnist1d` the same network in 1-D on MNIST-1D. Each
trains the models for a few epochs both ways in one run, and prints the ratio and the test accuracy of both (they
follow the same trajectories up to float error and dropout masks).

Timing: both ways are warmed up once, then timed in `--rounds` rounds, batched and one-by-one back to
back in each round (alternating which goes first), and the speed-up is the median of the per-round
ratios, so that both sides of a ratio see the same state of this shared, noisy machine. This is done
first with the system's malloc settings, then with the ones the `genbench` command sets at start-up
(freed memory kept for reuse, see genbench/harness/malloc.py), which is how `genbench zoo build` trains.
`--recipe NAME` times a zoo's own workload instead: every shape group of the recipe (as `genbench zoo build`
plans them, the first `--models` models of each), trained `--epochs` epochs without the stopping rule, batched and
one by one; the speed-up is the whole zoo's (all groups' one-by-one seconds over all groups' batched seconds, per
round), with each group's beside it.
Usage: python benchmarks/train_zoo.py [--family mlp|cnn1d|nin] [--data cifar|mnist1d] [--epochs 5] [--models 16]
       [--rounds 5]
       python benchmarks/train_zoo.py --recipe demogen-nin-mnist1d [--models 16] [--epochs 3] [--rounds 3]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from genbench.harness.malloc import keep_freed_memory
from genbench.zoo.build import plan_groups
from genbench.zoo.data import Pool, load_pool
from genbench.zoo.recipe import load_recipe, parse_recipe
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


CONV_GRID = {"batchnorm": [False, True], "dropout": [0.0, 0.2], "weight_decay": [0.0, 0.001],
             "augment": [False, True], "seed": [0, 1]}


def cifar_shaped(n_train: int = 1000, n_test: int = 500) -> Pool:
    """Random CIFAR-shaped images and labels (3 x 32 x 32, 10 classes)."""
    g = torch.Generator().manual_seed(0)
    return Pool(x_train=torch.randn(n_train, 3, 32, 32, generator=g), y_train=torch.randint(0, 10, (n_train,), generator=g),
                x_test=torch.randn(n_test, 3, 32, 32, generator=g), y_test=torch.randint(0, 10, (n_test,), generator=g),
                num_classes=10, kind="image")


def workload(family: str, epochs: int, models: int, base_channels: int, data: str = "cifar") -> tuple[list, Pool, str]:
    """The specs of one shape group, their pool, and what they are (for the report)."""
    if family == "mlp":
        recipe = load_recipe("mnist1d-demogen", {**DEMOGEN_V1, "train.epochs": epochs, "train.lr_milestones": []})
        specs = [s for s in recipe.expand() if s.arch["width"] == 64 and not s.arch["batchnorm"]][:models]
        return specs, load_pool(recipe.dataset), "width-64 MLPs on MNIST-1D"
    if family == "cnn1d":
        arch, dataset, what = {"channels": 32, "depth": 3, "stride": 2}, {"name": "mnist1d"}, "32-channel 1-D CNNs on MNIST-1D"
    else:
        arch, dataset = {"base_channels": base_channels}, {"name": "mnist1d"}
        what = f"NiNs ({base_channels} channels) on " + ("MNIST-1D (1-D convolutions)" if data == "mnist1d" else
                                                          "CIFAR-shaped inputs")
    grid = {k: v for k, v in CONV_GRID.items() if k != "batchnorm"}  # one shape group: batchnorm on for all
    cells = math.prod(len(v) for k, v in grid.items() if k != "seed")
    grid["seed"] = list(range(max(len(grid["seed"]), -(-models // cells))))  # enough seeds for `models` models
    recipe = parse_recipe({"name": f"bench-{family}", "dataset": dataset, "family": family,
                           "arch": {**arch, "batchnorm": True}, "grid": grid,
                           "train": {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 128,
                                     "epochs": epochs, "train_size": 1000}})
    pool = load_pool(dataset) if family == "cnn1d" or data == "mnist1d" else cifar_shaped()
    return recipe.expand()[:models], pool, what


def recipe_groups(name: str, epochs: int, models: int) -> tuple[list[list], Pool]:
    """The shape groups of recipe `name` (the first `models` models of each) and its pool, trained `epochs` epochs
    without the stopping rule."""
    recipe = load_recipe(name, {"train.epochs": epochs, "train.stop": None})
    return [g[:models] for g in plan_groups(recipe.expand())], load_pool(recipe.dataset)


def zoo_speedup(name: str, epochs: int, models: int, rounds: int) -> None:
    """Batched / one-by-one over every shape group of a recipe, the groups timed back to back in each round."""
    groups, pool = recipe_groups(name, epochs, models)
    train_group(groups[0], pool), train_one(groups[0][0], pool)  # warm-up
    keep_freed_memory()  # as `genbench zoo build` trains
    t_b, t_s = np.zeros((rounds, len(groups))), np.zeros((rounds, len(groups)))
    for r in range(rounds):
        for j, g in enumerate(groups):
            one = paired_rounds(lambda: train_group(g, pool), lambda: [train_one(s, pool) for s in g], 1)
            t_b[r, j], t_s[r, j] = one[0][0], one[1][0]
    print(f"{name}: {len(groups)} shape groups x {len(groups[0])} models x {epochs} epochs, "
          f"{torch.get_num_threads()} threads, genbench CLI malloc; medians of {rounds} rounds")
    for j, g in enumerate(groups):
        arch = {k: v for k, v in g[0].arch.items() if k not in ("dropout",)}
        print(f"  group {arch}: batched {np.median(t_b[:, j]):.2f} s, one by one {np.median(t_s[:, j]):.2f} s, "
              f"{np.median(t_s[:, j] / t_b[:, j]):.2f}x")
    ratios = t_s.sum(1) / t_b.sum(1)
    print(f"  whole zoo: batched {np.median(t_b.sum(1)):.2f} s, one by one {np.median(t_s.sum(1)):.2f} s")
    print(f"  speed-up batched / one-by-one: {np.median(ratios):.2f}x, median of the per-round ratios "
          f"(range {ratios.min():.2f}-{ratios.max():.2f}; target >= 4x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", help="time every shape group of this recipe (e.g. demogen-nin-mnist1d)")
    ap.add_argument("--family", choices=("mlp", "cnn1d", "nin"), default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--base-channels", type=int, default=32, help="NiN width (DEMOGEN: 192)")
    ap.add_argument("--data", choices=("cifar", "mnist1d"), default="cifar",
                    help="NiN's input: CIFAR-shaped random images, or MNIST-1D signals (the NiN in 1-D)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="let cuDNN time its algorithms (not used by builds: "
                    "its choice can differ between runs)")
    args = ap.parse_args()
    if args.recipe:
        torch.set_flush_denormal(True)
        return zoo_speedup(args.recipe, args.epochs, args.models, args.rounds)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    specs, pool, what = workload(args.family, args.epochs, args.models, args.base_channels, args.data)
    torch.set_flush_denormal(True)

    def sync(result):
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return result

    def batched():
        return sync(train_group(specs, pool, device=args.device))

    def single():
        return sync([train_one(s, pool, device=args.device) for s in specs])

    batched(), train_one(specs[0], pool, device=args.device)  # warm-up (kernels, allocator, cuDNN autotuning)
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

    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{torch.get_num_threads()} threads"
    print(f"{len(specs)} {what} x {args.epochs} epochs ({len(pool.y_train)} examples), {args.device}: {where}")
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
