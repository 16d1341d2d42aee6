"""Margin-distribution measures (DEMOGEN, Jiang et al. 2019) and the margin baselines of its Table 1.

Every probe layer's margins come from one forward and one backward pass per batch: the backward pass
takes grad_outputs = onehot(i) - onehot(j), which gives grad_{x^l}(f_i - f_j) for all examples and
all layers at once (the model is in eval mode, so examples do not interact)."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from ..errors import GenbenchError
from ..models.registry import relative_depths
from .context import MeasureContext
from .registry import register_measure
from .weights import batchnorm_folded, weight_layers

DEMOGEN = "Jiang, Krishnan, Mobahi, Bengio 2019 (Predicting the generalization gap with margin distributions)"
BARTLETT = "Bartlett, Foster, Telgarsky 2017 (Spectrally-normalized margin bounds)"
SOKOLIC = "Sokolic, Giryes, Sapiro, Rodrigues 2017 (Robust large margin deep neural networks)"
ELSAYED = "Elsayed, Krishnan, Mobahi, Regan, Bengio 2018 (Large margin deep networks)"
# A point whose gradient norm at a layer is below FLAT x the layer's median norm is flat there: its linearised
# distance is undefined (it would be astronomically large), so it is left out (NaN) at that layer. The DEMOGEN
# code instead adds 1e-6 under the square root, which breaks the invariance to rescaling a layer when
# gradients are small; a floor relative to the layer's own median keeps the invariance.
FLAT = 1e-6
LAYER_NAMES = ("input", "h1", "h2", "h3")  # the input, then hidden probes at relative depths 1/3, 2/3 and 1
BATCH_ELEMENTS = 1 << 21  # input numbers per batch: all of mnist1d at once, ~680 CIFAR images


def batch_size(x: torch.Tensor) -> int:
    """Examples per margin batch: large batches amortise the per-batch Python work on small inputs."""
    return max(1, BATCH_ELEMENTS // max(1, x[0].numel()))


@dataclass(frozen=True)
class Margins:
    """Signed first-order distances to the boundary at each probe layer, with what normalises them."""

    layers: list[str]                    # probe-layer module names, input first
    distance: np.ndarray                 # [layers, n]: (f_i - f_j) / ||grad_{x^l}(f_i - f_j)||_2, NaN where flat
    total_variation: np.ndarray          # [layers]: tr Cov(x^l), population covariance over the training set
    output_margin: np.ndarray            # [n]: f_i - f_j
    correct: np.ndarray                  # [n]: the model's prediction equals the training label

    def normalized(self) -> np.ndarray:
        """Distances divided by sqrt(total variation), layer by layer (DEMOGEN eq. 5)."""
        return self.distance / np.sqrt(self.total_variation)[:, None]


def predicted_and_other(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The predicted class and j: the highest logit when the prediction is wrong, else the second
    highest (DEMOGEN)."""
    top2 = logits.topk(2, dim=1).indices
    return top2[:, 0], torch.where(top2[:, 0] == y, top2[:, 1], top2[:, 0])


