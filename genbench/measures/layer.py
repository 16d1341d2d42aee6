"""Layer utilization and layer contribution (Wang & Yang 2022, "With Greater Distance Comes Worse
Performance", definitions 5 and 6): how far each weight layer moved from its init, and how much the
training loss rises when that layer alone is rolled back to its init."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from ..errors import GenbenchError
from ..models.registry import relative_depths
from .context import MeasureContext
from .registry import register_measure
from .weights import Layer, weight_layers

WANG_YANG = "Wang & Yang 2022 (With Greater Distance Comes Worse Performance: layer utilization)"
CONTRIBUTION_SAMPLES = 4096  # the whole training set of the 1-D zoos (4000 points); a fixed subsample beyond
FIXED_DEPTHS = 2  # the version of the signatures read at fixed relative depths (version 1: every weight layer, a
# signature as long as the network's depth + 1, so a zoo of several depths could not be regressed)


def layer_pairs(ctx: MeasureContext) -> list[tuple[Layer, Layer]]:
    """(trained, init) weight layers in forward order, raw parameters (BatchNorm not folded)."""
    trained = weight_layers(ctx.model, fold=False)
    init = weight_layers(ctx.init_model, fold=False)
    if [t.name for t in trained] != [i.name for i in init]:
        raise GenbenchError("the init model's weight layers do not match the trained model's")
    return list(zip(trained, init))


def at_fixed_depths(n: int) -> list[int]:
    """Indices of the weight layers a signature reads: the body's layers nearest relative depths 1/3, 2/3 and 1,
    then the classifier (a body of fewer than 3 layers repeats one), so every network of a zoo gives 4 values."""
    if n < 2:
        raise GenbenchError(f"layer signatures need a hidden weight layer and a classifier; the model has {n} "
                            "weight layer(s)")
    return [*relative_depths(n - 1), n - 1]


def utilizations(ctx: MeasureContext) -> np.ndarray:
    """||W_L - W_L^0|| per weight layer: the Euclidean (Frobenius) distance of the weights, biases excluded.

    The paper (def. 6) writes ||W'_L - W^0_L||_2 and calls it "the l_2-distance between trained weights
    and its initial weights", i.e. the distance between the weights as vectors, which is the Frobenius
    norm of the difference (and for a conv kernel, of the whole kernel), not the spectral norm."""
    return np.array([float(torch.linalg.vector_norm((t.weight - i.weight).double()))
                     for t, i in layer_pairs(ctx)])


@register_measure("layer.utilization_last", needs=("init_weights",), citation=WANG_YANG, higher_means="larger_gap")
def utilization_last(ctx: MeasureContext) -> float:
    """||W_L - W_L^0||_F of the final weight layer (the classifier), the paper's predictor of overfitting."""
    # Hypothesis 2 and section 5 use "the final layer"; the signature below has every layer.
    return float(utilizations(ctx)[-1])


@register_measure("layer.utilization_all", kind="signature", needs=("init_weights",), citation=WANG_YANG,
                  version=FIXED_DEPTHS)
def utilization_all(ctx: MeasureContext) -> np.ndarray:
    """||W_l - W_l^0||_F at 4 weight layers: relative depths 1/3, 2/3, 1 of the body, and the classifier (figure 2)."""
    u = utilizations(ctx)
    return u[at_fixed_depths(len(u))]


def _param_name(module: str, param: str) -> str:
    return f"{module}.{param}" if module else param


@torch.no_grad()
def mean_loss(ctx: MeasureContext, x: torch.Tensor, y: torch.Tensor,
              params: dict[str, torch.Tensor] | None = None, batch_size: int = 1000) -> float:
    """Mean cross-entropy of the model on (x, y), with `params` swapped in by functional_call."""
    total = 0.0
    for i in range(0, len(y), batch_size):
        xb, yb = x[i:i + batch_size], y[i:i + batch_size]
        logits = ctx.model(xb) if params is None else functional_call(ctx.model, params, (xb,))
        total += float(F.cross_entropy(logits.double(), yb, reduction="sum"))
    return total / len(y)


@register_measure("layer.contribution", kind="signature", needs=("train_data", "init_weights"),
                  citation=WANG_YANG, version=FIXED_DEPTHS)
def contribution(ctx: MeasureContext) -> np.ndarray:
    """J(F'^L) - J(F') at the 4 weight layers of utilization_all: training cross-entropy rise when layer L alone is
    reset to its init."""
    x, y = ctx.subsample(CONTRIBUTION_SAMPLES)
    base = mean_loss(ctx, x, y)
    pairs = layer_pairs(ctx)
    rise = {}
    for k in at_fixed_depths(len(pairs)):
        if k in rise:
            continue
        trained, init = pairs[k]
        ctx.check_time()
        # Weight and bias of this layer only; BatchNorm statistics and every other layer stay trained.
        params = {_param_name(trained.name, "weight"): init.weight.to(x.device)}
        if init.bias is not None:
            params[_param_name(trained.name, "bias")] = init.bias.to(x.device)
        rise[k] = mean_loss(ctx, x, y, params) - base
    return np.array([rise[k] for k in at_fixed_depths(len(pairs))])
