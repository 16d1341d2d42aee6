"""Stacked 1-D convolutional networks (the NiN on signals), channels last, with a hand-written backward.

The M models of a shape group run as one network whose activations are (M, batch, length, channels): every
convolution is a few batched matrix products over the models, every batchnorm a reduction over (batch, length).
A stride-s convolution reads its input as groups of s neighbouring steps (a free view of the activation), so
kernel tap j of output l meets group l + d: one matrix product per offset d, the products of d != 0 added one
step shifted. Nothing is unfolded and nothing is permuted, which on the CPU is what autograd through unfolded
inputs and batchnorm's (rows, M * C) layout spent most of a step on. The backward pass is written by hand from
what the forward kept; a test checks it against autograd through the same forward, in float64."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .mlp import dropout_mask

Params = dict[str, torch.Tensor]
Codes = tuple[torch.Tensor, torch.Tensor] | None


@dataclass(frozen=True)
class Conv:
    """A Conv1d (weights (M, Cout, Cin, kernel)) whose output length is ceil(length / stride)."""

    name: str
    kernel: int
    stride: int = 1
    padding: int = 0


@dataclass(frozen=True)
class Norm:
    """A BatchNorm1d over each model's channels (statistics over batch and length)."""

    name: str
    eps: float
    momentum: float


@dataclass(frozen=True)
class Relu:
    """ReLU."""


@dataclass(frozen=True)
class Drop:
    """Dropout, each model at its own rate (the codes of stacked.dropout_rates laid out (M, 1, 1))."""


@dataclass(frozen=True)
class Head:
    """The classifier: `flatten` (a convolution as long as what is left, the NiN's) or `mean` (a Linear on the
    mean over the length, cnn1d's)."""

    name: str
    pool: str


Layer = Conv | Norm | Relu | Drop | Head


