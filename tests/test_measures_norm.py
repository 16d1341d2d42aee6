"""Norm, PAC-Bayes and sharpness measures against values worked out by hand on tiny networks."""
from __future__ import annotations

import copy
import math
from functools import partial

import numpy as np
import pytest
import torch
from torch import nn

from genbench.errors import GenbenchError
from genbench.measures import norm, pacbayes as pb
from genbench.measures.context import MeasureContext, TrainingSet
from genbench.measures.registry import _MEASURES
from genbench.measures.weights import batchnorm_folded, fold_batchnorm
from genbench.models.mlp import MLP
from helpers import hand_mlp, measure_context

W1 = [[1.0, 2.0], [0.0, 3.0]]   # ||W1||_F^2 = 14, ||W1||_2^2 = 7 + 2 sqrt(10)
W2 = [[1.0, 1.0], [2.0, -1.0]]  # ||W2||_F^2 = 7,  ||W2||_2^2 = (7 + sqrt(13)) / 2
SPEC1, SPEC2 = 7 + 2 * math.sqrt(10), (7 + math.sqrt(13)) / 2
GAMMA = 1.9  # 10th percentile (linear interpolation) of the margins 1, 2, ..., 10


# the tiny net: input 2 -> Linear(2, 2) [-> BN] -> ReLU -> Linear(2, 2), weights W1, W2, biases zero unless given;
# its init for the distance measures: W1_0 = [[1, 2], [0, 0]], b1_0 = (4, 4), W2_0 = 0
INIT_WEIGHTS = [[[1.0, 2.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]


def margin_data() -> TrainingSet:
    """x = (t, 0), label 1, t = 1..10: the tiny net's hidden units stay active and the margin is exactly t."""
    t = torch.arange(1, 11, dtype=torch.float32)
    return TrainingSet(torch.stack([t, torch.zeros(10)], 1), torch.ones(10, dtype=torch.long), num_classes=2)


context = partial(measure_context, measure="norm.x", needs=("train_data", "init_weights"))


# --- norms --------------------------------------------------------------------------------------------
def test_frobenius_and_spectral_norms_match_hand_values():
    ctx = context(hand_mlp([W1, W2]), margin_data())
    assert norm.fro_prod(ctx) == pytest.approx(math.log(14 * 7))
    assert norm.fro_sum(ctx) == pytest.approx(math.log(2 * math.sqrt(14 * 7)))
    assert norm.spec_prod(ctx) == pytest.approx(math.log(SPEC1 * SPEC2))
    assert norm.spec_sum(ctx) == pytest.approx(math.log(2 * math.sqrt(SPEC1 * SPEC2)))
    assert norm.param(ctx) == pytest.approx(21.0)


def test_biases_do_not_enter_the_weight_norms():
    assert norm.param(context(hand_mlp([W1, W2], [(5.0, -5.0), (3.0, 1.0)]), margin_data())) == pytest.approx(21.0)


def bn_net() -> MLP:
    """The tiny net with a BatchNorm (eps 0) whose fold scales the rows by (2, 0.5) and shifts by (-1, 1.5)."""
    net = hand_mlp([W1, W2], batchnorm=True)
    bn = net.blocks[0].bn
    bn.eps = 0.0
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.5, -1.0]))
        bn.running_var.copy_(torch.tensor([1.0, 4.0]))
        bn.weight.copy_(torch.tensor([2.0, 1.0]))
        bn.bias.copy_(torch.tensor([0.0, 1.0]))
    return net


def test_norms_fold_batchnorm_first():
    # folded W1 = [[2, 4], [0, 1.5]]: ||.||_F^2 = 22.25; W^T W = [[4, 8], [8, 18.25]] has trace 22.25, det 9
    ctx = context(bn_net(), margin_data())
    spec1 = (22.25 + math.sqrt(22.25 ** 2 - 36)) / 2
    assert norm.param(ctx) == pytest.approx(22.25 + 7)
    assert norm.fro_prod(ctx) == pytest.approx(math.log(22.25 * 7))
    assert norm.spec_prod(ctx) == pytest.approx(math.log(spec1 * SPEC2))


