"""Cost of the margin signature (all probe layers, one forward + one backward per batch) relative to a
plain forward pass over the same data, and speed-up over a per-example autograd loop.

Trains one mnist1d-demogen model (width 128, batchnorm, dropout 0.2: 60 epochs, a few seconds), then on
its 4000 training examples times: a no-grad forward pass in the margin pass's batches; the margin pass
(`compute_margins`: distances at every probe layer plus the total variation); and a loop that runs
forward and one autograd call per probe layer for each example. Prints both ratios (targets: <= 3.5x
the forward pass, >= 30x faster than the loop). Usage: python benchmarks/margins.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

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


def best_of(fn, repeats: int, inner: int = 20) -> float:
    """Seconds per call: the best of `repeats` timings of `inner` back-to-back calls (the machine is noisy)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return min(times)


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
    ap.add_argument("--repeats", type=int, default=5)
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
    t_fwd, t_margin = best_of(forward, args.repeats), best_of(margin_pass, args.repeats)
    t_fwd, t_margin = min(t_fwd, best_of(forward, args.repeats)), min(t_margin, best_of(margin_pass, args.repeats))
    fast = compute_margins(model, layers, batches())
    t0 = time.perf_counter()
    slow = per_example_loop(model, layers, x, y)
    t_loop = time.perf_counter() - t0
    agree = np.allclose(fast.distance, slow, rtol=1e-3, atol=1e-9)
    print(f"model: mlp width 128, batchnorm, {len(layers)} probe layers {layers}; {len(y)} training examples, "
          f"torch threads {torch.get_num_threads()}")
    print(f"forward pass (no grad)      {t_fwd * 1e3:8.1f} ms   (best of {2 * args.repeats} x 20 calls)")
    print(f"margin pass (all layers)    {t_margin * 1e3:8.1f} ms   (best of {2 * args.repeats} x 20 calls)")
    print(f"per-example autograd loop   {t_loop * 1e3:8.1f} ms   (once)")
    print(f"margins / forward = {t_margin / t_fwd:.2f}x (target <= 3.5x)")
    print(f"loop / margins    = {t_loop / t_margin:.1f}x (target >= 30x); same distances: {agree}")


if __name__ == "__main__":
    main()
