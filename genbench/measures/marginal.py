"""The marginal-likelihood PAC-Bayes bound (Valle-Pérez, Camargo & Louis 2019; Valle-Pérez & Louis 2020): a
bound on the error of the Bayesian posterior over functions, computed from P(S), the probability that a
function drawn from the architecture's prior fits the training labels.

The prior over functions is the network's NNGP: the Gaussian process a ReLU MLP's output converges to as its
width grows (Neal 1996; Lee et al. 2018), with the arc-cosine recursion of Cho & Saul 2009 for its kernel. As in
the papers, the task is binary and the likelihood a Heaviside step (the label is the sign of f), so
P(S) = P(sign f(x_i) = y_i for all i), f ~ N(0, K), and log P(S) is estimated by expectation propagation
(Rasmussen & Williams 2006, algorithms 3.5 and 3.6; parallel updates).

Conventions (what this module decides where the papers' setting differs from a genbench zoo):
- Variances: genbench's MLPs keep PyTorch's default nn.Linear init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
  weights and biases, i.e. Var(w) = sigma_w^2 / fan_in with sigma_w^2 = 1/3, and Var(b) = sigma_b^2 = 1/(3 fan_in)
  per layer. The kernel uses each layer's real fan-in (the input size for the first layer, the model's width
  after it), so it is the layer-by-layer second-moment recursion of the zoo's initialisation, taken to infinite
  width at those variances. The recursion treats pre-activations as Gaussian; with uniform weights the first
  layer's are sums of d_in + 1 uniform terms, so only nearly so (on 40 inputs, random width-256 genbench MLPs
  match the kernel within their ~1% Monte-Carlo noise: tests/test_measures_marginal.py). The papers used
  Gaussian init with sigma_w^2 = 2 or 1 and sigma_b = 0.1 or 1; only the ratios of the kernel's terms matter,
  since a Heaviside likelihood ignores the kernel's overall scale.
- BatchNorm: the prior is the network at initialisation in eval mode, where BatchNorm holds its initial
  statistics (mean 0, variance 1, weight 1, bias 0) and is the map h / sqrt(1 + eps); the kernel includes that
  factor and is otherwise the one of the same MLP without BatchNorm. Dropout is the identity in eval mode and
  is left out. So the bound sees width, depth and input size; not BatchNorm, dropout or any training setting.
- Binary labels: class y becomes +1 when y < num_classes // 2 (digits 0-4 of ten) and -1 otherwise, the
  reduction of the fragility paper's code (sofuncheung/Prior_bound: y < 5). The labels are the ones the model
  was trained on, corrupted ones included, and the inputs are un-augmented. Which readout turns the 10-logit
  network into a binary one does not matter: one logit, or the difference of the two groups' logit sums, has a
  kernel proportional to K, and the sign probabilities do not depend on the scale.
- Bound: -ln(1 - eps) <= (ln 1/P(S) + ln(2m/delta)) / (m - 1), delta = 2^-10 (Valle-Pérez et al. 2019,
  theorem 1, McAllester's realizable PAC-Bayes theorem with the posterior the prior restricted to functions
  that fit S, so that KL = ln 1/P(S)). The papers' code (guillefix/nn-pacbayes, sofuncheung/Prior_bound) uses
  (ln 1/P(S) + 2 ln m + 1 + ln 1/delta) / m instead; `bound(..., form="code")` gives that one.

The value depends on the architecture and the training set only, not on the trained weights, so it is computed
once per (kernel, inputs, binary labels) in a process and reused for every model that shares them."""
from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..errors import GenbenchError
from .context import MeasureContext
from .registry import register_measure

SIGMA_W2 = 1.0 / 3.0     # PyTorch's nn.Linear init: Var(w) = 1 / (3 fan_in) = SIGMA_W2 / fan_in
DELTA = 2.0 ** -10       # confidence of the bound, as in both papers' code
JITTER = 1e-6            # added to K's diagonal, relative to its mean (a probit noise of that variance)
MAX_SWEEPS = 200         # EP sweeps at most
TOL = 1e-7               # stop when |change of log Z| <= TOL * max(1, |log Z|) between two sweeps
DAMPING = 0.8            # site updates are damped: new = (1 - DAMPING) old + DAMPING proposed
MAX_SITE_PRECISION = 1e12   # relative to 1 / mean(diag K): caps a site's precision
CACHE_SIZE = 64          # results kept per process (each holds two float64 vectors of length n)
CITATION = "Valle-Pérez, Camargo & Louis 2019; Valle-Pérez & Louis 2020"
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# --- the NNGP kernel ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NNGPSpec:
    """The infinite-width prior of a ReLU MLP: per Linear layer (input first, readout last) sigma_w^2 and
    sigma_b^2, with Var(w) = sigma_w^2 / fan_in and Var(b) = sigma_b^2, and the factor a BatchNorm at its initial
    eval-mode state multiplies each hidden pre-activation's kernel by (1 without BatchNorm)."""

    weight_var: tuple[float, ...]
    bias_var: tuple[float, ...]
    bn_scale: float = 1.0

    @property
    def depth(self) -> int:
        """Hidden ReLU layers."""
        return len(self.weight_var) - 1


