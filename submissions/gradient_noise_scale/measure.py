"""Gradient noise scale at the trained weights: how large the per-example gradients of the training loss
are compared with their mean, B = tr(Sigma) / |G|^2 (the "simple noise scale" of McCandlish et al. 2018,
used here as a generalization measure). A network that fits its training points by memorising them one
at a time is left with per-example gradients that point in many directions and nearly cancel, so B is
large; a network that fits a shared rule has gradients that agree, so B is small."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

import genbench as gb

N_POINTS = 512  # a fixed subsample of the training set (the same points for every measure on a model)
CHUNK = 128  # per-example gradients computed this many at a time


def per_example_gradients(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The gradient of the cross-entropy of each example w.r.t. all parameters, one row per example."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return torch.cat([v.reshape(len(x), -1) for v in g.values()], dim=1)


@gb.register_measure("gradnoise.noise_scale_log", kind="scalar", needs=("train_data",),
                     citation="after McCandlish et al. 2018 (simple noise scale)", version=1,
                     higher_means="larger_gap", transform="log")
def noise_scale(ctx: gb.MeasureContext) -> float:
    """tr(Sigma) / |G|^2 of the per-example training-loss gradients on a fixed subsample of 512 points."""
    x, y = ctx.subsample(N_POINTS)
    total = None
    sq_norms = torch.zeros((), dtype=torch.float64)
    for i in range(0, len(y), CHUNK):
        g = per_example_gradients(ctx.model, x[i:i + CHUNK], y[i:i + CHUNK]).double()
        total = g.sum(0) if total is None else total + g.sum(0)
        sq_norms = sq_norms + (g * g).sum().cpu()
        ctx.check_time()
    n = len(y)
    mean = total / n
    mean_sq = float((mean * mean).sum())
    trace_cov = float(sq_norms) / n - mean_sq  # mean |g_i - G|^2
    return (trace_cov + 1e-30) / (mean_sq + 1e-30)
