"""1-D convolutional network for signals of shape [L] or [C, L], with optional batchnorm and dropout."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
from torch import nn

from . import stacked
from .registry import evenly_spaced, register_family


@register_family("cnn1d")
class CNN1D(nn.Module):
    """input -> depth x [Conv1d, BatchNorm?, ReLU, Dropout?] -> mean over length -> Linear; a small CNN for 1-D data."""

    per_model_settings = ("dropout",)  # stacked training takes a dropout rate per model

    def __init__(self, *, in_shape: Sequence[int], num_classes: int, channels: int = 32, depth: int = 3,
                 kernel_size: int = 5, stride: int = 2, batchnorm: bool = False, dropout: float = 0.0):
        super().__init__()
        in_shape = [int(s) for s in in_shape]
        if len(in_shape) not in (1, 2):
            raise ValueError(f"cnn1d needs in_shape [L] or [C, L], got {in_shape}")
        self.config = dict(in_shape=in_shape, num_classes=int(num_classes), channels=int(channels),
                           depth=int(depth), kernel_size=int(kernel_size), stride=int(stride),
                           batchnorm=bool(batchnorm), dropout=float(dropout))
        self.input = nn.Unflatten(1, (1, in_shape[0])) if len(in_shape) == 1 else nn.Identity()
        blocks, c = [], 1 if len(in_shape) == 1 else in_shape[0]
        for _ in range(depth):
            parts = OrderedDict(conv=nn.Conv1d(c, channels, kernel_size, stride=stride, padding=kernel_size // 2))
            if batchnorm:
                parts["bn"] = nn.BatchNorm1d(channels)
            parts["act"] = nn.ReLU()
            if dropout > 0:
                parts["drop"] = nn.Dropout(dropout)
            blocks.append(nn.Sequential(parts))
            c = channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.input(x)).mean(dim=-1))

    def stacked_forward(self, archs: list[dict], device: str) -> Callable[..., torch.Tensor]:
        """forward(params, buffers, x (M, B, ...), train) -> logits (M, B, classes) of M stacked CNNs of this
        shape: grouped convolutions, one batchnorm call per layer, per-model dropout rates."""
        cfg, m = self.config, len(archs)
        codes = stacked.dropout_rates(archs, device)
        bn = [blk.bn for blk in self.blocks] if cfg["batchnorm"] else []

        def forward(p: stacked.Params, b: stacked.Params, x: torch.Tensor, train: bool) -> torch.Tensor:
            h = stacked.grouped(x)
            for i in range(cfg["depth"]):
                h = stacked.conv(h, p, f"blocks.{i}.conv", m, stride=cfg["stride"], padding=cfg["kernel_size"] // 2)
                if bn:
                    h = stacked.batch_norm(h, p, b, f"blocks.{i}.bn", train=train, eps=bn[i].eps,
                                           momentum=bn[i].momentum)
                h = h.relu()
                if train:
                    h = stacked.dropout(h, m, codes)
            h = stacked.per_model(h.mean(dim=-1), m)
            return torch.baddbmm(p["head.bias"].unsqueeze(1), h, p["head.weight"].transpose(1, 2))

        return forward

    def probe_layers(self) -> list[str]:
        last = "bn" if self.config["batchnorm"] else "conv"
        hidden = [f"blocks.{i}.{last}" for i in range(self.config["depth"])]
        return ["input", *evenly_spaced(hidden)]