def test_batchnorm_folded_in_place_computes_the_same_function_and_puts_everything_back():
    net = bn_net().eval()
    x = torch.randn(7, 2)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    params = [id(p) for p in net.parameters()]
    with batchnorm_folded(net) as folded:
        assert folded is net
        assert not any(isinstance(m, nn.BatchNorm1d) for m in net.modules())
        assert torch.allclose(net(x), fold_batchnorm(net)(x))
        inside = net(x)
    with pytest.raises(RuntimeError):
        with batchnorm_folded(net):
            raise RuntimeError("a measure fails mid-way")
    assert any(isinstance(m, nn.BatchNorm1d) for m in net.modules())
    assert [id(p) for p in net.parameters()] == params
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert torch.allclose(net(x), inside, atol=1e-6)


def test_params_counts_the_weights_only_as_the_reference_code_does():
    assert norm.params(context(hand_mlp([W1, W2]), margin_data())) == 8   # W1 and W2; biases are not counted
    assert norm.params(context(bn_net(), margin_data())) == 8    # BN scale and shift fold into W1: no count either
    conv = nn.Sequential(nn.Conv1d(3, 4, 5), nn.BatchNorm1d(4), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2))
    ctx = MeasureContext(model=conv, probe_layers=[], needs=())
    assert norm.params(ctx) == 3 * 4 * 5 + 8 * 2


def test_path_norm_sums_squared_weights_over_paths():
    # hidden: rows of W1^2 sum to (5, 9), plus b1^2 = (1, 1) -> (6, 10); out: W2^2 (6, 10) + b2^2 = (16.25, 34)
    ctx = context(hand_mlp([W1, W2], [(1.0, -1.0), (0.5, 0.0)]), margin_data())
    assert norm.path(ctx) == pytest.approx(16.25 + 34)
    assert norm.path(context(hand_mlp([W1, W2]), margin_data())) == pytest.approx(14 + 29)


def test_path_norm_uses_the_folded_batchnorm():
    # folded: W1^2 rows (20, 2.25) + b1^2 (1, 2.25) = (21, 4.5); W2^2 = [[1, 1], [4, 1]] -> 25.5 + 88.5
    assert norm.path(context(bn_net(), margin_data())) == pytest.approx(114.0)


def test_path_norm_squares_an_unfolded_batchnorm_as_an_affine_map():
    # BN before the Linear is not folded: x -> 2x - 1 per channel (mean 0.5, var 1, weight 2, bias 0)
    bn, lin = nn.BatchNorm1d(2, eps=0.0), nn.Linear(2, 1)
    with torch.no_grad():
        bn.running_mean.fill_(0.5)
        bn.weight.fill_(2.0)
        bn.bias.zero_()
        lin.weight.copy_(torch.tensor([[1.0, -3.0]]))
        lin.bias.fill_(2.0)
    model = nn.Sequential(bn, lin).eval()
    # squared: each channel 4 * 1 + 1 = 5; output 1 * 5 + 9 * 5 + 4
    assert norm.path_norm_value(model, [2]) == pytest.approx(54.0)
    assert model[0].weight[0].item() == 2.0  # the model itself is untouched


def test_margin_forms_divide_by_gamma_squared():
    ctx = context(hand_mlp([W1, W2]), margin_data())
    assert norm.log_gamma_sq(ctx) == pytest.approx(2 * math.log(GAMMA))
    assert norm.fro_prod_margin(ctx) == pytest.approx(math.log(14 * 7 / GAMMA ** 2))
    assert norm.spec_orig_margin(ctx) == pytest.approx(
        math.log(SPEC1 * SPEC2 / GAMMA ** 2 * (14 / SPEC1 + 7 / SPEC2)))
    assert norm.path_margin(ctx) == pytest.approx(43 / GAMMA ** 2)


def test_distance_from_init_matches_hand_values():
    # W1 - W1_0 = [[0, 0], [0, 3]] (F^2 = spec^2 = 9); W2_0 = 0 so W2 - W2_0 = W2
    init = hand_mlp(INIT_WEIGHTS, [(4.0, 4.0), None])
    ctx = context(hand_mlp([W1, W2]), margin_data(), init=init)
    assert norm.dist_fro(ctx) == pytest.approx(9 + 7)
    assert norm.dist_spec(ctx) == pytest.approx(9 + SPEC2)
    assert norm.spec_init_margin(ctx) == pytest.approx(
        math.log(SPEC1 * SPEC2 / GAMMA ** 2 * (9 / SPEC1 + 7 / SPEC2)))


