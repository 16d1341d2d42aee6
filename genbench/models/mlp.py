"""Fully connected ReLU network for vector data, with optional batchnorm and dropout per hidden layer."""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .registry import evenly_spaced, register_family


@register_family("mlp")
class MLP(nn.Module):
    """input -> depth x [Linear, BatchNorm?, ReLU, Dropout?] -> Linear; probes are pre-ReLU (post-BN)."""

    per_model_settings = ("dropout",)  # stacked training takes a dropout rate per model

    def __init__(self, *, in_shape: Sequence[int], num_classes: int, width: int = 128, depth: int = 3,
                 batchnorm: bool = False, dropout: float = 0.0):
        super().__init__()
        self.config = dict(in_shape=list(in_shape), num_classes=int(num_classes), width=int(width),
                           depth=int(depth), batchnorm=bool(batchnorm), dropout=float(dropout))
        self.input = nn.Flatten()
        blocks, d = [], math.prod(in_shape)
        for _ in range(depth):
            parts = OrderedDict(fc=nn.Linear(d, width))
            if batchnorm:
                parts["bn"] = nn.BatchNorm1d(width)
            parts["act"] = nn.ReLU()
            if dropout > 0:
                parts["drop"] = nn.Dropout(dropout)
            blocks.append(nn.Sequential(parts))
            d = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(d, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.input(x)))

    def probe_layers(self) -> list[str]:
        last = "bn" if self.config["batchnorm"] else "fc"
        hidden = [f"blocks.{i}.{last}" for i in range(self.config["depth"])]
        return ["input", *evenly_spaced(hidden)]

    def stacked_forward(self, archs: list[dict], device: str) -> Callable[..., torch.Tensor]:
        """forward(params, buffers, x (M, B, ...), train) -> logits (M, B, classes) of M stacked MLPs of this
        shape, model i with the dropout rate of archs[i]."""
        rates = torch.tensor([float(a.get("dropout", 0.0)) for a in archs], device=device)
        codes = dropout_codes((1 - rates).view(-1, 1, 1)) if bool((rates > 0).any()) else None
        cfg = self.config
        return lambda p, b, x, train: stacked_mlp_forward(p, b, x, depth=cfg["depth"], batchnorm=cfg["batchnorm"],
                                                          dropout=codes, train=train)


def dropout_codes(keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model int16 thresholds and rescaling for dropout masks drawn as 16-bit random codes.

    A code in [-32768, 32767] keeps its unit when it is <= the threshold, so the keep probability is
    quantised to 1/65536 (0.8 -> 0.8000031) and the survivors are scaled by the inverse of that probability."""
    kept = torch.round(keep * 65536).clamp(1, 65536)
    return (kept - 32769).to(torch.int16), 65536 / kept


def dropout_mask(h: torch.Tensor, codes: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Scaled dropout mask for stacked activations `h` (models, batch, units), each model with its own rate.

    Four codes per 64-bit draw of the generator: mask generation dominated stacked training on CPU when
    each unit drew its own float."""
    n = h.numel()
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=h.device).random_(-2 ** 63, None)
    thr, scale = codes
    return (bits.view(torch.int16)[:n].view_as(h) <= thr) * scale


def stacked_mlp_forward(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor, *,
                        depth: int, batchnorm: bool, dropout: tuple[torch.Tensor, torch.Tensor] | None,
                        train: bool) -> torch.Tensor:
    """Stacked MLP forward: one baddbmm per layer, batchnorm for all models in one native call."""
    h = x.flatten(2)
    for i in range(depth):
        pre = f"blocks.{i}."
        h = torch.baddbmm(params[pre + "fc.bias"].unsqueeze(1), h, params[pre + "fc.weight"].transpose(1, 2))
        if batchnorm:
            m, b, c = h.shape
            flat = F.batch_norm(h.transpose(0, 1).reshape(b, m * c), buffers[pre + "bn.running_mean"].view(-1),
                                buffers[pre + "bn.running_var"].view(-1), params[pre + "bn.weight"].reshape(-1),
                                params[pre + "bn.bias"].reshape(-1), training=train, momentum=0.1, eps=1e-5)
            if train:
                buffers[pre + "bn.num_batches_tracked"].add_(1)
            h = flat.reshape(b, m, c).transpose(0, 1)
        h = torch.relu(h)
        if train and dropout is not None:
            h = h * dropout_mask(h, dropout)
    return torch.baddbmm(params["head.bias"].unsqueeze(1), h, params["head.weight"].transpose(1, 2))
