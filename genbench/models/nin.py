"""Network-in-Network without max-pool, the CNN of DEMOGEN (Jiang et al. 2019, appendix A.1), on images [C, H, W]
or transplanted to 1-D signals [L] or [C, L] (kernels 3 and 1 along the length, the same blocks)."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
from torch import nn

from . import stacked
from .stacked_signals import Conv, Drop, Head, Norm, Relu, StackedSignals
from .registry import evenly_spaced, register_family

_NUM_BLOCKS = 3


@register_family("nin")
class NiN(nn.Module):
    """input -> 3 x [conv3x3/2, conv1x1, conv1x1 (each +BN?, ReLU), Dropout? after blocks 1-2] -> conv to classes;
    DEMOGEN's CNN (1-D convolutions for a signal)."""

    per_model_settings = ("dropout",)  # stacked training takes a dropout rate per model

    def __init__(self, *, in_shape: Sequence[int], num_classes: int, width: float = 1.0, base_channels: int = 192,
                 batchnorm: bool = False, dropout: float = 0.0):
        super().__init__()
        in_shape = [int(s) for s in in_shape]
        if len(in_shape) not in (1, 2, 3):
            raise ValueError(f"nin needs in_shape [C, H, W] (images) or [L] / [C, L] (signals), got {in_shape}")
        self.config = dict(in_shape=in_shape, num_classes=int(num_classes), width=float(width),
                           base_channels=int(base_channels), batchnorm=bool(batchnorm), dropout=float(dropout))
        channels = int(base_channels * width)
        conv, norm = (nn.Conv2d, nn.BatchNorm2d) if len(in_shape) == 3 else (nn.Conv1d, nn.BatchNorm1d)
        self.input = nn.Unflatten(1, (1, in_shape[0])) if len(in_shape) == 1 else nn.Identity()
        blocks, c = [], 1 if len(in_shape) == 1 else in_shape[0]
        size = in_shape[-2:] if len(in_shape) == 3 else in_shape[-1:]  # the spatial extent, halved per block
        for b in range(_NUM_BLOCKS):
            parts = OrderedDict()
            for j, (k, s) in enumerate([(3, 2), (1, 1), (1, 1)], start=1):
                parts[f"conv{j}"] = conv(c, channels, k, stride=s, padding=k // 2)
                if batchnorm:
                    parts[f"bn{j}"] = norm(channels, eps=1e-3)
                parts[f"relu{j}"] = nn.ReLU()
                c = channels
            if dropout > 0 and b < _NUM_BLOCKS - 1:
                parts["drop"] = nn.Dropout(dropout)
            blocks.append(nn.Sequential(parts))
            size = [(n - 1) // 2 + 1 for n in size]
        self.blocks = nn.Sequential(*blocks)
        self.head = conv(c, num_classes, tuple(size))
        for module in self.blocks.modules():  # He init: ten layers without batchnorm keep their signal
            if isinstance(module, (nn.Conv1d, nn.Conv2d)):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
                nn.init.zeros_(module.bias)
        self.flatten = nn.Flatten()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.flatten(self.head(self.blocks(self.input(x))))

    def stacked_forward(self, archs: list[dict], device: str) -> Callable[..., torch.Tensor]:
        """forward(params, buffers, x (M, B, C, H, W) or (M, B, [C,] L), train) -> logits (M, B, classes) of M
        stacked NiNs of this shape, per-model dropout rates: grouped convolutions and one batchnorm call per layer
        for images, channels last for signals (models/stacked_signals.py)."""
        if len(self.config["in_shape"]) < 3:
            return self._signal_net(archs, device).forward
        m, bn = len(archs), self.config["batchnorm"]
        eps, momentum = (self.blocks[0].bn1.eps, self.blocks[0].bn1.momentum) if bn else (0.0, 0.0)
        codes = stacked.dropout_rates(archs, device)

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

    def _signal_net(self, archs: list[dict], device: str) -> StackedSignals:
        """M stacked 1-D NiNs of this shape, channels last (models/stacked_signals.py)."""
        bn = self.blocks[0].bn1 if self.config["batchnorm"] else None
        layers: list = []
        for i in range(_NUM_BLOCKS):
            for j, (k, s) in enumerate([(3, 2), (1, 1), (1, 1)], start=1):
                layers.append(Conv(f"blocks.{i}.conv{j}", k, s, k // 2))
                if bn is not None:
                    layers.append(Norm(f"blocks.{i}.bn{j}", bn.eps, bn.momentum))
                layers.append(Relu())
            if i < _NUM_BLOCKS - 1:
                layers.append(Drop())
        layers.append(Head("head", "flatten"))
        return StackedSignals(layers, stacked.dropout_rates(archs, device, layout=(-1, 1, 1)))

    def stacked_gradient(self, archs: list[dict], device: str) -> StackedSignals | None:
        """gradient(params, buffers, x (M, B, [C,] L), y (M, B), grads): the training loss's gradient of M
        stacked 1-D NiNs by hand (batchnorm's running statistics updated); None for images (autograd)."""
        return self._signal_net(archs, device) if len(self.config["in_shape"]) < 3 else None

    def probe_layers(self) -> list[str]:
        last = "bn3" if self.config["batchnorm"] else "conv3"
        hidden = [f"blocks.{i}.{last}" for i in range(_NUM_BLOCKS)]
        return ["input", *evenly_spaced(hidden)]
