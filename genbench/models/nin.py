"""Network-in-Network without max-pool, the CNN of DEMOGEN (Jiang et al. 2019, appendix A.1)."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
from torch import nn

from . import stacked
from .registry import evenly_spaced, register_family

_NUM_BLOCKS = 3


@register_family("nin")
class NiN(nn.Module):
    """input -> 3 x [conv3x3/2, conv1x1, conv1x1 (each +BN?, ReLU), Dropout? after blocks 1-2] -> conv to classes; DEMOGEN's CNN."""

    per_model_settings = ("dropout",)  # stacked training takes a dropout rate per model

    def __init__(self, *, in_shape: Sequence[int], num_classes: int, width: float = 1.0, base_channels: int = 192,
                 batchnorm: bool = False, dropout: float = 0.0):
        super().__init__()
        in_shape = [int(s) for s in in_shape]
        if len(in_shape) != 3:
            raise ValueError(f"nin needs in_shape [C, H, W], got {in_shape}")
        self.config = dict(in_shape=in_shape, num_classes=int(num_classes), width=float(width),
                           base_channels=int(base_channels), batchnorm=bool(batchnorm), dropout=float(dropout))
        channels = int(base_channels * width)
        self.input = nn.Identity()
        blocks, c, (h, w) = [], in_shape[0], in_shape[1:]
        for b in range(_NUM_BLOCKS):
            parts = OrderedDict()
            for j, (k, s) in enumerate([(3, 2), (1, 1), (1, 1)], start=1):
                parts[f"conv{j}"] = nn.Conv2d(c, channels, k, stride=s, padding=k // 2)
                if batchnorm:
                    parts[f"bn{j}"] = nn.BatchNorm2d(channels, eps=1e-3)
                parts[f"relu{j}"] = nn.ReLU()
                c = channels
            if dropout > 0 and b < _NUM_BLOCKS - 1:
                parts["drop"] = nn.Dropout(dropout)
            blocks.append(nn.Sequential(parts))
            h, w = (h - 1) // 2 + 1, (w - 1) // 2 + 1
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Conv2d(c, num_classes, (h, w))
        self.flatten = nn.Flatten()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.flatten(self.head(self.blocks(self.input(x))))

    def stacked_forward(self, archs: list[dict], device: str) -> Callable[..., torch.Tensor]:
        """forward(params, buffers, x (M, B, C, H, W), train) -> logits (M, B, classes) of M stacked NiNs of this
        shape: grouped convolutions, one batchnorm call per layer, per-model dropout rates."""
        m, bn = len(archs), self.config["batchnorm"]
        codes = stacked.dropout_rates(archs, device)
        eps, momentum = (self.blocks[0].bn1.eps, self.blocks[0].bn1.momentum) if bn else (0.0, 0.0)

        def forward(p: stacked.Params, b: stacked.Params, x: torch.Tensor, train: bool) -> torch.Tensor:
            h = stacked.grouped(x)
            for i in range(_NUM_BLOCKS):
                for j, (k, s) in enumerate([(3, 2), (1, 1), (1, 1)], start=1):
                    h = stacked.conv(h, p, f"blocks.{i}.conv{j}", m, stride=s, padding=k // 2)
                    if bn:
                        h = stacked.batch_norm(h, p, b, f"blocks.{i}.bn{j}", train=train, eps=eps, momentum=momentum)
                    h = h.relu()
                if train and i < _NUM_BLOCKS - 1:
                    h = stacked.dropout(h, m, codes)
            return stacked.per_model(stacked.conv(h, p, "head", m, stride=1, padding=0).flatten(1), m)

        return forward

    def probe_layers(self) -> list[str]:
        last = "bn3" if self.config["batchnorm"] else "conv3"
        hidden = [f"blocks.{i}.{last}" for i in range(_NUM_BLOCKS)]
        return ["input", *evenly_spaced(hidden)]
