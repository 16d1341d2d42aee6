"""Trial, not shipped: what a compiler's fusion of the 1-D NiN's batchnorm would give its stacked training step.

The stacked step (models/stacked_signals.py) spends about a third of its time in the batchnorm's forward and
backward, each a chain of whole-activation passes (mean, centre, square, mean, scale; sums and two multiply-adds back).
This replaces `norm` and `norm_backward` by torch.compile'd versions of the same formulas (inductor fuses each chain
into one or two loops) and times the step both ways in alternating rounds, as train_anatomy.py does. A fused loop sums
in another order, so the step's gradient changes in the last bits (printed): the checkpoints would change, which is
why this stays a trial. Usage: python benchmarks/fused_norm.py [--base-channels 24] [--models 16] [--rounds 9]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import genbench.models.stacked_signals as S
import genbench.zoo.train as T
from genbench.harness.malloc import keep_freed_memory

from train_zoo import workload


def _forward_math(h2: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float):
    mean = h2.mean(1)
    centred = h2 - mean.unsqueeze(1)
    var = torch.mul(centred, centred).mean(1)
    rstd = (var + eps).rsqrt()
    a = gamma * rstd
    return torch.addcmul(beta.unsqueeze(1), centred, a.unsqueeze(1)), centred, rstd, a, mean, var


def _backward_math(g2: torch.Tensor, centred: torch.Tensor, rstd: torch.Tensor, a: torch.Tensor):
    n = g2.shape[1]
    sum_g = g2.sum(1)
    dgamma = torch.mul(g2, centred).sum(1) * rstd
    k1 = a * rstd * dgamma / -n
    k0 = a * sum_g / -n
    return torch.addcmul(k0.unsqueeze(1), g2, a.unsqueeze(1)).addcmul_(centred, k1.unsqueeze(1)), dgamma, sum_g


def fused() -> tuple:
    """norm and norm_backward with their whole-activation math compiled (running statistics updated as before)."""
    fwd, bwd = torch.compile(_forward_math, dynamic=False), torch.compile(_backward_math, dynamic=False)

    def norm(h, p, buffers, layer, train, reuse=False):
        if not train:
            return original[0](h, p, buffers, layer, train, reuse)
        m, b, length, c = h.shape
        n = b * length
        out, centred, rstd, a, mean, var = fwd(h.reshape(m, -1, c), p[layer.name + ".weight"], p[layer.name + ".bias"],
                                               layer.eps)
        with torch.no_grad():
            buffers[layer.name + ".running_mean"].mul_(1 - layer.momentum).add_(mean, alpha=layer.momentum)
            buffers[layer.name + ".running_var"].mul_(1 - layer.momentum).add_(var * (n / max(n - 1, 1)),
                                                                                alpha=layer.momentum)
            buffers[layer.name + ".num_batches_tracked"].add_(1)
        return out.view(m, b, length, c), (centred, rstd, a)

    def norm_backward(g, saved, layer, grads):
        centred, rstd, a = saved
        dx, dgamma, sum_g = bwd(g.reshape(centred.shape), centred, rstd, a)
        grads[layer.name + ".weight"].copy_(dgamma)
        grads[layer.name + ".bias"].copy_(sum_g)
        return dx.view(g.shape)

    return norm, norm_backward


original = (S.norm, S.norm_backward)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-channels", type=int, default=24)
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_flush_denormal(True)
    keep_freed_memory()
    specs, pool, what = workload("nin", 1, args.models, args.base_channels, "mnist1d")
    models = [T.init_model(s, pool) for s in specs]
    stack = T.Stack(specs, models, "cpu")
    rows = torch.randint(0, len(pool.y_train), (len(specs), T._Batches(specs[0], pool).bs),
                         generator=torch.Generator().manual_seed(0))
    x, y = pool.x_train[rows], pool.y_train[rows]
    variants = {"shipped": original, "fused": fused()}

    def gradient(name: str) -> torch.Tensor:
        """The step's gradient, from the same weights, batch and dropout masks, as one flat tensor."""
        S.norm, S.norm_backward = variants[name]
        grads = {k: torch.empty_like(v) for k, v in stack.params.items()}
        torch.manual_seed(0)
        stack.gradient(stack.params, {k: v.clone() for k, v in stack.buffers.items()}, x, y, grads)
        return torch.cat([g.flatten(1) for g in grads.values()], 1)

    start = time.perf_counter()
    diff = gradient("fused") - gradient("shipped")
    compile_s = time.perf_counter() - start
    ref = gradient("shipped")
    ms: dict[str, list[float]] = {k: [] for k in variants}
    m = len(specs)
    for r in range(args.rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            S.norm, S.norm_backward = variants[name]
            stack.step(x, y, 1.0)
            begin = time.perf_counter()
            for _ in range(4):
                stack.step(x, y, 1.0)
            ms[name].append((time.perf_counter() - begin) / 4 / m * 1e3)
    S.norm, S.norm_backward = original
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"{m} {what}, one training step, {torch.get_num_threads()} threads, medians of {args.rounds} rounds, per model:")
    print(f"  shipped step: {med['shipped']:.3f} ms; batchnorm compiled: {med['fused']:.3f} ms "
          f"({med['shipped'] / med['fused']:.2f}x; compilation and the first steps {compile_s:.0f} s)")
    print(f"  the first step's gradient: {int((diff != 0).sum())} of {diff.numel()} numbers differ, "
          f"|difference| / |gradient| = {float(diff.norm() / ref.norm()):.1e}: every checkpoint would change")


if __name__ == "__main__":
    main()