def other_class(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """j: the highest logit when the prediction is wrong, else the second highest (DEMOGEN)."""
    return predicted_and_other(logits, y)[1]


class _RunningVariation:
    """Total variation sum_d Var(x_d) = E||x||^2 - ||E x||^2 over batches, from one dot product and one
    matrix product per batch (several times faster on the CPU than centring, column sums or var_mean);
    the batch sums are accumulated in float64 (when the value is asked for, in the order of the batches)."""

    def __init__(self) -> None:
        self.n = 0
        self._sums: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._ones: torch.Tensor | None = None

    def add(self, a: torch.Tensor) -> None:
        a = a.flatten(1)
        ones = self._ones
        if ones is None or ones.shape[1] != a.shape[0] or ones.dtype != a.dtype or ones.device != a.device:
            ones = self._ones = torch.ones(1, a.shape[0], dtype=a.dtype, device=a.device)
        flat = a.reshape(-1)
        self._sums.append((ones @ a, torch.dot(flat, flat)))
        self.n += a.shape[0]

    def value(self) -> float:
        s1, s2 = 0.0, 0.0
        for col, sq in self._sums:
            s1, s2 = s1 + col.double(), s2 + float(sq)
        mean = s1 / self.n
        return max(0.0, s2 / self.n - float((mean * mean).sum()))


class _Probes:
    """Hooks that use each probe activation and its gradient the moment they are produced, while they are
    still in the CPU cache, and keep neither: a forward hook accumulates the activation's total variation
    and puts a hook on the activation that takes the row norms of its gradient during the backward pass.
    The backward pass itself only asks for the gradient of the input (every probe lies between the input
    and the logits, so all hooks fire): no probe activation or gradient outlives its use, and their memory
    is reused by the next layers (asking autograd for the probes' gradients kept all of them until the end).

    Also a hook on the last Linear module: when the logits are its output, logits = h W^T + b, so the
    backward pass can start at h with grad (f_i - f_j) = W_i - W_j, a row of the small table of differences
    of rows of W, instead of a matrix product with the one-hot direction. That product's terms are exact
    (+-1 times a weight, or 0) and only the two non-zero ones sum, so it rounds to the same fl(W_i - W_j)
    whatever the summation order: the gradients are the same numbers (at most a zero's sign differs, which
    no norm sees)."""

    def __init__(self, model: nn.Module, layers: list[str]):
        modules = dict(model.named_modules())
        self.variation = [_RunningVariation() for _ in layers]
        self.norms: list[torch.Tensor | None] = [None] * len(layers)
        self._handles = [modules[name].register_forward_hook(self._forward_hook(k, name))
                         for k, name in enumerate(layers)]
        linear = [name for name, m in modules.items() if isinstance(m, nn.Linear)]
        self.head = modules[linear[-1]] if linear and linear[-1] not in layers else None
        self._head_io: tuple[torch.Tensor, torch.Tensor] | None = None
        if self.head is not None:
            self._handles.append(self.head.register_forward_hook(
                lambda _m, i, o: setattr(self, "_head_io", (i[0], o))))

    def _forward_hook(self, k: int, name: str):
        def norm(g: torch.Tensor) -> None:
            self.norms[k] = torch.linalg.vector_norm(g.flatten(1), dim=1)

        def hook(_module: nn.Module, _inputs, out: torch.Tensor) -> None:
            if self.norms[k] is not None:
                raise ValueError(f"probe layer {name!r} ran twice in one forward pass: its margins are ambiguous")
            if not out.requires_grad:
                raise ValueError(f"probe layer {name!r}: its output does not depend on the input")
            self.variation[k].add(out.detach())
            self.norms[k] = _PENDING
            out.register_hook(norm)
        return hook

    def norms_of_gradients(self, x: torch.Tensor, logits: torch.Tensor, y: torch.Tensor, j: torch.Tensor
                           ) -> torch.Tensor:
        """[layers, n]: ||grad (f_y - f_j)|| with respect to each probe layer's output, for each example
        of the batch `x` just run forward."""
        start, grad = logits, None
        if self._head_io is not None and self._head_io[1] is logits and logits.dim() == 2:
            h, w = self._head_io[0], self.head.weight
            if h.dim() == 2 and h.requires_grad:  # W_i - W_j looked up in the table of all class pairs
                c = w.shape[0]
                start, grad = h, (w[:, None, :] - w[None, :, :]).view(c * c, -1).index_select(0, y * c + j)
        if grad is None:
            grad = torch.zeros_like(logits).scatter_(1, y[:, None], 1.0).scatter_(1, j[:, None], -1.0)
        self._head_io = None
        torch.autograd.grad(start, x, grad_outputs=grad)
        missing = [k for k, n in enumerate(self.norms) if n is None or n is _PENDING]
        if missing:
            raise ValueError(f"probe layers {missing} are not between the input and the logits")
        out = torch.stack(self.norms)
        self.norms = [None] * len(self.norms)
        return out

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


_PENDING = torch.empty(0)  # a probe's norm slot between its forward hook and its gradient hook


def compute_margins(model: nn.Module, layers: list[str], batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
                    check_time=lambda: None) -> Margins:
    """One forward and one backward pass per batch give every layer's margins; the total variation and the
    gradient norms are taken on the way (see _Probes), so no activation is kept beyond its use. BatchNorm
    is folded into the layer before it for the duration (same function, one elementwise pass less each way)."""
    norms, out_margin, correct = [], [], []
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:  # gradients are taken with respect to activations only
        p.requires_grad_(False)
    probes = None
    try:
        with batchnorm_folded(model):
            probes = _Probes(model, layers)
            for x, y in batches:
                x = x.detach().float().requires_grad_(True)
                logits = model(x)
                predicted, j = predicted_and_other(logits.detach(), y)
                norms.append(probes.norms_of_gradients(x, logits, y, j))
                out_margin.append((logits.gather(1, y[:, None]) - logits.gather(1, j[:, None]))[:, 0].detach())
                correct.append(predicted == y)
                check_time()
    finally:
        if probes is not None:
            probes.remove()
        for p in params:
            p.requires_grad_(True)
    tv = np.array([v.value() for v in probes.variation])
    num, norm = torch.cat(out_margin).double().cpu().numpy(), torch.cat(norms, 1).double().cpu().numpy()
    floor = FLAT * np.median(norm, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.where(norm > floor, num[None, :] / norm, np.nan)
    return Margins(list(layers), distance, tv, num, torch.cat(correct).cpu().numpy())


def margins(ctx: MeasureContext) -> Margins:
    """The margins of this model on its training set, computed once and shared by all margin measures."""
    return ctx.memo("margins", lambda: compute_margins(ctx.model, ctx.probe_layers, 
                                                       ctx.train_batches(batch_size(ctx.train.x)), ctx.check_time))


def quartile_signature(d: np.ndarray) -> np.ndarray:
    """(lower fence, Q1, Q2, Q3, upper fence) of positive distances; fences are Tukey's whiskers: the most
    extreme values within 1.5 IQR of the quartiles. Quartiles by linear interpolation."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d > 0]  # also drops NaN (points flat at this layer)
    if d.size == 0:
        raise ValueError("no positive margins: the model classifies no training point correctly")
    q1, q2, q3 = np.quantile(d, [0.25, 0.5, 0.75])
    iqr = q3 - q1
    return np.array([d[d >= q1 - 1.5 * iqr].min(), q1, q2, q3, d[d <= q3 + 1.5 * iqr].max()])


def moment_signature(d: np.ndarray, k: int = 5) -> np.ndarray:
    """n-th roots of the first `k` raw moments of the positive distances: (E d^n)^(1/n), n = 1..k."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d > 0]
    if d.size == 0:
        raise ValueError("no positive margins: the model classifies no training point correctly")
    return np.array([np.mean(d ** n) ** (1.0 / n) for n in range(1, k + 1)])


FIXED_DEPTHS = 2  # the version of every signature read at the fixed relative depths (version 1: at each model's
# own probes, which failed on zoos of several depths, and read other layers on networks of 1 or 2 hidden layers)


def at_fixed_depths(rows: np.ndarray) -> np.ndarray:
    """The input's row, then the hidden probes' rows nearest relative depths 1/3, 2/3 and 1 (LAYER_NAMES): every
    network of a zoo gives signatures of one length whatever its depth, and a network probed at fewer than 3
    hidden layers repeats the nearest one (2 hidden probes: h1, h1, h2)."""
    hidden = len(rows) - 1
    if hidden < 1:
        raise GenbenchError("the model has no hidden probe layer (probe_layers() lists only the input): "
                            "margin signatures need at least one")
    return rows[[0, *(1 + i for i in relative_depths(hidden, len(LAYER_NAMES) - 1))]]


def _normalized(ctx: MeasureContext) -> np.ndarray:
    """[4, n] normalised distances at the fixed relative depths."""
    return at_fixed_depths(margins(ctx).normalized())


def _qrt(ctx: MeasureContext, normalize: bool = True) -> np.ndarray:
    """Quartile signature at the input and the three fixed relative depths [4, 5], computed once per model for
    all the variants."""

    def compute() -> np.ndarray:
        m = margins(ctx)
        rows = at_fixed_depths(m.normalized() if normalize else m.distance)
        return np.stack([quartile_signature(row) for row in rows])

    return ctx.memo(("margin.qrt", normalize), compute)


def _layer(ctx: MeasureContext, k: int) -> np.ndarray:
    return _qrt(ctx)[k]


_NEEDS = ("train_data",)


@register_measure("margin.qrt_log", kind="signature", version=FIXED_DEPTHS, transform="log",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def qrt_log(ctx: MeasureContext) -> np.ndarray:
    """Quartile signature (lower fence, Q1, Q2, Q3, upper fence) of normalised margins at 4 probe layers (20)."""
    return _qrt(ctx).ravel()


@register_measure("margin.qrt_linear", kind="signature", version=FIXED_DEPTHS, transform="linear",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def qrt_linear(ctx: MeasureContext) -> np.ndarray:
    """The margin.qrt_log signature, regressed without the log transform."""
    return _qrt(ctx).ravel()


@register_measure("margin.qrt_log_unnorm", kind="signature", version=FIXED_DEPTHS, transform="log",
                  needs=_NEEDS, citation=DEMOGEN)
def qrt_log_unnorm(ctx: MeasureContext) -> np.ndarray:
    """Quartile signature of margins NOT divided by sqrt(total variation), 4 probe layers (20)."""
    return _qrt(ctx, normalize=False).ravel()


@register_measure("margin.moment_log", kind="signature", version=FIXED_DEPTHS, transform="log",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def moment_log(ctx: MeasureContext) -> np.ndarray:
    """(E d^n)^(1/n), n = 1..5, of the positive normalised margins at 4 probe layers (20)."""
    return np.concatenate([moment_signature(row) for row in _normalized(ctx)])


@register_measure("margin.sf_log", kind="signature", version=FIXED_DEPTHS, transform="log",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def sf_log(ctx: MeasureContext) -> np.ndarray:
    """Single statistic at every layer: the median Q2 of normalised margins at 4 probe layers (4).
    The paper keeps its best statistic; genbench fixes the median in advance, choosing nothing on the gap."""
    return _qrt(ctx)[:, 2]


@register_measure("margin.sl_log", kind="signature", transform="log",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def sl_log(ctx: MeasureContext) -> np.ndarray:
    """Single layer: the quartile signature at the deepest probe layer h3 (5), the paper's best layer for its CNN."""
    return _layer(ctx, -1)


@register_measure("margin.best4_log", kind="signature", version=FIXED_DEPTHS, transform="log",
                  needs=_NEEDS, citation=DEMOGEN, invariances=("relu_rescale",))
def best4_log(ctx: MeasureContext) -> np.ndarray:
    """Four statistics, two from each of two hidden layers (Fig. 2 middle): Q1 and Q3 at h2 and h3, fixed in advance."""
    q = _qrt(ctx)
    return np.array([q[-2, 1], q[-2, 3], q[-1, 1], q[-1, 3]])


def _register_single_layer(k: int, label: str) -> None:
    def single(ctx: MeasureContext) -> np.ndarray:
        return _layer(ctx, k)

    single.__doc__ = f"Quartile signature of normalised margins at the probe layer {label!r} alone (5; Table 4)."
    single.__name__ = f"margin_{label}"
    version = FIXED_DEPTHS if label in ("h2", "h3") else 1  # h1 and the input are where they always were
    register_measure(f"margin.{label}", kind="signature", needs=_NEEDS, citation=DEMOGEN, transform="log",
                     version=version, invariances=("relu_rescale",))(single)


for _k, _label in enumerate(LAYER_NAMES):
    _register_single_layer(_k, _label)


def spectral_complexity(model: nn.Module) -> float:
    """R_A = prod ||A_i||_2 * (sum ||A_i^T||_{2,1}^{2/3} / ||A_i||_2^{2/3})^{3/2}, reference matrices 0,
    BatchNorm folded, conv kernels as [out, in * k] matrices (Bartlett et al. 2017, Theorem 1.1)."""
    spec, ratio = 1.0, 0.0
    for layer in weight_layers(model):
        a = layer.matrix.double()
        s = float(torch.linalg.matrix_norm(a, ord=2))
        l21 = float(a.norm(dim=1).sum())  # ||A^T||_{2,1}: the sum of the row norms of A
        spec *= s
        ratio += (l21 / s) ** (2.0 / 3.0)
    return spec * ratio ** 1.5


@register_measure("margin.spectral_log", kind="signature", transform="log", needs=_NEEDS, citation=BARTLETT)
def spectral_log(ctx: MeasureContext) -> np.ndarray:
    """Quartile signature of output margins (f_i - f_j) / (R_A ||X||_F / n), R_A the spectral complexity (5)."""
    m = margins(ctx)
    x = ctx.train.x.double().flatten(1)
    scale = spectral_complexity(ctx.model) * float(x.norm()) / len(x)
    return quartile_signature(m.output_margin / scale)


@torch.no_grad()
def _jacobian_margins(model: nn.Module, batches, check_time) -> np.ndarray:
    out = []
    for x, y in batches:
        x = x.detach().float().requires_grad_(True)
        with torch.enable_grad():
            logits = model(x)
            jac = torch.stack([torch.autograd.grad(logits[:, c].sum(), x, retain_graph=c < logits.shape[1] - 1)[0]
                               .flatten(1) for c in range(logits.shape[1])], dim=1)  # [b, classes, inputs]
        j = other_class(logits, y)
        num = logits.gather(1, y[:, None])[:, 0] - logits.gather(1, j[:, None])[:, 0]
        spec = torch.linalg.matrix_norm(jac.double(), ord=2)
        out.append((num.double() / (np.sqrt(2.0) * spec)).cpu())
        check_time()
    return torch.cat(out).numpy()


@register_measure("margin.jacobian_log", kind="signature", transform="log", needs=_NEEDS, citation=SOKOLIC)
def jacobian_log(ctx: MeasureContext) -> np.ndarray:
    """Quartile signature of input margins (f_i - f_j) / (sqrt(2) ||J(x)||_2), J = d logits / d x (5)."""
    d = ctx.memo("jacobian_margins", lambda: _jacobian_margins(ctx.model, ctx.train_batches(batch_size(ctx.train.x)),
                                                                     ctx.check_time))
    return quartile_signature(d)


@register_measure("margin.lm_linear", kind="signature", version=FIXED_DEPTHS, transform="linear",
                  needs=_NEEDS, citation=ELSAYED, invariances=("relu_rescale",))
def lm_linear(ctx: MeasureContext) -> np.ndarray:
    """Large-margin hinge loss mean_x max(0, 1 - d_hat_l(x)) of signed normalised margins, per probe layer (4)."""
    return np.nanmean(np.maximum(0.0, 1.0 - _normalized(ctx)), axis=1)
