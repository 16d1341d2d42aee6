"""Cost of the margin signature (all probe layers, one forward + one backward per batch) relative to a
plain forward pass over the same data, and speed-up over a per-example autograd loop.

Trains one mnist1d-demogen model (width 128, batchnorm, dropout 0.2: 60 epochs, a few seconds), then on
its 4000 training examples times: a no-grad forward pass in the margin pass's batches; the margin pass
(`compute_margins`: distances at every probe layer plus the total variation); and a loop that runs
forward and one autograd call per probe layer for each example. Prints both ratios (targets: <= 3.5x
the forward pass, >= 30x faster than the loop), first with the system's malloc settings, then with the
ones the `genbench` command sets (freed memory kept for reuse, see genbench/harness/malloc.py).
Usage: python benchmarks/margins.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from genbench.harness.malloc import keep_freed_memory
from genbench.measures.margin import batch_size, compute_margins, other_class
from genbench.zoo.data import load_pool, train_subset
from genbench.zoo.recipe import load_recipe
from genbench.zoo.train import init_model, train_group


def trained_model(epochs: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """One model of the default zoo's grid, trained as the zoo builder trains it, and its training set."""
    recipe = load_recipe("mnist1d-demogen", {"train.epochs": epochs} if epochs != 60 else None)
    spec = next(s for s in recipe.expand() if s.arch["width"] == 128 and s.arch["batchnorm"]
                and s.arch.get("dropout") == 0.2)
    pool = load_pool(recipe.dataset)
    (trained,) = train_group([spec], pool)
    model = init_model(spec, pool)
    model.load_state_dict(trained.state)
    idx, labels = train_subset(pool, train_size=spec.train["train_size"], label_noise=spec.train["label_noise"],
                               data_seed=spec.data_seed)
    return model.eval(), pool.x_train[idx], labels


def paired_timings(fn_a, fn_b, rounds: int, inner: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Seconds per call of `fn_a` and `fn_b`, timed alternately (`inner` back-to-back calls each) for
    `rounds` rounds, so that both see the same state of this noisy machine in every round."""
    fn_a(), fn_b()
    a, b = np.empty(rounds), np.empty(rounds)
    for r in range(rounds):
        for fn, out in ((fn_a, a), (fn_b, b)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out[r] = (time.perf_counter() - t0) / inner
    return a, b


def per_example_loop(model: torch.nn.Module, layers: list[str], x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """The straightforward way: per example, one forward and one autograd call per probe layer."""
    modules = dict(model.named_modules())
    out = np.empty((len(layers), len(y)))
    for n in range(len(y)):
        store: dict[str, torch.Tensor] = {}
        hooks = [modules[name].register_forward_hook(lambda _m, _i, o, name=name: store.__setitem__(name, o))
                 for name in layers]
        logits = model(x[n:n + 1].clone().requires_grad_(True))
        for h in hooks:
            h.remove()
        j = int(other_class(logits.detach(), y[n:n + 1]))
        diff = logits[0, int(y[n])] - logits[0, j]
        for k, name in enumerate(layers):
            (g,) = torch.autograd.grad(diff, store[name], retain_graph=True)
            out[k, n] = float(diff.detach()) / float(g.norm())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--epochs", type=int, default=60)
    args = ap.parse_args()
    model, x, y = trained_model(args.epochs)
    layers = model.probe_layers()

    bs = batch_size(x)

    def batches():
        return ((x[i:i + bs], y[i:i + bs]) for i in range(0, len(y), bs))

    def forward():
        with torch.no_grad():
            for xb, _ in batches():
                model(xb)

    margin_pass = lambda: compute_margins(model, layers, batches())  # noqa: E731
    settings = {"system malloc": paired_timings(forward, margin_pass, args.rounds)}
    if keep_freed_memory():
        settings["genbench CLI malloc (freed memory kept)"] = paired_timings(forward, margin_pass, args.rounds)
    fast = compute_margins(model, layers, batches())
    t0 = time.perf_counter()
    slow = per_example_loop(model, layers, x, y)
    t_loop = time.perf_counter() - t0
    # float32 logits summed in a batch vs one example differ by ~1e-6, which moves the distance of a point
    # that sits almost on the boundary by more than 1e-3 of itself: judge against the typical distance too
    scale = float(np.median(np.abs(slow)))
    agree = np.allclose(fast.distance, slow, rtol=1e-3, atol=1e-5 * scale)
    worst = float(np.max(np.abs(fast.distance - slow))) / scale
    print(f"model: mlp width 128, batchnorm, {len(layers)} probe layers {layers}; {len(y)} training examples, "
          f"torch threads {torch.get_num_threads()}")
    for name, (fwd_s, margin_s) in settings.items():
        ratios = margin_s / fwd_s
        print(f"{name}: medians of {args.rounds} rounds of 20 calls, forward and margin pass timed alternately")
        print(f"  forward pass (no grad)      {np.median(fwd_s) * 1e3:8.1f} ms")
        print(f"  margin pass (all layers)    {np.median(margin_s) * 1e3:8.1f} ms")
        print(f"  margins / forward = {np.median(ratios):.2f}x, median of the per-round ratios "
              f"(range {ratios.min():.2f}-{ratios.max():.2f}; target <= 3.5x)")
    t_margin = float(np.median(list(settings.values())[-1][1]))  # the margin pass as the genbench command runs it
    print(f"per-example autograd loop   {t_loop * 1e3:8.1f} ms   (once)")
    print(f"loop / margins    = {t_loop / t_margin:.1f}x (target >= 30x); same distances: {agree} "
          f"(largest difference {worst:.1e} of the median distance)")


if __name__ == "__main__":
    main()
