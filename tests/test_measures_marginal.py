"""The marginal-likelihood PAC-Bayes bound: the NNGP kernel against random genbench MLPs and a hand-worked
depth-1 case, EP against exact orthant probabilities, the bound by hand, and the measure on the digits zoo."""
from __future__ import annotations

import dataclasses
import itertools
import math
from functools import partial

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.stats import multivariate_normal

from genbench.errors import GenbenchError
from genbench.harness import check_measure
from genbench.harness.evaluate import run_measure
from genbench.measures import marginal as ml
from genbench.measures.context import TrainingSet
from genbench.measures.registry import get_measure
from genbench.models import build_model
from genbench.models.mlp import MLP
from helpers import measure_context

NAME = "pacbayes.marginal_likelihood"


@pytest.fixture
def one_thread():
    """Many tiny forward passes: with 2 threads on 2 shared cores each costs ~50 ms of spinning, with 1 ~0.1 ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- the NNGP kernel ------------------------------------------------------------------------------------
def spread_inputs(d: int, scale: float = 0.3) -> torch.Tensor:
    """Four inputs at angles 0, 180 and 90 degrees to the first, and one in between, of different norms; the first
    has x.x / d = scale^2, small enough that the first layer's bias (1/(3 d)) is a fifth of its kernel."""
    g = torch.Generator().manual_seed(0)
    u, v = torch.randn(d, generator=g), torch.randn(d, generator=g)
    v -= (v @ u) / (u @ u) * u
    x = torch.stack([u, -u, v, 2 * u + v])
    return x / u.norm() * math.sqrt(d) * scale


@pytest.mark.parametrize("batchnorm,dropout", [(False, 0.0), (True, 0.5)])
def test_nngp_kernel_matches_random_genbench_mlps(batchnorm, dropout, one_thread):
    # 4000 genbench MLPs (in 40, width 256, depth 2), default init, eval mode: 40,000 logits per input (10 per
    # net) give the second moments E[f(x) f(x')] to ~1% (one standard error). Every entry must lie within 4
    # standard errors of the kernel (seen: at most 2.6; the entries share their samples, so the 16 are not 16
    # independent tries). The width-256 network's bias (O(1/width)) and the first layer's non-Gaussian (uniform)
    # pre-activations are within that. Kernels with one thing wrong are 10 to 540 standard errors away: no bias
    # in the first layer, a first-layer bias of the hidden fan-in, no hidden biases, depth 1, biases x3.
    x = spread_inputs(40)
    outs = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for _ in range(4000):
            net = MLP(in_shape=[40], num_classes=10, width=256, depth=2, batchnorm=batchnorm, dropout=dropout).eval()
            with torch.no_grad():
                outs.append(net(x))
    f = torch.stack(outs).double().permute(0, 2, 1).reshape(-1, 4)
    prod = f[:, :, None] * f[:, None, :]
    mc, se = prod.mean(0), prod.std(0) / math.sqrt(len(f))
    spec = ml.mlp_spec(net)

    def z(s: ml.NNGPSpec) -> float:
        return float(((mc - ml.nngp_kernel(x.double(), s)) / se).abs().max())

    assert z(spec) < 4
    b1, hidden = spec.bias_var[0], spec.bias_var[1:]
    wrong = [dataclasses.replace(spec, bias_var=(0.0, *hidden)), dataclasses.replace(spec, bias_var=(1 / 768, *hidden)),
             dataclasses.replace(spec, bias_var=(b1, 0.0, 0.0)), ml.pytorch_default_spec(40, 256, 1),
             dataclasses.replace(spec, bias_var=tuple(3 * b for b in spec.bias_var))]
    assert min(z(w) for w in wrong) > 8


def test_variances_are_those_of_the_default_pytorch_init():
    net = MLP(in_shape=[40], num_classes=10, width=2048, depth=2, batchnorm=True)
    spec = ml.mlp_spec(net)
    assert spec.weight_var == pytest.approx((1 / 3,) * 3)
    assert spec.bias_var == pytest.approx((1 / 120, 1 / 6144, 1 / 6144))
    assert spec.bn_scale == pytest.approx(1 / (1 + 1e-5)) and spec.depth == 2
    w, b = net.blocks[1].fc.weight.detach().double(), net.blocks[1].fc.bias.detach().double()
    assert float(w.abs().max()) <= 1 / math.sqrt(2048) and float(b.abs().max()) <= 1 / math.sqrt(2048)
    assert float(w.var()) * 2048 == pytest.approx(1 / 3, rel=0.01)   # 4M draws: sd of the estimate ~0.1%
    spec = ml.mlp_spec(MLP(in_shape=[4, 10], num_classes=3, width=8, depth=1))
    assert spec.bias_var == pytest.approx((1 / 120, 1 / 24))
    assert ml.mlp_spec(MLP(in_shape=[5], num_classes=3, width=8, depth=1)).bn_scale == 1.0


