"""Stacked forward passes of convolutional families: the M models of a shape group as one network whose
convolutions are grouped (groups=M, channels stacked model by model), whose batchnorms hold M x C channels, and
whose dropout masks are drawn per model with each model's rate. Activations live as (batch, M * channels, ...);
parameters come with a leading model axis, as the stacked trainer holds them (genbench/zoo/train.py).

The NiN on 1-D signals trains another way, channels last with a hand-written backward (models/stacked_signals.py):
oneDNN's grouped convolutions and its batchnorm over short signals are slow on the CPU."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .mlp import dropout_codes, dropout_mask

Params = dict[str, torch.Tensor]


def grouped(x: torch.Tensor) -> torch.Tensor:
    """Inputs (M, B, C, ...) or (M, B, L) as one batch of M * C channels: (B, M * C, ...)."""
    m, b = x.shape[:2]
    if x.dim() == 3:  # (M, B, L): one channel per model
        return x.transpose(0, 1)
    return x.transpose(0, 1).reshape(b, m * x.shape[2], *x.shape[3:])


def conv(h: torch.Tensor, p: Params, name: str, m: int, *, stride: int, padding: int) -> torch.Tensor:
    """The models' convolution `name` (weights (M, Cout, Cin, k...)) on grouped activations, in one call."""
    w, bias = p[name + ".weight"], p.get(name + ".bias")
    fn = F.conv1d if w.dim() == 4 else F.conv2d
    return fn(h, w.reshape(-1, *w.shape[2:]), None if bias is None else bias.reshape(-1), stride=stride,
              padding=padding, groups=m)


def batch_norm(h: torch.Tensor, p: Params, buffers: Params, name: str, *, train: bool, eps: float,
               momentum: float) -> torch.Tensor:
    """The models' batchnorm `name` over grouped activations: each model's channels with their own statistics,
    the running ones updated in place in train mode (as nn.BatchNorm does, num_batches_tracked included)."""
    out = F.batch_norm(h, buffers[name + ".running_mean"].view(-1), buffers[name + ".running_var"].view(-1),
                       p[name + ".weight"].reshape(-1), p[name + ".bias"].reshape(-1), training=train,
                       momentum=momentum, eps=eps)
    if train:
        buffers[name + ".num_batches_tracked"].add_(1)
    return out


def group_norm(h: torch.Tensor, p: Params, name: str, m: int, *, groups: int, eps: float) -> torch.Tensor:
    """The models' group norm `name` over grouped activations: each model's channels split into its own `groups`
    (channels are stacked model by model, so M * groups contiguous groups are exactly the models' groups)."""
    return F.group_norm(h, m * groups, p[name + ".weight"].reshape(-1), p[name + ".bias"].reshape(-1), eps=eps)


def dropout_rates(archs: list[dict], device: str, layout: tuple[int, ...] = (1, -1, 1)
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The dropout codes of M models laid out as (batch, M, units) (`layout` (-1, 1, 1): (M, batch, units)), or
    None when no model drops anything."""
    rates = torch.tensor([float(a.get("dropout", 0.0)) for a in archs], device=device)
    return dropout_codes((1 - rates).view(*layout)) if bool((rates > 0).any()) else None


def dropout(h: torch.Tensor, m: int, codes: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """Grouped activations with each model's units dropped at its own rate (and the survivors rescaled)."""
    if codes is None:
        return h
    view = h.reshape(h.shape[0], m, -1)
    return (view * dropout_mask(view, codes)).view_as(h)


def per_model(h: torch.Tensor, m: int) -> torch.Tensor:
    """Grouped (B, M * K) outputs as (M, B, K), the trainer's layout of logits."""
    return h.reshape(h.shape[0], m, -1).transpose(0, 1)