def pytorch_default_spec(in_features: int, width: int, depth: int, *, bn_eps: float | None = None) -> NNGPSpec:
    """The NNGP of input -> depth x [Linear(width), BatchNorm?, ReLU] -> Linear under PyTorch's default init."""
    fan_ins = [in_features] + [width] * depth
    return NNGPSpec(weight_var=(SIGMA_W2,) * (depth + 1), bias_var=tuple(1.0 / (3 * f) for f in fan_ins),
                    bn_scale=1.0 if bn_eps is None else 1.0 / (1.0 + bn_eps))


def mlp_spec(model: nn.Module) -> NNGPSpec:
    """The NNGP of a genbench MLP, read from its layers; a clear error for any other family."""
    family = getattr(model, "family", None)
    if family != "mlp" or not hasattr(model, "blocks") or not hasattr(model, "head"):
        raise GenbenchError(
            f"pacbayes.marginal_likelihood needs the analytic NNGP kernel of the architecture, which genbench has "
            f"for ReLU MLPs (family 'mlp') only; this model is {family or type(model).__name__!r}. Leave this measure "
            "out for zoos of other families.")
    fcs = [block.fc for block in model.blocks] + [model.head]
    if not all(isinstance(fc, nn.Linear) for fc in fcs):
        raise GenbenchError("pacbayes.marginal_likelihood: the MLP's layers are not the nn.Linear layers its family "
                            "builds; cannot read its NNGP kernel")
    bns = [block.bn for block in model.blocks if hasattr(block, "bn")]
    eps = {float(bn.eps) for bn in bns}
    if len(eps) > 1:
        raise GenbenchError("pacbayes.marginal_likelihood: BatchNorm layers with different eps are not supported")
    fan_ins = [fc.in_features for fc in fcs]
    return NNGPSpec(weight_var=(SIGMA_W2,) * len(fcs), bias_var=tuple(1.0 / (3 * f) for f in fan_ins),
                    bn_scale=1.0 / (1.0 + eps.pop()) if eps else 1.0)


def relu_expectation(k: torch.Tensor) -> torch.Tensor:
    """E[relu(u) relu(v)] for (u, v) ~ N(0, [[k_xx, k_xy], [k_xy, k_yy]]), for every pair at once: the degree-1
    arc-cosine kernel sqrt(k_xx k_yy) (sin t + (pi - t) cos t) / (2 pi), cos t = k_xy / sqrt(k_xx k_yy)
    (Cho & Saul 2009); k_xx / 2 on the diagonal."""
    diag = k.diagonal().clone()
    d = diag.clamp_min(torch.finfo(k.dtype).tiny).sqrt()
    norm = torch.outer(d, d)
    cos = (k / norm).clamp_(-1.0, 1.0)
    sin = (1.0 - cos.square()).clamp_min_(0.0).sqrt_()
    out = sin.add_((math.pi - torch.arccos(cos)).mul_(cos)).mul_(norm).div_(2 * math.pi)
    out.diagonal().copy_(diag / 2)
    return out


def nngp_kernel(x: torch.Tensor, spec: NNGPSpec) -> torch.Tensor:
    """The NNGP kernel [n, n] of the MLP's output (each logit) on inputs x [n, ...], in x's dtype and device:
    K^1 = b_1 + w_1 x.x' / d_in; K^{l+1} = b_{l+1} + w_{l+1} E[relu(u) relu(v)], (u, v) ~ N(0, bn_scale K^l)."""
    x = x.reshape(len(x), -1)
    k = (x @ x.T).mul_(spec.weight_var[0] / x.shape[1]).add_(spec.bias_var[0])
    for w, b in zip(spec.weight_var[1:], spec.bias_var[1:]):
        k = relu_expectation(k.mul_(spec.bn_scale)).mul_(w).add_(b)
    return k


# --- expectation propagation ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EPResult:
    """EP's estimate of log P(labels) under the GP, the sweeps it ran, whether it met its tolerance, and the
    final sites (precisions tau~ and shifts nu~, float64 on the CPU)."""

    log_z: float
    sweeps: int
    converged: bool
    site_precision: torch.Tensor | None = None
    site_shift: torch.Tensor | None = None