def test_arccos_recursion_for_depth_1_by_hand():
    # in 2, width 4, depth 1: K0 = 1/6 + x.x'/6 (sigma_b^2 = 1/(3*2), sigma_w^2 / d_in = 1/6); head: 1/12 + J/3.
    # x1 = (1, 0), x2 = (0, 1), x3 = (-1, 0): K0 = 1/3 on the diagonal, K0_12 = 1/6 (angle pi/3), K0_13 = 0 (pi/2).
    # J = sqrt(k k') (sin t + (pi - t) cos t) / (2 pi): J_11 = 1/6, J_12 = (sqrt3/2 + pi/3) / (6 pi), J_13 = 1/(6 pi).
    spec = ml.mlp_spec(MLP(in_shape=[2], num_classes=2, width=4, depth=1))
    k = ml.nngp_kernel(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64), spec)
    assert float(k[0, 0]) == pytest.approx(5 / 36, rel=1e-12)                       # 0.138889
    assert float(k[0, 1]) == pytest.approx(0.11716654339134608, rel=1e-12)          # 1/12 + (sqrt3/2 + pi/3)/(18 pi)
    assert float(k[0, 2]) == pytest.approx(0.10101721589909948, rel=1e-12)          # 1/12 + 1/(18 pi)
    assert float(k[1, 2]) == pytest.approx(float(k[0, 1]), rel=1e-12)
    assert torch.equal(k, k.T)


@pytest.mark.parametrize("rho", [-0.95, -0.7, 0.0, 0.4, 0.99])
def test_relu_expectation_against_numerical_integration(rho):
    cov = np.array([[2.0, rho * math.sqrt(2.0 * 0.5)], [rho * math.sqrt(2.0 * 0.5), 0.5]])
    dens = multivariate_normal(mean=[0, 0], cov=cov).pdf
    exact, _ = integrate.dblquad(lambda v, u: u * v * dens([u, v]), 0, 12, 0, 12, epsabs=1e-11)
    got = ml.relu_expectation(torch.tensor(cov))
    assert float(got[0, 1]) == pytest.approx(exact, rel=1e-6, abs=1e-9)
    assert float(got[0, 0]) == pytest.approx(1.0) and float(got[1, 1]) == pytest.approx(0.25)


# --- expectation propagation ----------------------------------------------------------------------------
def exact_log_p(k: torch.Tensor, y: torch.Tensor) -> float:
    """log P(y_i f_i > 0 for all i), f ~ N(0, K): the normal CDF of N(0, D K D) at 0, D = diag(y)."""
    n = len(y)
    c = (y[:, None] * k * y[None, :]).numpy()
    if n == 2:  # Sheppard: 1/4 + asin(rho) / (2 pi)
        return math.log(0.25 + math.asin(c[0, 1] / math.sqrt(c[0, 0] * c[1, 1])) / (2 * math.pi))
    return math.log(multivariate_normal.cdf(np.zeros(n), mean=np.zeros(n), cov=c, abseps=1e-7, releps=1e-6, rng=0))


def test_ep_is_exact_for_one_point_and_for_independent_points():
    assert ml.ep_log_marginal(torch.tensor([[3.7]], dtype=torch.float64),
                              torch.tensor([-1.0])).log_z == pytest.approx(math.log(0.5), abs=1e-12)
    k = torch.diag(torch.tensor([0.5, 2.0, 1.0, 9.0], dtype=torch.float64))
    r = ml.ep_log_marginal(k, torch.tensor([1.0, -1.0, -1.0, 1.0]))
    assert r.converged and r.log_z == pytest.approx(-4 * math.log(2), abs=1e-10)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ep_against_exact_orthant_probabilities(n):
    # NNGP (depth 3) kernels of random inputs have correlations 0.87-0.95, where EP is at its worst: over every
    # labeling, EP's log P is within 0.08 nats of the exact value (seen: 0.048, 0.061, 0.069 for n = 2, 3, 4; the
    # worst is the labeling where all points agree, whose probability EP underestimates by 5-7%); the mean error
    # over labelings is below 0.03 nats (seen: 0.026, 0.016, 0.011).
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 8, generator=g, dtype=torch.float64)
    k = ml.nngp_kernel(x, ml.pytorch_default_spec(8, 64, 3))
    errors, total = [], 0.0
    for labels in itertools.product([-1.0, 1.0], repeat=n):
        y = torch.tensor(labels, dtype=torch.float64)
        exact = exact_log_p(k, y)
        total += math.exp(exact)
        r = ml.ep_log_marginal(k, y)
        assert r.converged
        errors.append(r.log_z - exact)
    assert total == pytest.approx(1.0, abs=1e-5)   # the exact values partition the probability
    assert max(map(abs, errors)) < 0.08 and float(np.mean(np.abs(errors))) < 0.03, errors