def test_distance_from_init_folds_the_init_batchnorm_too():
    init = bn_net()
    with torch.no_grad():
        init.blocks[0].bn.weight.copy_(torch.tensor([1.0, 1.0]))   # folded init W1 = [[1, 2], [0, 1.5]]
    ctx = context(bn_net(), margin_data(), init=init)
    assert norm.dist_fro(ctx) == pytest.approx(1 + 4 + 0)          # [[1, 2], [0, 0]]; heads are equal
    assert norm.dist_spec(ctx) == pytest.approx(5.0)


def test_init_measures_need_init_weights_declared():
    ctx = context(hand_mlp([W1, W2]), margin_data(), init=hand_mlp([W1, W2]), needs=("train_data",))
    with pytest.raises(GenbenchError, match="init_weights"):
        norm.dist_fro(ctx)


def test_norms_are_computed_once_per_model():
    ctx = context(hand_mlp([W1, W2]), margin_data())
    norm.fro_prod(ctx)
    with torch.no_grad():
        ctx.model.head.weight.mul_(10)  # a fresh model would change; the memo keeps the first folding
    assert norm.param(ctx) == pytest.approx(21.0)


def test_registered_metadata():
    names = ["norm.params", "norm.fro_prod", "norm.fro_sum", "norm.fro_prod_margin", "norm.spec_prod",
             "norm.spec_sum", "norm.spec_orig_margin", "norm.spec_init_margin", "norm.path", "norm.path_margin",
             "norm.param", "init.dist_fro", "init.dist_spec", "pacbayes.init", "pacbayes.orig",
             "pacbayes.flatness", "pacbayes.mag_init", "pacbayes.mag_orig", "pacbayes.mag_flatness",
             "sharpness.init", "sharpness.orig", "sharpness.flatness", "sharpness.mag_init", "sharpness.mag_orig",
             "sharpness.mag_flatness"]
    for name in names:
        m = _MEASURES[name]
        assert m.kind == "scalar" and m.higher_means == "larger_gap" and m.doc, name
    for family in ("pacbayes", "sharpness"):
        for name in ("init", "mag_init", "mag_orig"):   # mag_orig's denominator holds w - w0 (eq. 57, 59)
            assert _MEASURES[f"{family}.{name}"].needs == ("train_data", "init_weights"), (family, name)
        for name in ("orig", "flatness", "mag_flatness"):
            assert _MEASURES[f"{family}.{name}"].needs == ("train_data",), (family, name)
    assert _MEASURES["norm.param"].needs == ()


# --- the radius search --------------------------------------------------------------------------------
@pytest.mark.parametrize("power", [1.0, 2.0, 0.5])
def test_search_radius_finds_the_target_drop(power):
    drop = lambda r: min(1.0, r ** power)  # noqa: E731
    r = pb.search_radius(drop)
    assert abs(drop(r) - pb.TARGET_DROP) <= pb.TOLERANCE


def test_search_radius_brackets_are_capped():
    assert pb.search_radius(lambda r: 0.0) == pb.CAP
    assert pb.search_radius(lambda r: 1.0) == pb.FLOOR


def test_search_radius_returns_a_feasible_radius_when_the_drop_jumps():
    r = pb.search_radius(lambda r: 0.5 if r > 0.3 else 0.0)  # no radius is within tolerance
    assert 0.3 - 1e-3 < r <= 0.3


class SpyModel:
    """Stands in for FlatModel in gaussian_drop: records the perturbations it is evaluated at."""

    def __init__(self, w: torch.Tensor):
        self.w, self.seen = w, []

    def accuracy(self, flat, x, y):
        self.seen.append(flat - self.w)
        return 1.0


def test_gaussian_noise_std_is_sigma_not_its_square():
    z = torch.randn(pb.N_MC, 20000, generator=torch.Generator().manual_seed(0))
    spy = SpyModel(torch.zeros(20000))
    pb.gaussian_drop(spy, None, None, z, lambda s: s)(0.5)
    noise = torch.stack(spy.seen[1:])
    assert noise.std().item() == pytest.approx(0.5, rel=0.02)


def test_magnitude_aware_noise_std():
    w = torch.full((20000,), 3.0)
    z = torch.randn(pb.N_MC, 20000, generator=torch.Generator().manual_seed(0))
    spy = SpyModel(w)
    pb.gaussian_drop(spy, None, None, z, lambda s: torch.sqrt(s ** 2 * w ** 2 + pb.EPS_MAG ** 2))(0.5)
    assert torch.stack(spy.seen[1:]).std().item() == pytest.approx(math.sqrt(2.25 + 1e-6), rel=0.02)


