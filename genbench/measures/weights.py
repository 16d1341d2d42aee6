"""Weights as the norm-based measures see them: BatchNorm folded into the layer before it, then one
(name, weight, bias) per Linear / Conv layer in forward order. The catalogue's convention (docs/catalogue.md):
norms, counts and perturbation bounds use the weights of these layers only, never biases or BatchNorm parameters."""
from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

_LINEAR = (nn.Linear, nn.Conv1d, nn.Conv2d)
_BN = (nn.BatchNorm1d, nn.BatchNorm2d)


@dataclass(frozen=True)
class Layer:
    """One weight layer: its module name, weight (as stored: [out, in] or [out, in, *kernel]) and bias."""

    name: str
    weight: torch.Tensor
    bias: torch.Tensor | None

    @property
    def matrix(self) -> torch.Tensor:
        """The weight as an [out, in * kernel] matrix (a conv's kernel reshaped, as in Jiang et al. 2020)."""
        return self.weight.reshape(self.weight.shape[0], -1)


def _foldable(model: nn.Module) -> Iterator[tuple[nn.Sequential, str, str]]:
    """(sequential, linear name, batchnorm name) for each eval-mode BatchNorm directly after a Linear/Conv."""
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for prev, cur in zip(names, names[1:]):
            lin, bn = seq._modules[prev], seq._modules[cur]
            if isinstance(lin, _LINEAR) and isinstance(bn, _BN) and bn.track_running_stats and not bn.training:
                yield seq, prev, cur


@torch.no_grad()
def _folded_weights(lin: nn.Module, bn: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight and bias of the layer computing bn(lin(x)) in eval mode."""
    scale = (bn.weight if bn.affine else torch.ones_like(bn.running_var)) / torch.sqrt(bn.running_var + bn.eps)
    shift = bn.bias if bn.affine else torch.zeros_like(bn.running_mean)
    bias = lin.bias if lin.bias is not None else torch.zeros_like(bn.running_mean)
    return lin.weight * scale.view(-1, *([1] * (lin.weight.dim() - 1))), (bias - bn.running_mean) * scale + shift


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of `model` (eval mode) where each BatchNorm that directly follows a Linear/Conv inside an
    nn.Sequential is folded into that layer and replaced by Identity; the function is unchanged.
    BatchNorms elsewhere (e.g. pre-activation ResNet blocks) are left as they are."""
    model = copy.deepcopy(model).eval()
    for seq, prev, cur in list(_foldable(model)):
        lin = seq._modules[prev]
        weight, bias = _folded_weights(lin, seq._modules[cur])
        lin.weight, lin.bias = nn.Parameter(weight), nn.Parameter(bias)
        seq._modules[cur] = nn.Identity()
    return model


@contextmanager
def batchnorm_folded(model: nn.Module) -> Iterator[nn.Module]:
    """`model` itself (eval mode) with its BatchNorms folded as in `fold_batchnorm` until the block exits.

    No copy: the folded weights are swapped in and the originals put back on exit (a deepcopy costs more
    than the BatchNorm passes it saves when a model is used once). Module names are unchanged; a folded
    BatchNorm's name now holds an Identity whose output equals the BatchNorm's."""
    saved = []
    try:
        for seq, prev, cur in list(_foldable(model)):
            lin, bn = seq._modules[prev], seq._modules[cur]
            saved.append((seq, prev, cur, lin.weight, lin.bias, bn))
            weight, bias = _folded_weights(lin, bn)
            lin._parameters["weight"], lin._parameters["bias"] = weight, bias
            seq._modules[cur] = nn.Identity()
        yield model
    finally:
        for seq, prev, cur, weight, bias, bn in reversed(saved):
            lin = seq._modules[prev]
            lin._parameters["weight"], lin._parameters["bias"] = weight, bias
            seq._modules[cur] = bn


def weight_names(model: nn.Module) -> list[str]:
    """Parameter names of the weights of `model`'s Linear/Conv layers in registration (forward) order: the
    parameters the catalogue's weight-based measures use (biases and BatchNorm parameters excluded)."""
    return [f"{name}.weight" if name else "weight" for name, mod in model.named_modules() if isinstance(mod, _LINEAR)]


def weight_layers(model: nn.Module, *, fold: bool = True) -> list[Layer]:
    """The Linear/Conv layers of `model` in registration (forward) order, BatchNorm folded first."""
    m = fold_batchnorm(model) if fold else model
    return [Layer(name, mod.weight.detach(), None if mod.bias is None else mod.bias.detach())
            for name, mod in m.named_modules() if isinstance(mod, _LINEAR)]


@torch.no_grad()
def rescale_relu_pair(model: nn.Module, alpha: float) -> nn.Module:
    """A copy of `model` computing the same function, with the first hidden layer's pre-activations
    multiplied by `alpha` > 0 and the next weight layer divided by it (ReLU is positively homogeneous).
    The scaled layer is the BatchNorm's affine map when one follows the first Linear/Conv, else the layer."""
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    model = copy.deepcopy(model).eval()
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        mods = list(seq.children())
        if not mods or not isinstance(mods[0], _LINEAR):
            continue
        scaled = mods[1] if len(mods) > 1 and isinstance(mods[1], _BN) and mods[1].affine else mods[0]
        if not any(isinstance(m, nn.ReLU) for m in mods):
            continue
        layers = [m for m in model.modules() if isinstance(m, _LINEAR)]
        following = layers[layers.index(mods[0]) + 1:]
        if not following:
            continue
        nxt = following[0]  # the next weight layer, in this block or the next (a NiN block holds three convs)
        scaled.weight.mul_(alpha)
        if scaled.bias is not None:
            scaled.bias.mul_(alpha)
        nxt.weight.div_(alpha)
        return model
    raise ValueError(f"{type(model).__name__} has no [Linear/Conv, (BatchNorm), ReLU] block followed by "
                     "another weight layer to rescale")