@pytest.mark.parametrize("rho,tol", [(0.1, 1e-4), (0.5, 3e-3), (0.9, 0.04), (-0.9, 0.005)])
def test_ep_error_grows_with_correlation_on_two_points(rho, tol):
    # log P(f1 > 0, f2 > 0) = log(1/4 + asin(rho) / (2 pi)); EP errs by ~1e-5 at rho 0.1, 0.002 at 0.5, 0.03 at 0.9
    k = torch.tensor([[1.0, rho], [rho, 1.0]], dtype=torch.float64)
    r = ml.ep_log_marginal(k, torch.tensor([1.0, 1.0]))
    assert abs(r.log_z - math.log(0.25 + math.asin(rho) / (2 * math.pi))) < tol


def test_ep_log_z_is_the_gaussian_integral_of_its_sites():
    # log Z_EP = sum_i log Z~_i + log N(mu~; 0, K + Sigma~), with Z~_i the site normalisers (R&W eq. 3.58), computed
    # here from scratch by scipy from EP's final sites: the same number as EP's closed form (R&W eq. 3.65).
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 5, generator=g, dtype=torch.float64)
    k = ml.nngp_kernel(x, ml.pytorch_default_spec(5, 32, 2))
    y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0])
    r = ml.ep_log_marginal(k, y, tol=1e-12)
    tau, nu, kk = r.site_precision.numpy(), r.site_shift.numpy(), k.numpy()
    assert (tau > 0).all()
    sigma = np.linalg.inv(np.linalg.inv(kk) + np.diag(tau))
    var, mu = np.diag(sigma), sigma @ nu
    tau_c = 1 / var - tau
    var_c, mu_c = 1 / tau_c, (mu / var - nu) / tau_c
    var_s, mu_s = 1 / tau, nu / tau
    from scipy.stats import norm
    log_zhat = norm.logcdf(y.numpy() * mu_c / np.sqrt(var_c))
    log_zsite = log_zhat + 0.5 * np.log(2 * np.pi * (var_c + var_s)) + (mu_c - mu_s) ** 2 / (2 * (var_c + var_s))
    direct = log_zsite.sum() + multivariate_normal(mean=np.zeros(7), cov=kk + np.diag(var_s)).logpdf(mu_s)
    assert r.log_z == pytest.approx(direct, abs=1e-8)


def test_ep_fixed_point_does_not_depend_on_damping():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(200, 10, generator=g, dtype=torch.float64)
    k = ml.nngp_kernel(x, ml.pytorch_default_spec(10, 64, 3))
    y = torch.where(x[:, 0] + 0.5 * torch.randn(200, generator=g, dtype=torch.float64) > 0, 1.0, -1.0)
    a, b = ml.ep_log_marginal(k, y, damping=1.0), ml.ep_log_marginal(k, y, damping=0.5)
    assert a.converged and b.converged and a.log_z == pytest.approx(b.log_z, rel=1e-6)


# --- the bound ------------------------------------------------------------------------------------------
def test_bound_by_hand():
    # log P = -10, m = 100, delta = 2^-10: ln(2m/delta) = 11 ln 2 + 2 ln 10 = 12.229789; (10 + 12.229789) / 99 =
    # 0.2245433; 1 - exp(-0.2245433) = 0.2011190
    assert ml.bound(-10.0, 100) == pytest.approx(0.2011190355, rel=1e-9)
    # the code's form: (10 + 2 ln 100 + 1 + 10 ln 2) / 100 = 0.2714181; 1 - exp(-0.2714181) = 0.2377023
    assert ml.bound(-10.0, 100, form="code") == pytest.approx(0.2377023035, rel=1e-9)
    assert ml.bound(-10.0, 100, delta=0.05) == pytest.approx(1 - math.exp(-(10 + math.log(4000)) / 99), rel=1e-12)
    assert ml.bound(-20.0, 100) > ml.bound(-10.0, 100)
    with pytest.raises(GenbenchError, match="at least 2"):
        ml.bound(-1.0, 1)
    with pytest.raises(GenbenchError, match="'paper' or 'code'"):
        ml.bound(-1.0, 10, form="mcallester")


