"""Flatness measures of Jiang et al. 2020 (appendix C): PAC-Bayes bounds from the largest Gaussian weight noise
(plain and magnitude-aware) the training accuracy tolerates, and sharpness bounds from the largest box of
weight perturbations (plain and magnitude-aware) whose worst case, found by projected gradient ascent, it
tolerates.

Conventions (docs/catalogue.md): everything runs on the BN-folded model, and the perturbed, counted and normed
parameters are the weights of its Linear/Conv layers only (`weights.weight_names`), as in the reference code of
Dziugaite et al. 2020 (`data/generation/measures.py`, `get_weights_only`); biases, and BatchNorms that could not
be folded, stay fixed. omega is that number of weights (= norm.params). Every search uses a fixed training
subsample and common random numbers (the noise directions, or the ascent's starting point, are drawn once and
reused for every radius), so the accuracy drop is a deterministic and nearly monotone function of the radius.
Unlike the public code, the Gaussian noise std is sigma (not sigma^2), and the sharpness search ascends the loss
(the PGDL baseline descends). Equation numbers 48, 49, 53, 56, 57 and 61 are those of the reference code's
`ComplexityType`; 50-52 and 58-60 (the sharpness forms, absent there) follow their order in the paper."""
from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .context import MeasureContext, derive_seed
from .norm import FANTASTIC, folded_init_model, folded_model
from .registry import register_measure
from .weights import weight_names

N_MC = 10             # Monte Carlo draws of the Gaussian noise per radius
SUBSAMPLE = 1000      # training examples every search evaluates on
TARGET_DROP = 0.1     # allowed drop of training accuracy
TOLERANCE = 0.01      # stop when |drop - TARGET_DROP| <= TOLERANCE
BISECT_STEPS = 15     # at most this many bisection steps once a [r, 2r] bracket is found
START, FLOOR, CAP = 1.0, 2.0 ** -20, 2.0 ** 10   # first radius tried, and the bracket limits
EPS_MAG = 1e-3        # epsilon of the magnitude-aware noise and box
ASCENT_STEPS = 10     # projected sign-gradient ascent steps per box radius
ASCENT_STEP_SIZE = 0.25   # step, as a fraction of the box half-width
EVAL_BATCH = 500      # examples per forward pass


