"""The GPU figures of a DEMOGEN CNN zoo, each beside the same figure on this machine's CPU, measured in one run.

Builds a slice of `demogen-nin-cifar10` (its first models: one shape group of the real recipe, DEMOGEN's
Network-in-Network, 192 channels) on CIFAR-shaped data: random 3 x 32 x 32 tensors and labels, because the real
data cannot be downloaded on a device machine and throughput does not depend on the pixels. On each device it
measures, in this order:

  1. models per hour of `genbench zoo build` on the slice (few epochs, the checkpoints and metrics written), and
     what that gives for the full recipe (380 epochs on 50,000 images), from seconds per model and example-epoch;
  2. batched training / the one-model torch.optim loop, the same models and epochs both ways;
  3. the catalogue (every built-in measure) on the slice's first models: seconds per model.

Usage: python benchmarks/gpu.py [--size tiny|slice] [--devices cuda,cpu]  (benchmarks/gpu.sh runs the slice on a
device machine; the test suite runs --size tiny on the CPU). On the CPU, torch uses GENBENCH_BUILD_THREADS threads
(benchmarks/gpu.sh sets it to the machine's cores).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from genbench import build_zoo, evaluate
from genbench.numerics import build_threads, pinned_threads
from genbench.zoo import data as zoo_data
from genbench.zoo.recipe import load_recipe
from genbench.zoo.train import train_group, train_one

from train_zoo import cifar_shaped

RECIPE = "demogen-nin-cifar10"
FULL_EPOCHS, FULL_EXAMPLES = 380, 50_000  # the recipe's schedule on CIFAR-10's training set


@dataclass(frozen=True)
class Size:
    """One run's size on one kind of device."""

    base_channels: int
    models: int        # first models of the grid: one shape group (width 1, batchnorm off)
    epochs: int
    n_train: int
    n_test: int
    eval_models: int   # models the catalogue runs on
    budget_s: float    # per model and measure, as `genbench evaluate` bounds it


SIZES = {
    "tiny": {"cpu": Size(4, 2, 1, 48, 32, 1, 60.0), "cuda": Size(4, 2, 1, 48, 32, 1, 60.0)},
    # the same data on both; the CPU trains fewer models for fewer epochs and its searches stop at a shorter budget
    "slice": {"cuda": Size(192, 8, 5, 1000, 500, 2, 120.0),
              "cpu": Size(192, 4, 1, 1000, 500, 1, 15.0)},
}


def cifar_shaped_dataset(spec: dict[str, Any]) -> zoo_data.Pool:
    """The recipe's dataset: random CIFAR-shaped images and labels (train_zoo.py's), n_train and n_test of them."""
    return cifar_shaped(int(spec["n_train"]), int(spec["n_test"]))


zoo_data.DATASETS.setdefault("cifar-shaped", cifar_shaped_dataset)


def overrides(size: Size) -> dict[str, Any]:
    """The recipe's keys this run changes: the data, the width and the schedule (the slice is `limit`)."""
    return {"dataset": {"name": "cifar-shaped", "n_train": size.n_train, "n_test": size.n_test},
            "arch.base_channels": size.base_channels, "train.epochs": size.epochs, "train.lr_milestones": []}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str) -> tuple[float, Any]:
    """Seconds of fn() (the device's queue drained before and after) and its result."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def measure(device: str, size: Size, work: Path) -> dict[str, Any]:
    """The three figures on one device."""
    recipe = load_recipe(RECIPE, overrides(size))
    specs = recipe.expand()[:size.models]
    pool = zoo_data.load_pool(recipe.dataset)
    with pinned_threads():
        train_one(specs[0], pool, device=device)  # warm-up: CUDA context, kernels, allocator
        t_build, zoo = timed(lambda: build_zoo(RECIPE, work / f"zoo-{device}", limit=size.models, device=device,
                                               overrides=overrides(size), progress=False), device)
        t_batched, _ = timed(lambda: train_group(specs, pool, device=device), device)
        t_single, _ = timed(lambda: [train_one(s, pool, device=device) for s in specs], device)
    ids = zoo.model_ids[:size.eval_models]
    t_eval, values = timed(lambda: evaluate("*", zoo, device=device, models=ids, cache=False, progress=False,
                                            budget_s=size.budget_s), device)
    errors = {c[:-len(":error")]: values[c].dropna().astype(str).tolist() for c in values.columns if c.endswith(":error")}
    over = sorted(m for m, e in errors.items() if any(x.startswith("over budget") for x in e))
    failed = sorted(m for m, e in errors.items() if e and m not in over)
    per_model_epoch_example = t_build / (size.models * size.epochs * size.n_train)
    return {"device": device,
            "name": torch.cuda.get_device_name(device) if device.startswith("cuda") else f"CPU, {build_threads()} threads",
            "size": size.__dict__,
            "build_s": t_build, "models_per_hour": size.models * 3600 / t_build,
            "full_recipe_models_per_hour": 3600 / (per_model_epoch_example * FULL_EPOCHS * FULL_EXAMPLES),
            "batched_s": t_batched, "one_by_one_s": t_single, "speedup": t_single / t_batched,
            "catalogue_s_per_model": t_eval / len(ids), "catalogue_measures": len(values.attrs["measures"]),
            "catalogue_failed": failed, "catalogue_over_budget": over}


def report(results: list[dict[str, Any]]) -> str:
    """The figures side by side, one column per device."""
    rows = [("device", lambda r: r["name"]),
            ("slice (models x epochs x examples)",
             lambda r: f"{r['size']['models']} x {r['size']['epochs']} x {r['size']['n_train']}"),
            ("build: models per hour (slice)", lambda r: f"{r['models_per_hour']:.0f}"),
            ("build: models per hour (full recipe)", lambda r: f"{r['full_recipe_models_per_hour']:.2f}"),
            ("batched / one-by-one (speed-up)", lambda r: f"{r['speedup']:.2f}x"),
            ("catalogue: seconds per model", lambda r: ">= " * bool(r["catalogue_over_budget"])
             + f"{r['catalogue_s_per_model']:.1f}"),
            ("catalogue: measures (no value, over budget)", lambda r: f"{r['catalogue_measures']} "
             f"({len(r['catalogue_failed'])}, {len(r['catalogue_over_budget'])})")]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  " + "  ".join(f"{fn(r):>28}" for r in results) for label, fn in rows]
    for r in results:
        if r["catalogue_failed"]:
            lines.append(f"{r['device']}: no value from {', '.join(r['catalogue_failed'])}")
        if r["catalogue_over_budget"]:
            lines.append(f"{r['device']}: stopped at the budget of {r['size']['budget_s']:g} s per model and measure "
                         f"(so the seconds per model are a lower bound): {', '.join(r['catalogue_over_budget'])}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="slice")
    ap.add_argument("--devices", default=None, help="comma-separated, in order (default: cuda,cpu where cuda is "
                    "present, else cpu)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    devices = (args.devices or ("cuda,cpu" if torch.cuda.is_available() else "cpu")).split(",")
    torch.set_flush_denormal(True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("GENBENCH_HOME", tmp)
        for device in devices:
            kind = "cuda" if device.startswith("cuda") else "cpu"
            results.append(measure(device, SIZES[args.size][kind], Path(tmp)))
            print(f"{device} done: {json.dumps(results[-1])}", flush=True)
    print(f"{RECIPE}, a slice on CIFAR-shaped random data (torch {torch.__version__})")
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
