"""Pre-activation ResNet v2 (ResNet-32 by default) with batch or group norm, as in the DEMOGEN code."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from . import stacked
from .registry import evenly_spaced, register_family

_NORMS = ("batch", "group")


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels, eps=1e-5)
    return nn.GroupNorm(min(32, channels), channels, eps=1e-6)


class BasicBlockV2(nn.Module):
    """norm, ReLU, conv3x3, norm, ReLU, conv3x3, plus a (projected) shortcut: the pre-activation residual block."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, project: bool):
        super().__init__()
        self.norm1 = _norm(norm, c_in)
        self.act1 = nn.ReLU()
        self.shortcut = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False) if project else None
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm2 = _norm(norm, c_out)
        self.act2 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act1(self.norm1(x))
        shortcut = x if self.shortcut is None else self.shortcut(out)
        out = self.conv2(self.act2(self.norm2(self.conv1(out))))
        return out + shortcut


@register_family("resnet32v2")
class ResNet32V2(nn.Module):
    """input -> conv3x3 -> 3 stages of pre-activation blocks (strides 1,2,2; the first block of each stage has a 1x1
    projection shortcut, as in the DEMOGEN code) -> norm, ReLU, mean -> Linear; DEMOGEN's ResNet-32."""

    def __init__(self, *, in_shape: Sequence[int], num_classes: int, width: int = 1, norm: str = "batch",
                 blocks_per_stage: int = 5, base_channels: int = 16):
        super().__init__()
        in_shape = [int(s) for s in in_shape]
        if len(in_shape) != 3:
            raise ValueError(f"resnet32v2 needs in_shape [C, H, W], got {in_shape}")
        if norm not in _NORMS:
            raise ValueError(f"resnet32v2 norm must be one of {', '.join(map(repr, _NORMS))}; got {norm!r}")
        self.config = dict(in_shape=in_shape, num_classes=int(num_classes), width=int(width), norm=str(norm),
                           blocks_per_stage=int(blocks_per_stage), base_channels=int(base_channels))
        c = int(base_channels) * int(width)
        self.input = nn.Identity()
        self.stem = nn.Conv2d(in_shape[0], c, 3, stride=1, padding=1, bias=False)
        c_in = c
        for i, stride in enumerate([1, 2, 2]):
            c_out = c * 2 ** i
            blocks = [BasicBlockV2(c_in if j == 0 else c_out, c_out, stride if j == 0 else 1, norm, project=j == 0)
                      for j in range(blocks_per_stage)]
            self.add_module(f"stage{i + 1}", nn.Sequential(*blocks))
            c_in = c_out
        self.final_norm = _norm(norm, c_in)
        self.final_act = nn.ReLU()
        self.head = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage3(self.stage2(self.stage1(self.stem(self.input(x)))))
        return self.head(self.final_act(self.final_norm(x)).mean(dim=(2, 3)))

    def stacked_forward(self, archs: list[dict], device: str) -> Callable[..., torch.Tensor]:
        """forward(params, buffers, x (M, B, C, H, W), train) -> logits (M, B, classes) of M stacked ResNets of this
        shape: grouped convolutions, one batch or group norm call per layer."""
        cfg, m = self.config, len(archs)
        norms = {n: mod for n, mod in self.named_modules() if isinstance(mod, (nn.BatchNorm2d, nn.GroupNorm))}

        def norm(h: torch.Tensor, p: stacked.Params, b: stacked.Params, name: str, train: bool) -> torch.Tensor:
            mod = norms[name]
            if isinstance(mod, nn.GroupNorm):
                return stacked.group_norm(h, p, name, m, groups=mod.num_groups, eps=mod.eps)
            return stacked.batch_norm(h, p, b, name, train=train, eps=mod.eps, momentum=mod.momentum)

        def forward(p: stacked.Params, b: stacked.Params, x: torch.Tensor, train: bool) -> torch.Tensor:
            h = stacked.conv(stacked.grouped(x), p, "stem", m, stride=1, padding=1)
            for i, stride in enumerate([1, 2, 2]):
                for j in range(cfg["blocks_per_stage"]):
                    pre, s = f"stage{i + 1}.{j}.", stride if j == 0 else 1
                    out = norm(h, p, b, pre + "norm1", train).relu()
                    shortcut = stacked.conv(out, p, pre + "shortcut", m, stride=s, padding=0) if j == 0 else h
                    out = stacked.conv(out, p, pre + "conv1", m, stride=s, padding=1)
                    out = stacked.conv(norm(out, p, b, pre + "norm2", train).relu(), p, pre + "conv2", m, stride=1,
                                       padding=1)
                    h = out + shortcut
            h = stacked.per_model(norm(h, p, b, "final_norm", train).relu().mean(dim=(2, 3)), m)
            return torch.baddbmm(p["head.bias"].unsqueeze(1), h, p["head.weight"].transpose(1, 2))

        return forward

    def probe_layers(self) -> list[str]:
        return ["input", *evenly_spaced(["stage1", "stage2", "stage3"])]
