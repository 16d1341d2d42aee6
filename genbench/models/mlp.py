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
        codes = _stacked_dropout_codes(archs, device)
        cfg = self.config
        return lambda p, b, x, train: stacked_mlp_forward(p, b, x, depth=cfg["depth"], batchnorm=cfg["batchnorm"],
                                                          dropout=codes, train=train)

    def stacked_gradient(self, archs: list[dict], device: str) -> StackedMLPGradient | None:
        """gradient(params, buffers, x (M, B, ...), y (M, B), grads) writes the gradient of the stacked training loss
        (cross-entropy summed over the batch / batch size) into `grads`, bit for bit what autograd gives
        through stacked_forward; None with batchnorm (trained through autograd)."""
        if self.config["batchnorm"]:
            return None
        return StackedMLPGradient(self.config["depth"], _stacked_dropout_codes(archs, device))


def _stacked_dropout_codes(archs: list[dict], device: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    rates = torch.tensor([float(a.get("dropout", 0.0)) for a in archs], device=device)
    return dropout_codes((1 - rates).view(-1, 1, 1)) if bool((rates > 0).any()) else None


def dropout_codes(keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model int16 thresholds and rescaling for dropout masks drawn as 16-bit random codes.

    A code in [-32768, 32767] keeps its unit when it is <= the threshold, so the keep probability is
    quantised to 1/65536 (0.8 -> 0.8000031) and the survivors are scaled by the inverse of that probability."""
    kept = torch.round(keep * 65536).clamp(1, 65536)
    return (kept - 32769).to(torch.int16), 65536 / kept


def dropout_mask(h: torch.Tensor, codes: tuple[torch.Tensor, torch.Tensor], *, bits: torch.Tensor | None = None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Scaled dropout mask for stacked activations `h` (models, batch, units), each model with its own rate.

    Four codes per 64-bit draw of the generator: mask generation dominated stacked training on CPU when
    each unit drew its own float. A unit is kept when code <= threshold, i.e. when threshold + 1 - code >= 1:
    that difference of two integers is exact in float32, so clamping it to [0, 1] gives exactly the 0/1 of
    the comparison, in float arithmetic throughout (bool * float is a slow mixed-type loop on the CPU, ~3x
    the time of these two passes). `bits` and `out`: buffers to reuse for the codes and the mask."""
    n = h.numel()
    if bits is None:
        bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=h.device)
    bits.random_(-2 ** 63, None)
    thr, scale = codes
    keep = torch.sub(thr.to(scale.dtype) + 1, bits.view(torch.int16)[:n].view_as(h), out=out).clamp_(0, 1)
    return keep.mul_(scale)


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
            h = flat.relu_().reshape(b, m, c).transpose(0, 1)  # in place: batch_norm's backward needs its input
        else:
            h = h.relu_()  # in place: baddbmm's backward needs its inputs, not its output
        if train and dropout is not None:
            h = h * dropout_mask(h, dropout)
    return torch.baddbmm(params["head.bias"].unsqueeze(1), h, params["head.weight"].transpose(1, 2))


class StackedMLPGradient:
    """The training-loss gradient of stacked MLPs without batchnorm, by hand: the forward pass of
    stacked_mlp_forward (train mode) and the ATen ops autograd runs backwards through it (the same ops on
    the same operands, so the same numbers bit for bit), written into buffers kept from step to step.

    Autograd allocates some 30 activation-sized tensors per step; glibc's default malloc hands such blocks
    back to the OS and page-faults them in again at the next step, and the graph costs its own overhead:
    together about a quarter of a training step of 16 width-64 MLPs on 2 CPU cores."""

    def __init__(self, depth: int, dropout: tuple[torch.Tensor, torch.Tensor] | None):
        self.depth, self.dropout = depth, dropout
        self._buffers: dict[str, torch.Tensor] = {}

    def _buffer(self, name: str, shape: Sequence[int], like: torch.Tensor, dtype: torch.dtype | None = None
                ) -> torch.Tensor:
        dtype = dtype or like.dtype
        buf = self._buffers.get(name)
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dtype or buf.device != like.device:
            buf = self._buffers[name] = torch.empty(tuple(shape), dtype=dtype, device=like.device)
        return buf

    @torch.no_grad()
    def __call__(self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor,
                 y: torch.Tensor, grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m, b = y.shape
        h = x.flatten(2)
        inputs, acts, masks = [], [], []
        for i in range(self.depth):
            pre = f"blocks.{i}."
            w = params[pre + "fc.weight"]
            a = torch.baddbmm(params[pre + "fc.bias"].unsqueeze(1), h, w.transpose(1, 2),
                              out=self._buffer(f"act{i}", (m, b, w.shape[1]), h)).relu_()
            inputs.append(h)
            acts.append(a)
            if self.dropout is not None:
                bits = self._buffer(f"bits{i}", ((a.numel() + 3) // 4,), a, torch.int64)
                masks.append(dropout_mask(a, self.dropout, bits=bits, out=self._buffer(f"mask{i}", a.shape, a)))
                h = torch.mul(a, masks[-1], out=self._buffer(f"out{i}", a.shape, a))
            else:
                h = a
        w = params["head.weight"]
        logits = torch.baddbmm(params["head.bias"].unsqueeze(1), h, w.transpose(1, 2),
                               out=self._buffer("logits", (m, b, w.shape[1]), h))
        flat = logits.view(-1, logits.shape[-1])
        logp = torch._log_softmax(flat, 1, False, out=self._buffer("logp", flat.shape, flat))
        # backwards: loss = nll_loss(logp, reduction="sum") / b, then log_softmax, then the layers
        seed = torch.ones((), dtype=logp.dtype, device=logp.device) / b
        total = torch.tensor(float(y.numel()), dtype=logp.dtype, device=logp.device)
        g = torch.ops.aten.nll_loss_backward.grad_input(seed, logp, y.reshape(-1), None, 2, -100, total,
                                                        grad_input=self._buffer("dlogp", flat.shape, flat))
        g = torch.ops.aten._log_softmax_backward_data.out(g, logp, 1, flat.dtype,
                                                          out=self._buffer("dlogits", flat.shape, flat))
        g = g.view(logits.shape)
        names = [f"blocks.{i}.fc" for i in range(self.depth)] + ["head"]
        for i in reversed(range(self.depth + 1)):
            w, h = params[names[i] + ".weight"], (inputs[i] if i < self.depth else h)
            if i < self.depth:  # through dropout (grad * mask) and the in-place ReLU
                if self.dropout is not None:
                    g = torch.mul(g, masks[i], out=self._buffer(f"dout{i}", g.shape, g))
                g = torch.ops.aten.threshold_backward.grad_input(g, acts[i], 0,
                                                                 grad_input=self._buffer(f"dact{i}", g.shape, g))
            # baddbmm(bias, h, w^T): d/dh = g @ w, d/dw^T = h^T @ g, d/dbias = g summed over the batch
            dw = torch.bmm(h.transpose(1, 2), g, out=self._buffer(f"dw{i}", (m, w.shape[2], w.shape[1]), g))
            grads[names[i] + ".weight"].copy_(dw.transpose(1, 2))
            grads[names[i] + ".bias"].copy_(g.sum(1, keepdim=True).squeeze(1))
            if i > 0:
                g = torch.bmm(g, w, out=self._buffer(f"dh{i}", h.shape, g))
        return grads