def test_binary_labels_split_the_classes_in_halves():
    assert ml.binary_labels(torch.arange(10), 10).tolist() == [1.0] * 5 + [-1.0] * 5
    assert ml.binary_labels(torch.tensor([0, 1, 2]), 3).tolist() == [1.0, -1.0, -1.0]


# --- the measure ----------------------------------------------------------------------------------------
def digits_like(n: int = 120, seed: int = 0) -> TrainingSet:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    y = (x[:, :2].sum(1) > 0).long() * 5 + torch.randint(0, 5, (n,), generator=g)   # class < 5 iff sum < 0
    return TrainingSet(x, y, num_classes=10)


context = partial(measure_context, measure=NAME, needs=("train_data",))


def test_measure_depends_on_architecture_and_data_only(monkeypatch):
    ml._CACHE.clear()
    calls = []
    real = ml.ep_log_marginal
    monkeypatch.setattr(ml, "ep_log_marginal", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    train = digits_like()
    a = ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2), train))
    b = ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2, dropout=0.3), train))
    assert a == b and len(calls) == 1                    # other weights, dropout: the same kernel, cached
    k = ml.nngp_kernel(train.x.double(), ml.pytorch_default_spec(6, 16, 2))
    k.diagonal().add_(ml.JITTER * float(k.diagonal().mean()))
    assert a == pytest.approx(ml.bound(real(k, ml.binary_labels(train.y, 10)).log_z, 120), rel=1e-9)
    perm = torch.randperm(120, generator=torch.Generator().manual_seed(1))
    permuted = TrainingSet(train.x[perm], train.y[perm], 10)   # the same set in another order: the same value
    assert ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2), permuted)) == a
    assert len(calls) == 1                                      # from the cache
    ml._CACHE.clear()
    assert ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2), permuted)) == a
    assert len(calls) == 2                                      # computed again, in the same (canonical) order
    wide = ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=64, depth=2), train))
    bn = ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2, batchnorm=True), train))
    assert len(calls) == 4 and wide != a and bn == pytest.approx(a, rel=1e-4)
    shuffled = TrainingSet(train.x, train.y[torch.randperm(120, generator=torch.Generator().manual_seed(0))], 10)
    assert ml.marginal_likelihood(context(MLP(in_shape=[6], num_classes=10, width=16, depth=2), shuffled)) > a + 0.05


def test_measure_refuses_other_families_clearly():
    cnn = build_model("cnn1d", dict(in_shape=[6], num_classes=10, channels=4, depth=2))
    ctx = context(cnn, digits_like())
    with pytest.raises(GenbenchError, match="family 'mlp'.*'cnn1d'"):
        ml.marginal_likelihood(ctx)
    out = run_measure(get_measure(NAME), ctx)
    assert out["value"] is None and out["error"].startswith("GenbenchError: pacbayes.marginal_likelihood needs")


def test_measure_is_registered_with_its_metadata():
    m = get_measure(NAME)
    assert m.needs == ("train_data",) and m.kind == "scalar" and m.higher_means == "larger_gap"
    assert "relu_rescale" in m.invariances and "Valle" in m.citation


def test_conformance_suite(digits_zoo):
    report = check_measure(NAME, digits_zoo)
    assert report.passed, str(report)


def test_random_labels_and_label_noise_raise_the_bound(digits_zoo):
    # the data test: on the same inputs, labels that carry no structure are less probable under the prior
    table = digits_zoo.table
    clean = table[(table["hp.label_noise"] == 0.0) & ~table["hp.batchnorm"]].iloc[0]
    noisy = table[(table["hp.label_noise"] > 0) & ~table["hp.batchnorm"] & (table["hp.width"] == clean["hp.width"])
                  & (table["hp.seed"] == clean["hp.seed"])].iloc[0]
    model = digits_zoo.load_model(clean["model_id"])
    train = digits_zoo.training_set(clean["model_id"])
    g = torch.Generator().manual_seed(0)
    random = TrainingSet(train.x, torch.randint(0, train.num_classes, (len(train.y),), generator=g), train.num_classes)
    true_bound = ml.marginal_likelihood(context(model, train))
    random_bound = ml.marginal_likelihood(context(model, random))
    noisy_bound = ml.marginal_likelihood(context(digits_zoo.load_model(noisy["model_id"]),
                                                 digits_zoo.training_set(noisy["model_id"])))
    assert true_bound < noisy_bound < random_bound
    assert random_bound > 0.45      # random labels: -log P(S) / m near or above ln 2, so the bound is about 1/2
