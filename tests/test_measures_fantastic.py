"""The Fantastic catalogue (Jiang et al. 2020): the sharpness bounds and the magnitude-aware bounds against values
worked out by hand on a tiny network given the radius, the weights-only convention, the magnitude-aware box,
the treatment of a negative output margin, and the conformance suite for the sharpness measures."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from genbench.harness import check_measure
from genbench.measures import norm, pacbayes as pb
from genbench.measures.context import MeasureContext, TrainingSet
from genbench.measures.registry import get_measure, list_measures
from genbench.measures.weights import fold_batchnorm, weight_names
from genbench.models.mlp import MLP
from helpers import hand_mlp, measure_context
from test_measures_norm import W1, W2, blob_data, linear_net

EPS2 = 1e-6                       # eps^2 of the magnitude-aware bounds, eps = 1e-3
W = [1, 2, 0, 3, 1, 1, 2, -1]     # the tiny net's weights W1, W2 in order: ||w||^2 = 21, omega = 8
DIST = [0, 0, 0, 3, 1, 1, 2, -1]  # w - w0 for the init below: ||w - w0||^2 = 16
# the tiny net is input 2 -> Linear(2, 2) [-> BN] -> ReLU -> Linear(2, 2) with the weights W1, W2 of
# test_measures_norm (W above) and, unless said otherwise, these non-zero biases: they must not enter any bound
BIASES = [(0.5, -0.5), (1.0, 0.0)]
NEEDS = ("train_data", "init_weights")


def init_net() -> MLP:
    return hand_mlp([[[1.0, 2.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]], [(4.0, 4.0), (-3.0, 2.0)])


def ten_points(label: int = 1) -> TrainingSet:
    """x = (t, 0), t = 1..10, all labelled `label`: m = 10, and the tiny net (zero biases) has margins +-t."""
    t = torch.arange(1, 11, dtype=torch.float32)
    return TrainingSet(torch.stack([t, torch.zeros(10)], 1), torch.full((10,), label), num_classes=2)


def defined_in(*modules) -> list[str]:
    """The registered measures defined in these modules."""
    return [n for n in list_measures() if get_measure(n).fn.__module__ in {m.__name__ for m in modules}]


def mag_hand(ref: list[float], dist: list[float], s: float, extra: float, m: int) -> float:
    """1/4 sum_i log[(eps^2 + (s^2 + extra) ||ref||^2 / omega) / (eps^2 + s^2 dist_i^2)] + log(m / s) + 10."""
    num = EPS2 + (s ** 2 + extra) * sum(v * v for v in ref) / len(ref)
    return sum(math.log(num / (EPS2 + s ** 2 * d * d)) for d in dist) / 4 + math.log(m / s) + 10


# --- the bounds, given the radius -----------------------------------------------------------------------
def test_sharpness_bounds_match_hand_values_given_alpha():
    ctx = measure_context(hand_mlp([W1, W2], BIASES), ten_points(), init=init_net(), needs=NEEDS,
                          memo={"sharpness.alpha": 0.5})
    # ||v||^2 log(2 omega) / (4 alpha^2) + log(m / alpha) + 10 with omega = 8, alpha = 0.5, m = 10
    assert pb.sharpness_orig(ctx) == pytest.approx(21 * math.log(16) + math.log(20) + 10)
    assert pb.sharpness_init(ctx) == pytest.approx(16 * math.log(16) + math.log(20) + 10)
    assert pb.sharpness_flatness(ctx) == pytest.approx(4.0)


def test_magnitude_aware_sharpness_bounds_match_hand_values_given_alpha():
    ctx = measure_context(hand_mlp([W1, W2], BIASES), ten_points(), init=init_net(), needs=NEEDS,
                          memo={"sharpness.mag_alpha": 0.5})
    extra = 4 * math.log(16)   # 4 log(2 omega)
    assert pb.sharpness_mag_orig(ctx) == pytest.approx(mag_hand(W, DIST, 0.5, extra, 10))
    assert pb.sharpness_mag_init(ctx) == pytest.approx(mag_hand(DIST, DIST, 0.5, extra, 10))
    assert pb.sharpness_mag_flatness(ctx) == pytest.approx(4.0)
    # one term written out: the weight that moved by 3 contributes log[(eps^2 + (0.25 + 4 log 16) 21/8)
    # / (eps^2 + 0.25 * 9)] / 4
    term = math.log((EPS2 + (0.25 + extra) * 21 / 8) / (EPS2 + 2.25)) / 4
    rest = mag_hand(W, [d for d in DIST if d != 3], 0.5, extra, 10) - math.log(20) - 10
    assert pb.sharpness_mag_orig(ctx) == pytest.approx(term + rest + math.log(20) + 10)


def test_magnitude_aware_pacbayes_orig_keeps_w_minus_w0_in_the_denominator():
    ctx = measure_context(hand_mlp([W1, W2], BIASES), ten_points(), init=init_net(), needs=NEEDS,
                          memo={"pacbayes.mag_sigma": 0.5})
    assert pb.mag_orig(ctx) == pytest.approx(mag_hand(W, DIST, 0.5, 1.0, 10))
    assert pb.mag_init(ctx) == pytest.approx(mag_hand(DIST, DIST, 0.5, 1.0, 10))
    # the earlier form, eps^2 + s'^2 w_i^2 in the denominator, is a different number
    assert pb.mag_orig(ctx) != pytest.approx(mag_hand(W, W, 0.5, 1.0, 10), rel=1e-3)
    # a weight at its init value contributes log(numerator / eps^2) whatever its magnitude
    num = EPS2 + 1.25 * 21 / 8
    assert pb.mag_orig(ctx) == pytest.approx(
        3 * math.log(num / EPS2) / 4 + mag_hand(W, DIST[3:], 0.5, 1.0, 10))


# --- one convention: the weights of the folded Linear/Conv layers ---------------------------------------
def test_every_bound_uses_the_weights_only():
    fm = pb.FlatModel(fold_batchnorm(hand_mlp([W1, W2], BIASES, batchnorm=True)))
    assert fm.names == ["blocks.0.fc.weight", "head.weight"] == weight_names(fm.model)
    bn = measure_context(hand_mlp([W1, W2], BIASES, batchnorm=True), ten_points(), init=init_net(), needs=NEEDS)
    assert fm.w.numel() == 8 == norm.params(bn)
    memo = {"pacbayes.sigma": 0.5, "pacbayes.mag_sigma": 0.5, "sharpness.alpha": 0.5, "sharpness.mag_alpha": 0.5}
    a = measure_context(hand_mlp([W1, W2], BIASES), ten_points(), init=init_net(), needs=NEEDS, memo=dict(memo))
    b = measure_context(hand_mlp([W1, W2], [(-7.0, 9.0), (5.0, 5.0)]),   # other biases, same weights
                        ten_points(), init=init_net(), needs=NEEDS, memo=dict(memo))
    names = defined_in(pb)
    assert len(names) == 12
    for name in names:
        fn = get_measure(name).fn
        assert fn(a) == pytest.approx(fn(b)), name


def test_the_searches_perturb_the_weights_and_leave_the_biases():
    net = hand_mlp([W1, W2], BIASES)
    fm = pb.FlatModel(net)
    moved = fm.params(fm.w + 1.0)
    assert set(moved) == {"blocks.0.fc.weight", "head.weight"}
    x = torch.randn(5, 2)
    with torch.no_grad():
        by_hand = torch.relu(x @ (net.blocks[0].fc.weight + 1).T + net.blocks[0].fc.bias) @ (net.head.weight + 1).T
        assert torch.allclose(fm.logits(fm.w + 1.0, x), by_hand + net.head.bias)


# --- the magnitude-aware box ------------------------------------------------------------------------------
def test_magnitude_aware_box_half_widths():
    w = torch.tensor([2.0, -0.5, 0.0])
    assert torch.allclose(pb.box_radius(w, 0.1, True), torch.tensor([0.201, 0.051, 0.001]))
    assert pb.box_radius(w, 0.1, False) == 0.1


def blobs(n: int = 400, seed: int = 0) -> TrainingSet:
    """Two Gaussian blobs in the positive quadrant, separable by linear_net."""
    return blob_data(n, seed)


def test_ascent_stays_in_the_magnitude_aware_box():
    fm, data = pb.FlatModel(linear_net()), blobs()
    radius = pb.box_radius(fm.w, 0.3, True)
    start = 2 * torch.rand(fm.w.numel(), generator=torch.Generator().manual_seed(0)) - 1
    u, worst = pb.ascend_in_box(fm, data.x, data.y, radius, start)
    assert bool((u.abs() <= radius + 1e-7).all())
    assert pb.box_loss(fm, data.x, data.y, u) > pb.box_loss(fm, data.x, data.y, radius * start)
    assert worst <= fm.accuracy(fm.w + u, data.x, data.y)


def alpha_of(net: nn.Module, data: TrainingSet, magnitude: bool) -> float:
    ctx = MeasureContext(model=net, probe_layers=[], needs=("train_data",), train=data, seed=0)
    key = "sharpness.mag_alpha" if magnitude else "sharpness.alpha"
    return ctx.memo(key, lambda: (pb.mag_alpha if magnitude else pb.alpha)(ctx))


def test_box_radii_scale_with_the_weights_only_when_not_magnitude_aware():
    data = blobs(200)
    plain = alpha_of(linear_net(2.0), data, False) / alpha_of(linear_net(1.0), data, False)
    aware = alpha_of(linear_net(2.0), data, True) / alpha_of(linear_net(1.0), data, True)
    assert 1.5 < plain < 2.7     # the box must grow with the weights to cost the same accuracy
    assert 0.75 < aware < 1.33   # alpha' |w_i| grows by itself


def test_magnitude_aware_alpha_is_deterministic_and_meets_the_target_drop():
    data, net = blobs(), linear_net()
    memo: dict = {}
    a = MeasureContext(model=net, probe_layers=[], measure="sharpness.mag_orig",
                       needs=("train_data", "init_weights"), train=data, memo=memo, init_model=linear_net(0.5))
    b = MeasureContext(model=net, probe_layers=[], measure="sharpness.mag_flatness", needs=("train_data",),
                       train=data)
    assert pb.sharpness_mag_flatness(a) == pb.sharpness_mag_flatness(b)
    assert set(memo) >= {"sharpness.mag_alpha"} and "sharpness.alpha" not in memo
    a_mag = memo["sharpness.mag_alpha"]
    fm = pb.FlatModel(fold_batchnorm(net))
    start = 2 * torch.rand(fm.w.numel(), generator=pb.noise_generator(a, "sharpness.mag_alpha")) - 1
    drop = fm.accuracy(fm.w, data.x, data.y) - pb.ascend_in_box(
        fm, data.x, data.y, pb.box_radius(fm.w, a_mag, True), start)[1]
    assert drop <= pb.TARGET_DROP + pb.TOLERANCE
    assert pb.FLOOR < a_mag < pb.CAP


# --- a negative 10th-percentile margin -----------------------------------------------------------------
def test_margin_forms_use_the_size_of_a_negative_gamma():
    # labels 0: margins -1..-10, 10th percentile (linear interpolation) -9.1; |gamma| is used
    ctx = measure_context(hand_mlp([W1, W2]), ten_points(label=0), init=init_net(), needs=NEEDS)
    assert norm.log_gamma_sq(ctx) == pytest.approx(2 * math.log(9.1))
    assert norm.fro_prod_margin(ctx) == pytest.approx(math.log(14 * 7 / 9.1 ** 2))
    zero = TrainingSet(torch.zeros(10, 2), torch.ones(10, dtype=torch.long), num_classes=2)
    assert norm.fro_prod_margin(measure_context(hand_mlp([W1, W2]), zero, init=init_net(), needs=NEEDS)) == math.inf


# --- documentation and conformance -----------------------------------------------------------------------
def test_the_catalogue_page_names_every_fantastic_measure():
    text = (Path(__file__).parents[1] / "docs" / "catalogue.md").read_text()
    from genbench.measures import layer, output
    for name in defined_in(norm, pb, output, layer):
        assert f"`{name}`" in text, name


@pytest.mark.parametrize("name", ["sharpness.init", "sharpness.orig", "sharpness.mag_init", "sharpness.mag_orig",
                                  "sharpness.mag_flatness"])
def test_new_sharpness_measures_pass_the_conformance_suite(name, digits_zoo):
    report = check_measure(name, digits_zoo)
    assert report.passed, str(report)
