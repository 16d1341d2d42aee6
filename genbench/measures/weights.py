"""Weights as the norm-based measures see them: BatchNorm folded into the layer before it, then one
(name, weight, bias) per Linear / Conv layer in forward order."""
from __future__ import annotations

import copy
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


@torch.no_grad()
def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of `model` (eval mode) where each BatchNorm that directly follows a Linear/Conv inside an
    nn.Sequential is folded into that layer and replaced by Identity; the function is unchanged.
    BatchNorms elsewhere (e.g. pre-activation ResNet blocks) are left as they are."""
    model = copy.deepcopy(model).eval()
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for prev, cur in zip(names, names[1:]):
            lin, bn = seq._modules[prev], seq._modules[cur]
            if not (isinstance(lin, _LINEAR) and isinstance(bn, _BN)) or not bn.track_running_stats:
                continue
            scale = (bn.weight if bn.affine else torch.ones_like(bn.running_var)) / torch.sqrt(bn.running_var + bn.eps)
            shift = bn.bias if bn.affine else torch.zeros_like(bn.running_mean)
            bias = lin.bias if lin.bias is not None else torch.zeros_like(bn.running_mean)
            lin.weight.mul_(scale.view(-1, *([1] * (lin.weight.dim() - 1))))
            new_bias = (bias - bn.running_mean) * scale + shift
            if lin.bias is None:
                lin.bias = nn.Parameter(new_bias)
            else:
                lin.bias.copy_(new_bias)
            seq._modules[cur] = nn.Identity()
    return model


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
        nxt = next((m for m in following if not any(m is x for x in mods)), None)
        if nxt is None:
            continue
        scaled.weight.mul_(alpha)
        if scaled.bias is not None:
            scaled.bias.mul_(alpha)
        nxt.weight.div_(alpha)
        return model
    raise ValueError(f"{type(model).__name__} has no [Linear/Conv, (BatchNorm), ReLU] block followed by "
                     "another weight layer to rescale")