def _posterior(k: torch.Tensor, tau: torch.Tensor, nu: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Marginal variances and means of N(0, K) times the Gaussian sites (precisions tau, shifts nu), and
    sum log diag chol(B), B = I + S^1/2 K S^1/2 (R&W eq. 3.66-3.68): one Cholesky and one triangular solve."""
    s = tau.sqrt()
    sk = s[:, None] * k
    b = sk * s[None, :]
    b.diagonal().add_(1.0)
    chol, info = torch.linalg.cholesky_ex(b)
    if int(info) != 0:
        raise GenbenchError("pacbayes.marginal_likelihood: EP's matrix I + S^1/2 K S^1/2 is not positive definite "
                            "(the kernel has lost positive definiteness; raise JITTER)")
    del b
    v = torch.linalg.solve_triangular(chol, sk, upper=False)
    del sk
    var = (k.diagonal() - v.square().sum(0)).clamp_min_(torch.finfo(k.dtype).tiny)
    mu = k @ nu - v.T @ (v @ nu)
    return var, mu, chol.diagonal().log().sum()


def _tilted(y: torch.Tensor, mu_c: torch.Tensor, var_c: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """log Z_i, and r, z, 1 - r (z + r) of the tilted distributions Heaviside(y f) N(f; mu_c, var_c):
    z = y mu_c / sd_c, Z_i = Phi(z), r = N(z) / Phi(z); the tilted mean is mu_c + y sd_c r and its variance
    var_c (1 - r (z + r))."""
    z = y * mu_c / var_c.sqrt()
    log_z = torch.special.log_ndtr(z)
    r = torch.exp(-0.5 * z.square() - _LOG_SQRT_2PI - log_z)
    shrink = (1.0 - r * (z + r)).clamp_min_(1e-300)
    return log_z, r, z, shrink


def _log_z_ep(y: torch.Tensor, var: torch.Tensor, mu: torch.Tensor, tau: torch.Tensor, nu: torch.Tensor,
              logdet_half: torch.Tensor) -> float:
    """log Z_EP (R&W eq. 3.65, 3.73, 3.74) with the cavities taken from the current posterior marginals."""
    tau_c = (1.0 / var - tau).clamp_min_(torch.finfo(var.dtype).tiny)
    nu_c = mu / var - nu
    mu_c = nu_c / tau_c
    log_zi, _, _, _ = _tilted(y, mu_c, 1.0 / tau_c)
    terms = (log_zi.sum() + 0.5 * torch.log1p(tau / tau_c).sum() - logdet_half + 0.5 * (nu @ mu)
             - 0.5 * (nu.square() / (tau_c + tau)).sum()
             + 0.5 * (tau_c * (tau * mu_c.square() - 2 * mu_c * nu) / (tau + tau_c)).sum())
    return float(terms)


def ep_log_marginal(k: torch.Tensor, y: torch.Tensor, *, max_sweeps: int = MAX_SWEEPS, tol: float = TOL,
                    damping: float = DAMPING, check: Callable[[], None] = lambda: None) -> EPResult:
    """EP estimate of log P(sign f_i = y_i for all i), f ~ N(0, K), labels y in {-1, +1} (a Heaviside
    likelihood; exact for one point and for independent points). Parallel EP: every site is updated from the
    current posterior marginals, then the posterior is recomputed (one Cholesky per sweep, in K's dtype and on
    K's device); sites whose cavity precision is not positive keep their old value. Stops when log Z changes
    by at most tol * max(1, |log Z|) from one sweep to the next, or after max_sweeps."""
    y = y.to(k)
    n = len(y)
    tau, nu = torch.zeros(n, dtype=k.dtype, device=k.device), torch.zeros(n, dtype=k.dtype, device=k.device)
    var, mu = k.diagonal().clone(), torch.zeros_like(tau)
    cap = MAX_SITE_PRECISION / float(k.diagonal().mean())
    log_z, previous = math.nan, math.nan
    for sweep in range(1, max_sweeps + 1):
        check()
        tau_c = 1.0 / var - tau
        ok = tau_c > 0
        tau_c = torch.where(ok, tau_c, torch.ones_like(tau_c))
        nu_c = mu / var - nu
        mu_c, var_c = nu_c / tau_c, 1.0 / tau_c
        _, r, _, shrink = _tilted(y, mu_c, var_c)
        tau_new = (tau_c * (1.0 - shrink) / shrink).clamp_(0.0, cap)     # 1 / tilted var - cavity precision
        mu_hat = mu_c + y * var_c.sqrt() * r
        nu_new = mu_hat * (tau_new + tau_c) - nu_c                         # tilted mean / tilted var - cavity shift
        tau = torch.where(ok, (1 - damping) * tau + damping * tau_new, tau)
        nu = torch.where(ok, (1 - damping) * nu + damping * nu_new, nu)
        var, mu, logdet_half = _posterior(k, tau, nu)
        log_z = _log_z_ep(y, var, mu, tau, nu, logdet_half)
        if not math.isfinite(log_z):
            raise GenbenchError("pacbayes.marginal_likelihood: EP's log marginal likelihood became non-finite")
        if abs(log_z - previous) <= tol * max(1.0, abs(log_z)):
            return EPResult(log_z, sweep, True, tau.cpu(), nu.cpu())
        previous = log_z
    return EPResult(log_z, max_sweeps, False, tau.cpu(), nu.cpu())


# --- the bound ------------------------------------------------------------------------------------------
def bound(log_p: float, m: int, delta: float = DELTA, *, form: str = "paper") -> float:
    """The error bound eps from log P(S) on m examples: 1 - exp(-(ln 1/P + ln(2m/delta)) / (m - 1)) (form
    "paper", Valle-Pérez et al. 2019 theorem 1), or 1 - exp(-(ln 1/P + 2 ln m + 1 + ln 1/delta) / m) (form
    "code", the papers' code)."""
    if m < 2:
        raise GenbenchError(f"the marginal-likelihood bound needs at least 2 training examples, got {m}")
    if form == "paper":
        exponent = (-log_p + math.log(2 * m / delta)) / (m - 1)
    elif form == "code":
        exponent = (-log_p + 2 * math.log(m) + 1 + math.log(1 / delta)) / m
    else:
        raise GenbenchError(f"unknown form {form!r} of the marginal-likelihood bound; use 'paper' or 'code'")
    return -math.expm1(-exponent)


def binary_labels(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """+1 for classes below num_classes // 2 (digits 0-4 of ten), -1 for the others."""
    return torch.where(y < num_classes // 2, 1.0, -1.0).to(torch.float64)


# --- caching and the measure ----------------------------------------------------------------------------
_CACHE: OrderedDict[str, EPResult] = OrderedDict()


def _key(spec: NNGPSpec, x: torch.Tensor, y: torch.Tensor) -> str:
    h = hashlib.sha256(repr((spec, JITTER, MAX_SWEEPS, TOL, DAMPING, tuple(x.shape), str(x.dtype))).encode())
    h.update(x.detach().cpu().contiguous().numpy().tobytes())
    h.update(y.detach().cpu().to(torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()


def canonical_order(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A permutation that sorts the examples by their values (input components, then label): P(S) is a property of
    the set, so computing it in this order makes it exactly the same for every ordering of the same examples."""
    cols = torch.cat([x.detach().reshape(len(x), -1).cpu().double(), y.detach().cpu().double()[:, None]], 1).numpy()
    return torch.as_tensor(np.lexsort(cols.T[::-1].copy()))


def log_prob_labels(x: torch.Tensor, y: torch.Tensor, spec: NNGPSpec, *, device: str | torch.device = "cpu",
                    check: Callable[[], None] = lambda: None) -> EPResult:
    """EP's log P(labels y in {-1, +1} | inputs x) under the NNGP `spec`, in float64 on `device`, with JITTER;
    computed in `canonical_order` and kept per process for (spec, examples). The sites it returns follow that
    order."""
    order = canonical_order(x, y)
    x, y = x.detach().cpu()[order], y.detach().cpu()[order]
    key = _key(spec, x, y)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    k = nngp_kernel(x.to(device=device, dtype=torch.float64), spec)
    k.diagonal().add_(JITTER * float(k.diagonal().mean()))
    result = ep_log_marginal(k, y.to(device=device, dtype=torch.float64), check=check)
    _CACHE[key] = result
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


@register_measure("pacbayes.marginal_likelihood", needs=("train_data",), citation=CITATION,
                  higher_means="larger_gap", invariances=("relu_rescale",))
def marginal_likelihood(ctx: MeasureContext) -> float:
    """1 - exp(-(ln 1/P(S) + ln(2m/delta)) / (m-1)), P(S) the NNGP's probability of the binarised labels (EP).

    Needs a genbench MLP (a GenbenchError for other families); the same value for every model of one
    architecture trained on one set of examples, whatever its weights or training settings."""
    spec = mlp_spec(ctx.model)
    t = ctx.train
    device = ctx.device if str(ctx.device).startswith("cuda") else "cpu"
    result = log_prob_labels(t.x, binary_labels(t.y, t.num_classes), spec, device=device, check=ctx.check_time)
    if not result.converged:
        raise GenbenchError(f"pacbayes.marginal_likelihood: EP did not converge in {MAX_SWEEPS} sweeps "
                            f"(last log P = {result.log_z:.4g})")
    return bound(result.log_z, len(t.y))