# --- PAC-Bayes ----------------------------------------------------------------------------------------
def blob_data(n: int = 400, seed: int = 0) -> TrainingSet:
    """Two Gaussian blobs in the positive quadrant, separable by the tiny net."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.rand(n, 2, generator=g) + torch.stack([y, 1 - y], 1).float() * 2
    return TrainingSet(x, y, num_classes=2)


def linear_net(scale: float = 1.0) -> MLP:
    """A linear classifier (depth 0) that labels blob_data perfectly, its weights multiplied by `scale`."""
    return hand_mlp([[[-scale, scale], [scale, -scale]]])


def searched_sigma(net: nn.Module, data: TrainingSet, magnitude: bool = False, seed: int = 0) -> float:
    ctx = context(net, data, seed=seed)
    key = "pacbayes.mag_sigma" if magnitude else "pacbayes.sigma"
    x, y = ctx.subsample(pb.SUBSAMPLE)
    return pb.pacbayes_sigma(fold_batchnorm(net), x, y, pb.noise_generator(ctx, key), magnitude=magnitude)


def test_pacbayes_formulas_given_the_searched_sigma():
    init = hand_mlp(INIT_WEIGHTS, [(4.0, 4.0), None])
    net, data = hand_mlp([W1, W2], [(1.0, 0.0), (0.0, 2.0)]), blob_data()
    ctx = context(net, data, init=init)
    s = searched_sigma(net, data)
    # weights only, biases left out: ||w||^2 = 14 + 7; ||w - w0||^2 = 9 + 7
    assert pb.orig(ctx) == pytest.approx(21 / (4 * s ** 2) + math.log(400 / s) + 10)
    assert pb.init(ctx) == pytest.approx(16 / (4 * s ** 2) + math.log(400 / s) + 10)
    assert pb.flatness(ctx) == pytest.approx(1 / s ** 2)


def test_magnitude_aware_formulas_given_the_searched_sigma():
    init = hand_mlp(INIT_WEIGHTS, [(4.0, 4.0), None])
    net, data = hand_mlp([W1, W2], [(1.0, 0.0), (0.0, 2.0)]), blob_data()
    ctx = context(net, data, init=init)
    s = searched_sigma(net, data, magnitude=True)
    eps2 = pb.EPS_MAG ** 2

    def bound(ref: list[float], dist: list[float]) -> float:
        ref, dist = np.array(ref), np.array(dist)
        num = eps2 + (s ** 2 + 1) * np.sum(ref ** 2) / len(ref)
        return float(np.sum(np.log(num / (eps2 + s ** 2 * dist ** 2)))) / 4 + math.log(400 / s) + 10

    # the weights W1, W2 in order (biases left out); both forms divide by eps^2 + s^2 (w_i - w0_i)^2 (eq. 56-57)
    w, dist = [1, 2, 0, 3, 1, 1, 2, -1], [0, 0, 0, 3, 1, 1, 2, -1]
    assert pb.mag_orig(ctx) == pytest.approx(bound(w, dist))
    assert pb.mag_init(ctx) == pytest.approx(bound(dist, dist))
    assert pb.mag_flatness(ctx) == pytest.approx(1 / s ** 2)


def test_sigma_search_is_deterministic_and_shared_whatever_measure_runs_first():
    net, data = linear_net(), blob_data()
    memo: dict = {}
    a = MeasureContext(model=net, probe_layers=[], measure="pacbayes.flatness", needs=("train_data",),
                       train=data, memo=memo)
    b = MeasureContext(model=net, probe_layers=[], measure="pacbayes.orig", needs=("train_data",), train=data)
    assert pb.flatness(a) == pb.flatness(b)   # separate memos, different measure names
    assert pb.sigma(a) == searched_sigma(net, data)
    assert memo["pacbayes.sigma"] == pb.sigma(a)
    assert pb.FLOOR < pb.sigma(a) < pb.CAP


def test_sigma_scales_with_a_scaled_linear_classifier():
    data = blob_data()
    x, y = data.x, data.y
    z = torch.randn(pb.N_MC, 4, generator=torch.Generator().manual_seed(0))   # the 4 weights; no biases
    small, big = pb.FlatModel(linear_net(1.0)), pb.FlatModel(linear_net(2.0))
    d_small = pb.gaussian_drop(small, x, y, z, lambda s: s)
    d_big = pb.gaussian_drop(big, x, y, z, lambda s: s)
    for r in (0.1, 0.4, 1.0, 3.0):
        assert d_big(2 * r) == d_small(r)       # common random numbers: the same draws, scaled
    ratio = searched_sigma(linear_net(2.0), data) / searched_sigma(linear_net(1.0), data)
    assert 1.5 < ratio < 2.7


def trained_mlp(seed: int = 0) -> tuple[MLP, TrainingSet]:
    """A small MLP fitted to 3 Gaussian classes."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(3, 8, generator=g) * 2
    y = torch.randint(0, 3, (300,), generator=g)
    x = centers[y] + torch.randn(300, 8, generator=g)
    net = MLP(in_shape=[8], num_classes=3, width=16, depth=2, batchnorm=True)
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    net.train()
    for _ in range(100):
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return net.eval(), TrainingSet(x, y, num_classes=3)