class FlatModel:
    """A model as a function of one flat vector holding the weights of its Linear/Conv layers, in forward order;
    its other parameters (biases, unfolded BatchNorms) keep their values."""

    def __init__(self, model: nn.Module):
        self.model = model.eval()
        params = dict(model.named_parameters())
        self.names = weight_names(model)
        self.shapes = [params[n].shape for n in self.names]
        self.w = torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def params(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The weights for functional_call with the values in `flat` (the other parameters are the model's)."""
        chunks = flat.split([math.prod(s) for s in self.shapes])
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes)}

    def logits(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Outputs of the model with weights `flat` on `x`, in batches."""
        p = self.params(flat)
        return torch.cat([torch.func.functional_call(self.model, p, (x[i:i + EVAL_BATCH],))
                          for i in range(0, len(x), EVAL_BATCH)])

    @torch.no_grad()
    def accuracy(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> float:
        """Training accuracy of the model with weights `flat` on (x, y)."""
        return float((self.logits(flat, x).argmax(1) == y).float().mean())


def noise_generator(ctx: MeasureContext, key: str) -> torch.Generator:
    """A CPU generator seeded from the context's seed and `key`, the same whichever measure runs first."""
    return torch.Generator().manual_seed(derive_seed(ctx.seed, key))


# --- the radius search --------------------------------------------------------------------------------
def radius_steps(start: float = START, floor: float = FLOOR, cap: float = CAP) -> Generator[float, float, float]:
    """The radius search as a coroutine: yields each radius to try, is sent drop(radius), returns the largest
    radius r with drop(r) <= TARGET_DROP: double or halve from `start` to bracket it in [r, 2r] (clamped to
    [floor, cap]), then bisect until |drop - TARGET_DROP| <= TOLERANCE or BISECT_STEPS. search_radius drives it
    for one model; measures/batched.py drives one per model of a stack, every drop of a step in one forward."""
    r = start
    d = yield r
    grow = d <= TARGET_DROP
    while abs(d - TARGET_DROP) > TOLERANCE:
        nxt = r * 2 if grow else r / 2
        if not floor <= nxt <= cap:
            return r
        r, d = nxt, (yield nxt)
        if (d <= TARGET_DROP) != grow:
            break
    else:
        return r
    lo, hi = (r / 2, r) if grow else (r, r * 2)
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        d = yield mid
        if abs(d - TARGET_DROP) <= TOLERANCE:
            return mid
        lo, hi = (mid, hi) if d <= TARGET_DROP else (lo, mid)
    return lo


def search_radius(drop: Callable[[float], float], *, check: Callable[[], None] = lambda: None,
                  start: float = START, floor: float = FLOOR, cap: float = CAP) -> float:
    """Largest radius r with drop(r) <= TARGET_DROP (radius_steps, with `check` before every drop but the first)."""
    steps = radius_steps(start, floor, cap)
    r = next(steps)
    d = drop(r)
    while True:
        try:
            r = steps.send(d)
        except StopIteration as done:
            return done.value
        check()
        d = drop(r)


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
    """The largest sigma whose Gaussian weight noise (std sigma, or sqrt(sigma^2 w_i^2 + eps^2) when
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
    """Gradient in u of the mean cross-entropy of the model with weights w + u on (x, y), accumulated
    batch by batch to bound memory, and the accuracy of that model."""
    grad, correct = torch.zeros_like(u), 0
    for i in range(0, len(x), EVAL_BATCH):
        ui = u.detach().requires_grad_(True)
        out = torch.func.functional_call(fm.model, fm.params(fm.w + ui), (x[i:i + EVAL_BATCH],))
        loss = F.cross_entropy(out, y[i:i + EVAL_BATCH], reduction="sum") / len(x)
        grad += torch.autograd.grad(loss, ui)[0]
        correct += int((out.argmax(1) == y[i:i + EVAL_BATCH]).sum())
    return grad, correct / len(x)


@dataclass
class Accuracies:
    """What a search asks for: the training accuracy of the model at each row of `weights` [K, P]."""

    weights: torch.Tensor


@dataclass
class Gradient:
    """What a search asks for: the gradient in u of the mean cross-entropy at weights w + u, and the accuracy there."""

    u: torch.Tensor


Request = Accuracies | Gradient


def answer(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, request: Request
           ) -> list[float] | tuple[torch.Tensor, float]:
    """A search's request answered on one model: [accuracy per row] or (gradient, accuracy)."""
    if isinstance(request, Gradient):
        return loss_gradient(fm, request.u, x, y)
    return [fm.accuracy(flat, x, y) for flat in request.weights]


def drive(search: Generator[Request, Any, Any], fm: FlatModel, x: torch.Tensor, y: torch.Tensor) -> Any:
    """Run one search coroutine on one model, answering each request in turn; its return value."""
    try:
        request = next(search)
        while True:
            request = search.send(answer(fm, x, y, request))
    except StopIteration as done:
        return done.value


def ascent(fm: FlatModel, radius: float | torch.Tensor, start: torch.Tensor, steps: int = ASCENT_STEPS,
           settled: Callable[[float], bool] = lambda worst: False
           ) -> Generator[Request, Any, tuple[torch.Tensor, float]]:
    """ascend_in_box as a coroutine of requests (so that measures/batched.py can run many at once)."""
    u, worst = radius * start, 1.0
    for _ in range(steps):
        grad, acc = yield Gradient(u)
        worst = min(worst, acc)
        if settled(worst):
            return u, worst
        u = torch.clamp(u + ASCENT_STEP_SIZE * radius * grad.sign(), -radius, radius)
    (last,) = yield Accuracies((fm.w + u).unsqueeze(0))
    return u, min(worst, last)


def ascend_in_box(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, radius: float | torch.Tensor,
                  start: torch.Tensor, steps: int = ASCENT_STEPS,
                  settled: Callable[[float], bool] = lambda worst: False) -> tuple[torch.Tensor, float]:
    """Projected sign-gradient ascent of the cross-entropy over the box |u_i| <= radius_i (a scalar, or one
    half-width per weight), from u = radius * start (start in [-1, 1]^P); returns the final u and the lowest
    training accuracy met on the way. It stops early once `settled(worst)` says the caller's decision can no
    longer change (the lowest accuracy only falls with more steps)."""
    return drive(ascent(fm, radius, start, steps, settled), fm, x, y)


def box_loss(fm: FlatModel, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> float:
    """Cross-entropy on (x, y) of the model with weights w + u."""
    with torch.no_grad():
        return float(F.cross_entropy(fm.logits(fm.w + u, x), y))


def box_radius(w: torch.Tensor, a: float, magnitude: bool) -> float | torch.Tensor:
    """Half-widths of the box: a for every weight, or a |w_i| + eps when `magnitude` (Jiang et al. 2020,
    magnitude-aware sharpness; the box analogue of the noise std sqrt(sigma'^2 w_i^2 + eps^2))."""
    return a * w.abs() + EPS_MAG if magnitude else a


def sharpness_alpha(model: nn.Module, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator, *,
                    magnitude: bool = False, check: Callable[[], None] = lambda: None) -> float:
    """The largest alpha such that the worst case found by gradient ascent over the box |u_i| <= alpha (or
    |u_i| <= alpha |w_i| + eps when `magnitude`) lowers the training accuracy on (x, y) by at most TARGET_DROP."""
    fm = FlatModel(model)
    start = (2 * torch.rand(fm.w.numel(), generator=generator, dtype=fm.w.dtype) - 1).to(fm.w.device)
    acc0 = fm.accuracy(fm.w, x, y)

    def too_far(worst: float) -> bool:  # the search's "drop above target, outside tolerance", as it computes it
        return (acc0 - worst) - TARGET_DROP > TOLERANCE

    def drop(a: float) -> float:
        return acc0 - ascend_in_box(fm, x, y, box_radius(fm.w, a, magnitude), start, settled=too_far)[1]

    return search_radius(drop, check=check)


# --- the searches as coroutines (one per model of a stack: measures/batched.py) ---------------------------
def gaussian_search(fm: FlatModel, generator: torch.Generator, magnitude: bool = False
                    ) -> Generator[Request, Any, float]:
    """pacbayes_sigma as a coroutine of requests: the same noise draws, drops and decisions, each radius's N_MC
    perturbed models asked for at once."""
    z = torch.randn(N_MC, fm.w.numel(), generator=generator, dtype=fm.w.dtype).to(fm.w.device)
    w2 = fm.w ** 2
    (acc0,) = yield Accuracies(fm.w.unsqueeze(0))
    steps = radius_steps()
    s = next(steps)
    while True:
        scale = torch.sqrt(s ** 2 * w2 + EPS_MAG ** 2) if magnitude else s
        accs = yield Accuracies(fm.w + scale * z)
        try:
            s = steps.send(acc0 - float(np.mean(accs)))
        except StopIteration as done:
            return done.value


def box_search(fm: FlatModel, generator: torch.Generator, magnitude: bool = False) -> Generator[Request, Any, float]:
    """sharpness_alpha as a coroutine of requests: the same starting point, ascents, early stops and decisions."""
    start = (2 * torch.rand(fm.w.numel(), generator=generator, dtype=fm.w.dtype) - 1).to(fm.w.device)
    (acc0,) = yield Accuracies(fm.w.unsqueeze(0))

    def too_far(worst: float) -> bool:
        return (acc0 - worst) - TARGET_DROP > TOLERANCE

    steps = radius_steps()
    a = next(steps)
    while True:
        _, worst = yield from ascent(fm, box_radius(fm.w, a, magnitude), start, settled=too_far)
        try:
            a = steps.send(acc0 - worst)
        except StopIteration as done:
            return done.value


# --- per-model memos ----------------------------------------------------------------------------------
def _searched(ctx: MeasureContext, key: str, search: Callable[..., float], magnitude: bool = False) -> float:
    """`search` (pacbayes_sigma or sharpness_alpha) on this model's training subsample, run once per model and
    shared by every measure that needs its result (`key` also seeds its noise)."""
    def compute() -> float:
        x, y = ctx.subsample(SUBSAMPLE)
        return search(folded_model(ctx), x, y, noise_generator(ctx, key), magnitude=magnitude, check=ctx.check_time)

    return ctx.memo(key, compute)


def sigma(ctx: MeasureContext) -> float:
    """The PAC-Bayes sigma of this model, shared by pacbayes.init / orig / flatness."""
    return _searched(ctx, "pacbayes.sigma", pacbayes_sigma)


def mag_sigma(ctx: MeasureContext) -> float:
    """The magnitude-aware sigma' of this model, shared by the pacbayes.mag_* measures."""
    return _searched(ctx, "pacbayes.mag_sigma", pacbayes_sigma, magnitude=True)


def alpha(ctx: MeasureContext) -> float:
    """The sharpness box radius alpha of this model, shared by sharpness.init / orig / flatness."""
    return _searched(ctx, "sharpness.alpha", sharpness_alpha)


def mag_alpha(ctx: MeasureContext) -> float:
    """The magnitude-aware box scale alpha' of this model, shared by the sharpness.mag_* measures."""
    return _searched(ctx, "sharpness.mag_alpha", sharpness_alpha, magnitude=True)


def flat_weights(ctx: MeasureContext, init: bool) -> torch.Tensor:
    """The weights of the folded model (minus those of the folded init model when `init`), float64."""
    w = FlatModel(folded_model(ctx)).w.double()
    if init:
        w = w - FlatModel(folded_init_model(ctx)).w.double().to(w.device)
    return w


# --- the bounds ---------------------------------------------------------------------------------------
def pacbayes_bound(sq_norm: float, sigma_: float, m: int) -> float:
    """||v||^2 / (4 sigma^2) + log(m / sigma) + 10 (Jiang et al. 2020, eq. 48-49)."""
    return sq_norm / (4 * sigma_ ** 2) + math.log(m / sigma_) + 10


def sharpness_bound(sq_norm: float, alpha_: float, omega: int, m: int) -> float:
    """||v||^2 log(2 omega) / (4 alpha^2) + log(m / alpha) + 10 (Jiang et al. 2020, eq. 50-51)."""
    return sq_norm * math.log(2 * omega) / (4 * alpha_ ** 2) + math.log(m / alpha_) + 10


def magnitude_bound(ref: torch.Tensor, dist: torch.Tensor, scale: float, m: int, extra: float) -> float:
    """1/4 sum_i log[(eps^2 + (s^2 + extra) ||ref||^2 / omega) / (eps^2 + s^2 dist_i^2)] + log(m / s) + 10,
    omega = number of weights: the magnitude-aware bounds (extra = 1 for PAC-Bayes, eq. 56-57; extra =
    4 log(2 omega) for sharpness, eq. 58-59). Both the init and the orig form keep dist = w - w0 in the
    denominator; only the numerator's reference vector differs (w - w0 or w)."""
    ref, dist = ref.double(), dist.double()
    omega = ref.numel()
    num = EPS_MAG ** 2 + (scale ** 2 + extra) * float(ref.square().sum()) / omega
    den = EPS_MAG ** 2 + scale ** 2 * dist.square()
    return float(torch.log(num / den).sum()) / 4 + math.log(m / scale) + 10


def mag_pacbayes_bound(ref: torch.Tensor, dist: torch.Tensor, sigma_: float, m: int) -> float:
    """1/4 sum_i log[(eps^2 + (s'^2 + 1) ||ref||^2 / omega) / (eps^2 + s'^2 (w_i - w0_i)^2)] + log(m/s') + 10."""
    return magnitude_bound(ref, dist, sigma_, m, 1.0)


def mag_sharpness_bound(ref: torch.Tensor, dist: torch.Tensor, alpha_: float, m: int) -> float:
    """1/4 sum_i log[(eps^2 + (a'^2 + 4 log(2 omega)) ||ref||^2 / omega) / (eps^2 + a'^2 (w_i - w0_i)^2)]
    + log(m/a') + 10."""
    return magnitude_bound(ref, dist, alpha_, m, 4 * math.log(2 * ref.numel()))


def batched(key: str) -> Callable[[list[MeasureContext]], None]:
    """The batched implementation of the measures sharing the search `key`: that search for a group of models at
    once (measures/batched.py), each result left in its model's memo, where `_searched` finds it."""
    def prepare(ctxs: list[MeasureContext]) -> None:
        from .batched import prepare_search  # batched.py builds on this module
        prepare_search(key, ctxs)

    return prepare


TRAIN = ("train_data",)
TRAIN_INIT = ("train_data", "init_weights")
SIGMA, MAG_SIGMA = batched("pacbayes.sigma"), batched("pacbayes.mag_sigma")
ALPHA, MAG_ALPHA = batched("sharpness.alpha"), batched("sharpness.mag_alpha")


# --- PAC-Bayes (Gaussian noise) -----------------------------------------------------------------------
@register_measure("pacbayes.init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=SIGMA)
def init(ctx: MeasureContext) -> float:
    """||w - w0||^2 / (4 sigma^2) + log(m / sigma) + 10, sigma the largest noise std costing <= 0.1 accuracy (eq. 48).

    w: the weights of the BN-folded Linear/Conv layers (no biases); m: the training-set size."""
    return pacbayes_bound(float(flat_weights(ctx, True).square().sum()), sigma(ctx), ctx.num_train)


@register_measure("pacbayes.orig", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=SIGMA)
def orig(ctx: MeasureContext) -> float:
    """||w||^2 / (4 sigma^2) + log(m / sigma) + 10, sigma the largest noise std costing <= 0.1 accuracy (eq. 49).

    w: the weights of the BN-folded Linear/Conv layers (no biases); m: the training-set size."""
    return pacbayes_bound(float(flat_weights(ctx, False).square().sum()), sigma(ctx), ctx.num_train)


@register_measure("pacbayes.flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=SIGMA)
def flatness(ctx: MeasureContext) -> float:
    """1 / sigma^2, sigma the largest Gaussian weight-noise std costing <= 0.1 training accuracy (eq. 53)."""
    return 1.0 / sigma(ctx) ** 2


@register_measure("pacbayes.mag_init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_SIGMA)
def mag_init(ctx: MeasureContext) -> float:
    """1/4 sum_i log[(eps^2 + (s'^2+1)||w-w0||^2/omega) / (eps^2 + s'^2 (w_i-w0_i)^2)] + log(m/s') + 10 (eq. 56).

    s' is the largest scale whose noise N(0, s'^2 w_i^2 + eps^2) costs <= 0.1 accuracy; eps = 1e-3; omega the
    number of weights."""
    dist = flat_weights(ctx, True)
    return mag_pacbayes_bound(dist, dist, mag_sigma(ctx), ctx.num_train)


@register_measure("pacbayes.mag_orig", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_SIGMA)
def mag_orig(ctx: MeasureContext) -> float:
    """1/4 sum_i log[(eps^2 + (s'^2+1)||w||^2/omega) / (eps^2 + s'^2 (w_i-w0_i)^2)] + log(m/s') + 10 (eq. 57).

    As in the paper's eq. 57 and the reference code (`_pacbayes_mag_bound`, whose denominator is always built
    from `dist_w_vec`), only the numerator changes from mag_init: the denominator keeps w_i - w0_i, so this
    measure needs the init weights too."""
    return mag_pacbayes_bound(flat_weights(ctx, False), flat_weights(ctx, True), mag_sigma(ctx), ctx.num_train)


@register_measure("pacbayes.mag_flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_SIGMA)
def mag_flatness(ctx: MeasureContext) -> float:
    """1 / s'^2, s' the largest scale whose noise std sqrt(s'^2 w_i^2 + eps^2) costs <= 0.1 accuracy (eq. 61)."""
    return 1.0 / mag_sigma(ctx) ** 2


# --- sharpness (worst case in a box) ------------------------------------------------------------------
@register_measure("sharpness.init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=ALPHA)
def sharpness_init(ctx: MeasureContext) -> float:
    """||w - w0||^2 log(2 omega) / (4 alpha^2) + log(m / alpha) + 10, alpha the sharpness box radius (eq. 50).

    alpha: the largest box |u_i| <= alpha whose ascent-found worst case costs <= 0.1 training accuracy; omega:
    the number of weights. The paper writes log(m/sigma) in the last term; alpha stands in for sigma, as sigma
    does for the confidence delta in the reference code's PAC-Bayes bounds."""
    w = flat_weights(ctx, True)
    return sharpness_bound(float(w.square().sum()), alpha(ctx), w.numel(), ctx.num_train)


@register_measure("sharpness.orig", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=ALPHA)
def sharpness_orig(ctx: MeasureContext) -> float:
    """||w||^2 log(2 omega) / (4 alpha^2) + log(m / alpha) + 10, alpha the sharpness box radius (eq. 51)."""
    w = flat_weights(ctx, False)
    return sharpness_bound(float(w.square().sum()), alpha(ctx), w.numel(), ctx.num_train)


@register_measure("sharpness.flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=ALPHA)
def sharpness_flatness(ctx: MeasureContext) -> float:
    """1 / alpha^2, alpha the largest box |u_i| <= alpha whose worst case costs <= 0.1 accuracy (eq. 52).

    The worst case is found by projected sign-gradient ascent of the training cross-entropy."""
    return 1.0 / alpha(ctx) ** 2


@register_measure("sharpness.mag_init", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_ALPHA)
def sharpness_mag_init(ctx: MeasureContext) -> float:
    """Magnitude-aware sharpness bound from w - w0 (eq. 58), a' the magnitude-aware box scale.

    1/4 sum_i log[(eps^2 + (a'^2 + 4 log(2 omega)) ||w-w0||^2 / omega) / (eps^2 + a'^2 (w_i-w0_i)^2)]
    + log(m/a') + 10, omega the number of weights. a': the largest scale whose magnitude-aware box
    |u_i| <= a' |w_i| + eps (eps = 1e-3) has an ascent-found worst case costing <= 0.1 training accuracy.
    The paper's log(2 omega / delta) is taken with delta = 1, as its eq. 50-51 write log(2 omega)."""
    dist = flat_weights(ctx, True)
    return mag_sharpness_bound(dist, dist, mag_alpha(ctx), ctx.num_train)


@register_measure("sharpness.mag_orig", needs=TRAIN_INIT, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_ALPHA)
def sharpness_mag_orig(ctx: MeasureContext) -> float:
    """Magnitude-aware sharpness bound from w (eq. 59), a' the magnitude-aware box scale.

    1/4 sum_i log[(eps^2 + (a'^2 + 4 log(2 omega)) ||w||^2 / omega) / (eps^2 + a'^2 (w_i-w0_i)^2)]
    + log(m/a') + 10. Like pacbayes.mag_orig, only the numerator differs from the init form; the denominator
    keeps w_i - w0_i, so this measure needs the init weights."""
    return mag_sharpness_bound(flat_weights(ctx, False), flat_weights(ctx, True), mag_alpha(ctx), ctx.num_train)


@register_measure("sharpness.mag_flatness", needs=TRAIN, citation=FANTASTIC, higher_means="larger_gap",
                  batched=MAG_ALPHA)
def sharpness_mag_flatness(ctx: MeasureContext) -> float:
    """1 / a'^2, a' the largest box |u_i| <= a' |w_i| + eps whose worst case costs <= 0.1 accuracy (eq. 60)."""
    return 1.0 / mag_alpha(ctx) ** 2
