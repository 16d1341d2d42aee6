"""Flatness measures of Jiang et al. 2020: PAC-Bayes bounds from the largest Gaussian noise (plain and
magnitude-aware) the training accuracy tolerates, and worst-case sharpness from projected gradient ascent.

Every search runs on the BN-folded model, on a fixed training subsample, with common random numbers (the
noise directions are drawn once and reused for every radius), so the accuracy drop is a deterministic and
nearly monotone function of the radius. Unlike the public code, the Gaussian noise std is sigma (not sigma^2)
and the sharpness search ascends the loss (the PGDL baseline descends)."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .context import MeasureContext, derive_seed
from .norm import FANTASTIC, folded_init_model, folded_model
from .registry import register_measure

N_MC = 10             # Monte Carlo draws of the Gaussian noise per radius
SUBSAMPLE = 1000      # training examples every search evaluates on
TARGET_DROP = 0.1     # allowed drop of training accuracy
TOLERANCE = 0.01      # stop when |drop - TARGET_DROP| <= TOLERANCE
BISECT_STEPS = 15     # at most this many bisection steps once a [r, 2r] bracket is found
START, FLOOR, CAP = 1.0, 2.0 ** -20, 2.0 ** 10   # first radius tried, and the bracket limits
EPS_MAG = 1e-3        # epsilon of the magnitude-aware noise
ASCENT_STEPS = 10     # projected sign-gradient ascent steps per box radius
ASCENT_STEP_SIZE = 0.25   # step, as a fraction of the box radius
EVAL_BATCH = 500      # examples per forward pass


class FlatModel:
    """A model as a function of one flat vector holding all its parameters (biases included)."""

    def __init__(self, model: nn.Module):
        self.model = model.eval()
        named = [(n, p.detach()) for n, p in model.named_parameters()]
        self.names = [n for n, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.w = torch.cat([p.reshape(-1) for _, p in named])

    def params(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parameter dict for functional_call with the values in `flat`."""
        chunks = flat.split([math.prod(s) for s in self.shapes])
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes)}

    def logits(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Outputs of the model with parameters `flat` on `x`, in batches."""
        p = self.params(flat)
        return torch.cat([torch.func.functional_call(self.model, p, (x[i:i + EVAL_BATCH],))
                          for i in range(0, len(x), EVAL_BATCH)])

    @torch.no_grad()
    def accuracy(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> float:
        """Training accuracy of the model with parameters `flat` on (x, y)."""
        return float((self.logits(flat, x).argmax(1) == y).float().mean())


def noise_generator(ctx: MeasureContext, key: str) -> torch.Generator:
    """A CPU generator seeded from the context's seed and `key`, the same whichever measure runs first."""
    return torch.Generator().manual_seed(derive_seed(ctx.seed, key))


# --- the radius search --------------------------------------------------------------------------------
def search_radius(drop: Callable[[float], float], *, check: Callable[[], None] = lambda: None,
                  start: float = START, floor: float = FLOOR, cap: float = CAP) -> float:
    """Largest radius r with drop(r) <= TARGET_DROP: double or halve from `start` to bracket it in [r, 2r]
    (clamped to [floor, cap]), then bisect until |drop - TARGET_DROP| <= TOLERANCE or BISECT_STEPS."""
    r = start
    d = drop(r)
    grow = d <= TARGET_DROP
    while abs(d - TARGET_DROP) > TOLERANCE:
        check()
        nxt = r * 2 if grow else r / 2
        if not floor <= nxt <= cap:
            return r
        r, d = nxt, drop(nxt)
        if (d <= TARGET_DROP) != grow:
            break
    else:
        return r
    lo, hi = (r / 2, r) if grow else (r, r * 2)
    for _ in range(BISECT_STEPS):
        check()
        mid = (lo + hi) / 2
        d = drop(mid)
        if abs(d - TARGET_DROP) <= TOLERANCE:
            return mid
        lo, hi = (mid, hi) if d <= TARGET_DROP else (lo, mid)
    return lo


def gaussian_drop(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor,
                  std: Callable[[float], torch.Tensor | float]) -> Callable[[float], float]:
    """drop(s) = acc(w) - mean_k acc(w + std(s) * z_k), with the fixed noise directions z [N_MC, P]."""
    acc0 = fm.accuracy(fm.w, x, y)

    def drop(s: float) -> float:
        scale = std(s)
        return acc0 - float(np.mean([fm.accuracy(fm.w + scale * zk, x, y) for zk in z]))

    return drop


def pacbayes_sigma(model: nn.Module, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator, *,
                   magnitude: bool = False, check: Callable[[], None] = lambda: None) -> float:
    """The largest sigma whose Gaussian weight noise (std sigma, or sqrt(sigma^2 w^2 + eps^2) when
    `magnitude`) lowers the mean training accuracy on (x, y) by at most TARGET_DROP."""
    fm = FlatModel(model)
    z = torch.randn(N_MC, fm.w.numel(), generator=generator, dtype=fm.w.dtype).to(fm.w.device)
    if magnitude:
        w2 = fm.w ** 2

        def std(s: float) -> torch.Tensor:
            return torch.sqrt(s ** 2 * w2 + EPS_MAG ** 2)
    else:
        def std(s: float) -> float:
            return s
    return search_radius(gaussian_drop(fm, x, y, z, std), check=check)


# --- worst-case sharpness -----------------------------------------------------------------------------
def loss_gradient(fm: FlatModel, u: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Gradient in u of the mean cross-entropy of the model with parameters w + u on (x, y), accumulated
    batch by batch to bound memory, and the accuracy of that model."""
    grad, correct = torch.zeros_like(u), 0
    for i in range(0, len(x), EVAL_BATCH):
        ui = u.detach().requires_grad_(True)
        out = torch.func.functional_call(fm.model, fm.params(fm.w + ui), (x[i:i + EVAL_BATCH],))
        loss = F.cross_entropy(out, y[i:i + EVAL_BATCH], reduction="sum") / len(x)
        grad += torch.autograd.grad(loss, ui)[0]
        correct += int((out.argmax(1) == y[i:i + EVAL_BATCH]).sum())
    return grad, correct / len(x)


def ascend_in_box(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, alpha: float, start: torch.Tensor,
                  steps: int = ASCENT_STEPS) -> tuple[torch.Tensor, float]:
    """Projected sign-gradient ascent of the cross-entropy over the box |u_i| <= alpha, from u = alpha * start
    (start in [-1, 1]^P); returns the final u and the lowest training accuracy met on the way."""
    u, worst = alpha * start, 1.0
    for _ in range(steps):
        grad, acc = loss_gradient(fm, u, x, y)
        worst = min(worst, acc)
        u = (u + ASCENT_STEP_SIZE * alpha * grad.sign()).clamp(-alpha, alpha)
    return u, min(worst, fm.accuracy(fm.w + u, x, y))


def box_loss(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> float:
    """Cross-entropy on (x, y) of the model with parameters w + u."""
    with torch.no_grad():
        return float(F.cross_entropy(fm.logits(fm.w + u, x), y))


def sharpness_alpha(model: nn.Module, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator, *,
                    check: Callable[[], None] = lambda: None) -> float:
    """The largest box radius alpha such that the worst case found by gradient ascent over |u_i| <= alpha
    lowers the training accuracy on (x, y) by at most TARGET_DROP."""
    fm = FlatModel(model)
    start = (2 * torch.rand(fm.w.numel(), generator=generator, dtype=fm.w.dtype) - 1).to(fm.w.device)
    acc0 = fm.accuracy(fm.w, x, y)

    def drop(alpha: float) -> float:
        return acc0 - ascend_in_box(fm, x, y, alpha, start)[1]

    return search_radius(drop, check=check)


# --- per-model memos ----------------------------------------------------------------------------------
def sigma(ctx: MeasureContext) -> float:
    """The PAC-Bayes sigma of this model, searched once and shared by pacbayes.init / orig / flatness."""
    def compute() -> float:
        x, y = ctx.subsample(SUBSAMPLE)
        return pacbayes_sigma(folded_model(ctx), x, y, noise_generator(ctx, "pacbayes.sigma"), check=ctx.check_time)

    return ctx.memo("pacbayes.sigma", compute)


def mag_sigma(ctx: MeasureContext) -> float:
    """The magnitude-aware sigma' of this model, searched once and shared by the pacbayes.mag_* measures."""
    def compute() -> float:
        x, y = ctx.subsample(SUBSAMPLE)
        return pacbayes_sigma(folded_model(ctx), x, y, noise_generator(ctx, "pacbayes.mag_sigma"), magnitude=True,
                              check=ctx.check_time)

    return ctx.memo("pacbayes.mag_sigma", compute)


def flat_weights(ctx: MeasureContext, init: bool) -> torch.Tensor:
    """All parameters of the folded model (minus those of the folded init model when `init`), float64."""
    w = FlatModel(folded_model(ctx)).w.double()
    if init:
        w = w - FlatModel(folded_init_model(ctx)).w.double().to(w.device)
    return w


# --- the bounds ---------------------------------------------------------------------------------------
def pacbayes_bound(sq_norm: float, sigma_: float, m: int) -> float:
    """||v||^2 / (4 sigma^2) + log(m / sigma) + 10 (Jiang et al. 2020, eq. 48-49)."""
    return sq_norm / (4 * sigma_ ** 2) + math.log(m / sigma_) + 10


def mag_pacbayes_bound(v: torch.Tensor, sigma_: float, m: int) -> float:
    """1/4 sum_i log[(eps^2 + (s^2+1)||v||^2/omega) / (eps^2 + s^2 v_i^2)] + log(m/s) + 10 (eq. 56-57)."""
    v = v.double()
    omega = v.numel()
    num = EPS_MAG ** 2 + (sigma_ ** 2 + 1) * float(v.square().sum()) / omega
    den = EPS_MAG ** 2 + sigma_ ** 2 * v.square()
    return float(torch.log(num / den).sum()) / 4 + math.log(m / sigma_) + 10


TRAIN = ("train_data",)
TRAIN_INIT = ("train_data", "init_weights")


@register_measure("pacbayes.init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap")
def init(ctx: MeasureContext) -> float:
    """||w - w0||^2 / (4 sigma^2) + log(m / sigma) + 10, sigma the largest noise std costing <= 0.1 accuracy."""
    return pacbayes_bound(float(flat_weights(ctx, True).square().sum()), sigma(ctx), ctx.num_train)


@register_measure("pacbayes.orig", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap")
def orig(ctx: MeasureContext) -> float:
    """||w||^2 / (4 sigma^2) + log(m / sigma) + 10, sigma the largest noise std costing <= 0.1 accuracy."""
    return pacbayes_bound(float(flat_weights(ctx, False).square().sum()), sigma(ctx), ctx.num_train)


@register_measure("pacbayes.flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap")
def flatness(ctx: MeasureContext) -> float:
    """1 / sigma^2, sigma the largest Gaussian weight-noise std costing <= 0.1 training accuracy (eq. 53)."""
    return 1.0 / sigma(ctx) ** 2


@register_measure("pacbayes.mag_init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap")
def mag_init(ctx: MeasureContext) -> float:
    """1/4 sum_i log[(eps^2 + (s'^2+1)||w-w0||^2/omega) / (eps^2 + s'^2 (w_i-w0_i)^2)] + log(m/s') + 10."""
    return mag_pacbayes_bound(flat_weights(ctx, True), mag_sigma(ctx), ctx.num_train)


@register_measure("pacbayes.mag_orig", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap")
def mag_orig(ctx: MeasureContext) -> float:
    """1/4 sum_i log[(eps^2 + (s'^2+1)||w||^2/omega) / (eps^2 + s'^2 w_i^2)] + log(m/s') + 10."""
    return mag_pacbayes_bound(flat_weights(ctx, False), mag_sigma(ctx), ctx.num_train)


@register_measure("pacbayes.mag_flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap")
def mag_flatness(ctx: MeasureContext) -> float:
    """1 / s'^2, s' the largest magnitude-aware noise scale (std sqrt(s'^2 w_i^2 + eps^2)) costing <= 0.1 accuracy."""
    return 1.0 / mag_sigma(ctx) ** 2


@register_measure("sharpness.flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap")
def sharpness_flatness(ctx: MeasureContext) -> float:
    """1 / alpha^2, alpha the largest box |u_i| <= alpha whose ascent-found worst case costs <= 0.1 accuracy."""
    def compute() -> float:
        x, y = ctx.subsample(SUBSAMPLE)
        return sharpness_alpha(folded_model(ctx), x, y, noise_generator(ctx, "sharpness.alpha"), check=ctx.check_time)

    return 1.0 / ctx.memo("sharpness.alpha", compute) ** 2
