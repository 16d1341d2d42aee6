"""Fully connected ReLU network for vector data, with optional batchnorm and dropout per hidden layer."""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

from .registry import evenly_spaced, register_family


@register_family("mlp")
class MLP(nn.Module):
    """input -> depth x [Linear, BatchNorm?, ReLU, Dropout?] -> Linear; probes are pre-ReLU (post-BN)."""

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