def _terms(conv: Conv) -> list[tuple[int, int, int, int, int]]:
    """(d, j0, j1, r0, r1) per group offset d: taps j0..j1 of the kernel meet steps r0..r1 of group l + d."""
    s, p = conv.stride, conv.padding
    out = []
    for d in range(-(p // s) - (1 if p % s else 0), (conv.kernel - 1 - p) // s + 1):
        j0, j1 = max(0, s * d + p), min(conv.kernel, s * d + p + s)
        if j0 < j1:
            out.append((d, j0, j1, j0 - s * d - p, j1 - s * d - p))
    return out


def fits(layers: Sequence[Layer], length: int) -> bool:
    """Whether every convolution maps length L to ceil(L / stride) (what the grouped reading needs)."""
    for layer in layers:
        if isinstance(layer, Conv):
            out = (length + 2 * layer.padding - layer.kernel) // layer.stride + 1
            if out != -(-length // layer.stride):
                return False
            length = out
    return True


def _shift_into(out: torch.Tensor, t: torch.Tensor, d: int) -> None:
    """out[:, :, l] += t[:, :, l + d] wherever both exist."""
    n, m = out.shape[2], t.shape[2]
    lo, hi = max(0, -d), min(n, m - d)
    if lo < hi:
        out[:, :, lo:hi] += t[:, :, lo + d:hi + d]


def _shifted(g: torch.Tensor, d: int, length: int) -> torch.Tensor:
    """gd with gd[:, :, l] = g[:, :, l - d] (zero where that is outside g), `length` steps long."""
    out = g.new_empty(g.shape[0], g.shape[1], length, g.shape[3])
    lo, hi = max(0, d), min(length, g.shape[2] + d)
    if lo < hi:
        out[:, :, lo:hi] = g[:, :, lo - d:hi - d]
    out[:, :, :lo].zero_()  # only the steps no copy reaches (a zero fill of the whole first cost twice the copy)
    out[:, :, max(lo, hi):].zero_()
    return out


def _groups(h: torch.Tensor, stride: int) -> torch.Tensor:
    """(M, B, L, C) as (M, B * ceil(L / s), s * C): each row s neighbouring steps (zero-padded at the end)."""
    m, b, length, c = h.shape
    if length % stride:
        h = torch.nn.functional.pad(h, (0, 0, 0, stride - length % stride))
    return h.reshape(m, -1, stride * c)


def conv(h: torch.Tensor, p: Params, layer: Conv) -> torch.Tensor:
    """The models' convolution on (M, B, L, Cin) -> (M, B, ceil(L / s), Cout)."""
    w, bias = p[layer.name + ".weight"], p[layer.name + ".bias"].unsqueeze(1)
    m, cout, cin, k = w.shape
    b, length = h.shape[1], h.shape[2]
    if k == 1 and layer.stride == 1:
        return torch.baddbmm(bias, h.reshape(m, -1, cin), w.view(m, cout, cin).transpose(1, 2)).view(m, b, length, cout)
    rows = _groups(h, layer.stride)
    lg = rows.shape[1] // b
    wp = w.permute(0, 3, 2, 1)  # (M, k, Cin, Cout)
    out, rest = None, []
    for d, j0, j1, r0, r1 in _terms(layer):
        wd = wp[:, j0:j1].reshape(m, (j1 - j0) * cin, cout)
        part = rows[:, :, r0 * cin:r1 * cin]
        if d == 0:
            out = torch.baddbmm(bias, part, wd).view(m, b, lg, cout)
        else:
            rest.append((d, torch.bmm(part, wd).view(m, b, lg, cout)))
    if out is None:
        out = bias.unsqueeze(1).expand(m, b, lg, cout).clone()
    for d, t in rest:
        _shift_into(out, t, d)
    return out


def conv_backward(g: torch.Tensor, h: torch.Tensor, p: Params, layer: Conv, grads: Params, need_input: bool
                  ) -> torch.Tensor | None:
    """Gradients of the convolution's weights and bias (written into `grads`) and of its input (returned)."""
    w = p[layer.name + ".weight"]
    m, cout, cin, k = w.shape
    b, length = h.shape[1], h.shape[2]
    g2 = g.reshape(m, -1, cout)
    if layer.name + ".bias" in grads:  # a caller that wants only the weights' gradient leaves the bias out
        grads[layer.name + ".bias"].copy_(g2.sum(1))
    if k == 1 and layer.stride == 1:
        h2 = h.reshape(m, -1, cin)
        grads[layer.name + ".weight"].copy_(torch.bmm(g2.transpose(1, 2), h2).unsqueeze(-1))
        return torch.bmm(g2, w.view(m, cout, cin)).view(m, b, length, cin) if need_input else None
    rows = _groups(h, layer.stride)
    lg = rows.shape[1] // b
    wp = w.permute(0, 3, 2, 1)
    dwp = torch.empty(m, k, cin, cout, dtype=w.dtype, device=w.device)
    drows = None
    for d, j0, j1, r0, r1 in sorted(_terms(layer), key=lambda t: t[3] != 0 or t[4] != layer.stride):
        gd = g2 if d == 0 else _shifted(g, d, lg).view(m, -1, cout)
        part = rows[:, :, r0 * cin:r1 * cin]
        dwp[:, j0:j1] = torch.bmm(part.transpose(1, 2), gd).view(m, j1 - j0, cin, cout)
        if need_input:
            t = torch.bmm(gd, wp[:, j0:j1].reshape(m, (j1 - j0) * cin, cout).transpose(1, 2))
            if drows is None and r0 == 0 and r1 == layer.stride:
                drows = t
            else:
                if drows is None:
                    drows = torch.zeros_like(rows)
                drows[:, :, r0 * cin:r1 * cin] += t
    grads[layer.name + ".weight"].copy_(dwp.permute(0, 3, 2, 1))
    if not need_input:
        return None
    dh = drows.view(m, b, -1, cin)
    return dh if dh.shape[2] == length else dh[:, :, :length].contiguous()


def norm(h: torch.Tensor, p: Params, buffers: Params, layer: Norm, train: bool, reuse: bool = False
         ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The models' batchnorm on (M, B, L, C), running statistics updated in place in train mode (as
    nn.BatchNorm1d does); returns the output and what its backward needs (the centred input, 1/std, scale).
    Mean, then the mean square of the centred input: torch.var_mean over the middle axis is some 30x slower.
    `reuse` (no autograd, `h` the pass's own and needed by nothing after): the square and the output are written
    over `h`, the same numbers without two new activations."""
    m, b, length, c = h.shape
    h2 = h.reshape(m, -1, c)
    gamma, beta = p[layer.name + ".weight"], p[layer.name + ".bias"]
    mean_buf, var_buf = buffers[layer.name + ".running_mean"], buffers[layer.name + ".running_var"]
    if train:
        n = h2.shape[1]
        mean = h2.mean(1)
        centred = h2 - mean.unsqueeze(1)
        free = h2 if reuse and h2.is_contiguous() else None
        var = torch.mul(centred, centred, out=free).mean(1)
        rstd = (var + layer.eps).rsqrt()
        with torch.no_grad():
            mean_buf.mul_(1 - layer.momentum).add_(mean.detach(), alpha=layer.momentum)
            var_buf.mul_(1 - layer.momentum).add_(var.detach() * (n / max(n - 1, 1)), alpha=layer.momentum)
            buffers[layer.name + ".num_batches_tracked"].add_(1)
        a = gamma * rstd
        out = torch.addcmul(beta.unsqueeze(1), centred, a.unsqueeze(1), out=free)
        return out.view(m, b, length, c), (centred, rstd, a)
    a = gamma * (var_buf + layer.eps).rsqrt()
    out = torch.addcmul((beta - mean_buf * a).unsqueeze(1), h2, a.unsqueeze(1))
    return out.view(m, b, length, c), ()


def norm_backward(g: torch.Tensor, saved: tuple[torch.Tensor, ...], layer: Norm, grads: Params) -> torch.Tensor:
    """Gradients of the batchnorm's scale and shift (into `grads`) and of its input (returned, written over `g`
    when it is contiguous: the backward pass's own), train mode."""
    centred, rstd, a = saved
    m, n, c = centred.shape
    g2 = g.reshape(m, n, c)
    sum_g = g2.sum(1)
    dgamma = torch.mul(g2, centred).sum(1).mul_(rstd)
    grads[layer.name + ".weight"].copy_(dgamma)
    grads[layer.name + ".bias"].copy_(sum_g)
    k1 = a * rstd * dgamma / -n
    k0 = a * sum_g / -n
    out = g2 if g2.is_contiguous() else None  # g is the backward pass's own: overwritten, element by element
    return torch.addcmul(k0.unsqueeze(1), g2, a.unsqueeze(1), out=out).addcmul_(centred, k1.unsqueeze(1)).view(g.shape)


def head(h: torch.Tensor, p: Params, layer: Head) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (M, B, classes) and the head's input as its matrix product reads it."""
    w, bias = p[layer.name + ".weight"], p[layer.name + ".bias"].unsqueeze(1)
    m, b = h.shape[:2]
    if layer.pool == "mean":
        x = h.mean(2)
        return torch.baddbmm(bias, x, w.transpose(1, 2)), x
    x = h.reshape(m, b, -1)
    return torch.baddbmm(bias, x, w.permute(0, 3, 2, 1).reshape(m, -1, w.shape[1])), x


def head_backward(g: torch.Tensor, x: torch.Tensor, h_shape: torch.Size, p: Params, layer: Head, grads: Params
                  ) -> torch.Tensor:
    """Gradients of the head's weights and bias (into `grads`) and of the activation it read, shaped `h_shape`."""
    w = p[layer.name + ".weight"]
    m = w.shape[0]
    if layer.name + ".bias" in grads:
        grads[layer.name + ".bias"].copy_(g.sum(1))
    if layer.pool == "mean":
        grads[layer.name + ".weight"].copy_(torch.bmm(g.transpose(1, 2), x))
        dx = torch.bmm(g, w).div_(h_shape[2])
        return dx.unsqueeze(2).expand(h_shape)
    kw = w.shape[-1]
    dwf = torch.bmm(x.transpose(1, 2), g)  # (M, L * C, classes), rows (l, c)
    grads[layer.name + ".weight"].copy_(dwf.view(m, kw, -1, w.shape[1]).permute(0, 3, 2, 1))
    return torch.bmm(g, w.permute(0, 3, 2, 1).reshape(m, -1, w.shape[1]).transpose(1, 2)).view(h_shape)


class StackedSignals:
    """Forward (autograd-able, and the eval pass) and hand-written training gradient of M stacked 1-D conv nets
    described by `layers`, each model dropping units at its own rate (`codes`)."""

    def __init__(self, layers: Sequence[Layer], codes: Codes):
        self.layers, self.codes = list(layers), codes
        # the first convolution reads the input, whose gradient nobody needs
        self.first_conv = next(i for i, layer in enumerate(self.layers) if isinstance(layer, Conv))

    @staticmethod
    def inputs(x: torch.Tensor) -> torch.Tensor:
        """Inputs (M, B, L) or (M, B, C, L) as (M, B, L, C)."""
        return x.unsqueeze(-1) if x.dim() == 3 else x.transpose(2, 3).contiguous()

    def forward(self, p: Params, buffers: Params, x: torch.Tensor, train: bool, tape: list | None = None
                ) -> torch.Tensor:
        """Logits (M, B, classes). With `tape` (under no_grad) activations are overwritten in place and what the
        backward pass needs is appended to it."""
        h = self.inputs(x)
        for prev, layer in zip([None, *self.layers], self.layers):
            if isinstance(layer, Conv):
                if tape is not None:
                    tape.append(h)
                h = conv(h, p, layer)
            elif isinstance(layer, Norm):
                # written over only when h is a convolution's output (nothing on the tape, not the caller's x)
                h, saved = norm(h, p, buffers, layer, train, reuse=tape is not None and isinstance(prev, Conv))
                if tape is not None:
                    tape.append(saved)
            elif isinstance(layer, Relu):
                h = h.relu_() if tape is not None or not torch.is_grad_enabled() else h.relu()  # a conv's or norm's output
                if tape is not None:
                    tape.append(h)  # dropout may scale it in place: its zeros are the ReLU's or dropped units
            elif isinstance(layer, Drop):
                if train and self.codes is not None:
                    view = h.reshape(h.shape[0], h.shape[1], -1)
                    mask = dropout_mask(view, self.codes).view_as(h)
                    h = h.mul_(mask) if tape is not None else h * mask
                    if tape is not None:
                        tape.append(mask)
                elif tape is not None:
                    tape.append(None)
            else:
                if tape is not None:
                    tape.append(h.shape)
                logits, x_head = head(h, p, layer)
                if tape is not None:
                    tape.append(x_head)
                return logits
        raise ValueError("the layers of a stacked signal network end with a Head")

    def __call__(self, params: Params, buffers: Params, x: torch.Tensor, y: torch.Tensor, grads: Params) -> Params:
        """Write the gradient of the training loss (cross-entropy summed over the batch / batch size) into
        `grads`; batchnorm's running statistics are updated as the forward pass does."""
        self.loss_gradient(params, buffers, x, y, grads)
        return grads

    @torch.no_grad()
    def loss_gradient(self, params: Params, buffers: Params, x: torch.Tensor, y: torch.Tensor, grads: Params,
                      per: int | None = None) -> torch.Tensor:
        """Write the gradient of the cross-entropy summed over the batch / `per` (default: the batch size) into
        `grads` (train mode: dropout, batchnorm's batch statistics) and return the logits (M, B, classes). A
        convolution's or the head's bias missing from `grads` is not computed."""
        tape: list = []
        logits = self.forward(params, buffers, x, True, tape)
        g = torch.softmax(logits, -1)
        g.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(g[..., :1], -1.0)).div_(per or y.shape[1])
        x_head = tape.pop()
        h_shape = tape.pop()
        g = head_backward(g, x_head, h_shape, params, self.layers[-1], grads)
        for i in range(len(self.layers) - 2, -1, -1):
            layer, saved = self.layers[i], tape.pop()
            # g is this pass's own (each layer's backward returns a fresh tensor): updated in place where it is
            # a plain block (the mean head's is an expanded view), the same numbers without a new activation
            if isinstance(layer, Drop):
                if saved is not None:
                    g = g.mul_(saved) if g.is_contiguous() else g * saved
            elif isinstance(layer, Relu):
                if g.is_contiguous():
                    g = torch.ops.aten.threshold_backward.grad_input(g, saved, 0, grad_input=g)
                else:
                    g = torch.ops.aten.threshold_backward(g, saved, 0)
            elif isinstance(layer, Norm):
                g = norm_backward(g, saved, layer, grads)
            else:
                g = conv_backward(g, saved, params, layer, grads, need_input=i > self.first_conv)
        return logits