def test_a_more_robust_model_gets_a_larger_sigma():
    net, data = trained_mlp()
    big = copy.deepcopy(net)
    with torch.no_grad():  # same decisions, but noise on the logits layer matters 8 times less
        big.head.weight.mul_(8)
        big.head.bias.mul_(8)
    assert searched_sigma(big, data) > searched_sigma(net, data)
    assert searched_sigma(big, data, magnitude=True) >= searched_sigma(net, data, magnitude=True)


# --- sharpness ----------------------------------------------------------------------------------------
def test_ascent_finds_a_worse_loss_than_random_points_in_the_box():
    net, data = trained_mlp()
    fm = pb.FlatModel(fold_batchnorm(net))
    g = torch.Generator().manual_seed(1)
    alpha = 0.05
    start = 2 * torch.rand(fm.w.numel(), generator=g) - 1
    u, worst = pb.ascend_in_box(fm, data.x, data.y, alpha, start)
    assert u.abs().max().item() <= alpha + 1e-7
    random_losses = [pb.box_loss(fm, data.x, data.y, alpha * (2 * torch.rand(fm.w.numel(), generator=g) - 1))
                     for _ in range(20)]
    assert pb.box_loss(fm, data.x, data.y, u) > max(random_losses)
    assert worst <= fm.accuracy(fm.w + alpha * start, data.x, data.y)


def test_sharpness_alpha_is_deterministic_and_within_the_gaussian_sigma():
    net, data = trained_mlp()
    ctx1, ctx2 = context(net, data, measure="sharpness.flatness"), context(net, data, measure="other")
    value = pb.sharpness_flatness(ctx1)
    assert value == pb.sharpness_flatness(ctx2)
    alpha = 1 / math.sqrt(value)
    x, y = ctx1.subsample(pb.SUBSAMPLE)
    fm = pb.FlatModel(fold_batchnorm(net))
    start = 2 * torch.rand(fm.w.numel(), generator=pb.noise_generator(ctx1, "sharpness.alpha")) - 1
    drop = fm.accuracy(fm.w, x, y) - pb.ascend_in_box(fm, x, y, alpha, start)[1]
    assert drop <= pb.TARGET_DROP + pb.TOLERANCE
    # the worst case in a box is harder to survive than a Gaussian of a similar per-coordinate scale
    assert alpha < searched_sigma(net, data)


@pytest.mark.parametrize("magnitude", [False, True])
def test_the_sharpness_search_stops_ascents_early_without_changing_alpha(monkeypatch, magnitude):
    """An ascent whose accuracy already fell past target + tolerance cannot change the search's next step, so
    it stops; the alpha found is bit-identical to the one found with every ascent run to the end."""
    net, data = trained_mlp()
    ctx = context(net, data)
    x, y = ctx.subsample(pb.SUBSAMPLE)
    folded = fold_batchnorm(net)
    calls = {"n": 0}
    real_gradient = pb.loss_gradient

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real_gradient(*args, **kwargs)

    monkeypatch.setattr(pb, "loss_gradient", counted)
    fast = pb.sharpness_alpha(folded, x, y, pb.noise_generator(ctx, "k"), magnitude=magnitude)
    fast_calls = calls["n"]
    real_ascend = pb.ascend_in_box
    monkeypatch.setattr(pb, "ascend_in_box", lambda *a, settled=None, **k: real_ascend(*a, **k))
    calls["n"] = 0
    full = pb.sharpness_alpha(folded, x, y, pb.noise_generator(ctx, "k"), magnitude=magnitude)
    assert fast == full
    assert fast_calls < calls["n"]
