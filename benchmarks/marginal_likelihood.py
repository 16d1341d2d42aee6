"""Cost of the marginal-likelihood PAC-Bayes bound (pacbayes.marginal_likelihood) against training-set size.

On the mnist1d-fragility zoo's data (MNIST-1D, 40 features, its 4000-example training pool) and its architecture
(MLP, depth 3, width 128), for n in 250, 500, 1000, 2000, 4000 (the zoo's train sizes, label noise 0, data seed
0), times the NNGP kernel (O(n^2 depth)) and EP (one Cholesky and one triangular solve of an n x n matrix per
sweep, O(n^3)), float64, and prints seconds, sweeps, seconds per sweep, log P(S) and the bound, and the total as
a fraction of the per-model budget (genbench.defaults.BUDGET_S). The per-process cache is bypassed, so every
row is computed from scratch. Each sweep costs about 4/3 n^3 flops, so the time per sweep should grow ~8x per
doubling of n once the matrices outgrow the caches.
Usage: python benchmarks/marginal_likelihood.py [--sizes 250 500 1000 2000 4000] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import time

import torch

from genbench.defaults import BUDGET_S
from genbench.measures import marginal as ml
from genbench.zoo.data import load_pool, train_subset
from genbench.zoo.recipe import load_recipe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    recipe = load_recipe("mnist1d-fragility")
    pool = load_pool(recipe.dataset)
    spec = ml.pytorch_default_spec(pool.x_train[0].numel(), int(recipe.arch["width"]), int(recipe.arch["depth"]))
    print(f"mnist1d-fragility data ({len(pool.y_train)} training examples, {pool.x_train[0].numel()} features), "
          f"MLP depth {recipe.arch['depth']} width {recipe.arch['width']}; device {args.device}, "
          f"{torch.get_num_threads()} threads; EP: damping {ml.DAMPING}, tol {ml.TOL:g}, at most {ml.MAX_SWEEPS} "
          f"sweeps, jitter {ml.JITTER:g}")
    print(f"{'n':>6} {'kernel s':>9} {'EP s':>8} {'sweeps':>6} {'s/sweep':>8} {'log P(S)':>10} {'-logP/n':>8} "
          f"{'bound':>7} {'total/budget':>12}")
    for n in args.sizes:
        idx, y = train_subset(pool, train_size=n, label_noise=0.0, data_seed=0)
        x = pool.x_train[idx].to(args.device, torch.float64)
        yb = ml.binary_labels(y, pool.num_classes).to(args.device)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        k = ml.nngp_kernel(x, spec)
        k.diagonal().add_(ml.JITTER * float(k.diagonal().mean()))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        r = ml.ep_log_marginal(k, yb)
        t2 = time.perf_counter()
        del k
        total = t2 - t0
        print(f"{n:>6} {t1 - t0:>9.2f} {t2 - t1:>8.2f} {r.sweeps:>6} {(t2 - t1) / r.sweeps:>8.3f} {r.log_z:>10.2f} "
              f"{-r.log_z / n:>8.4f} {ml.bound(r.log_z, n):>7.4f} {total / BUDGET_S:>12.3f}"
              + ("" if r.converged else "  (not converged)"), flush=True)


if __name__ == "__main__":
    main()
