"""Layer utilization / contribution and the PGDL representation measures against hand-computed values."""
from __future__ import annotations

import copy
import math
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import davies_bouldin_score

from genbench.measures import layer, pgdl
from genbench.measures.context import MeasureContext, TrainingSet
from genbench.models import build_model
from helpers import hand_mlp, measure_context

NEEDS = ("train_data", "init_weights", "augment")
IDENTITY_AUG = dict(shift=0, noise=0.0)


# the tiny networks here are 2 -> 2 (ReLU) -> 2 MLPs, hand_mlp([fc, head], [None, head_bias]): zero biases unless
# a head bias is given; their contexts hold x, y (2 classes) with the identity augmentation unless told otherwise
context = partial(measure_context, num_classes=2, augmentation=IDENTITY_AUG, measure="test", needs=NEEDS)


def softplus(t: float) -> float:
    """Cross-entropy of a 2-class softmax whose true logit leads by -t: log(1 + e^t)."""
    return math.log1p(math.exp(t))


# --- layer utilization and contribution -------------------------------------------------------------

@pytest.fixture
def trained_and_init():
    # trained: fc = 2I, head = diag(3, 1) with bias (0.5, 0); init: fc = I, head = 0, bias 0
    net = hand_mlp([[[2, 0], [0, 2]], [[3, 0], [0, 1]]], [None, [0.5, 0.0]])
    net0 = hand_mlp([[[1, 0], [0, 1]], [[0, 0], [0, 0]]])
    x, y = [[1.0, 0.0], [0.0, 1.0]], [0, 1]
    return net, net0, x, y


def test_utilization_is_frobenius_distance_per_layer(trained_and_init):
    net, net0, x, y = trained_and_init
    ctx = context(net, x=x, y=y, init=net0)
    # fc: ||I||_F = sqrt 2; head: ||diag(3, 1)||_F = sqrt 10 (spectral would be 3); biases ignored; the one hidden
    # layer fills the three relative depths 1/3, 2/3 and 1
    np.testing.assert_allclose(layer.utilization_all(ctx), [math.sqrt(2)] * 3 + [math.sqrt(10)], rtol=1e-12)
    assert layer.utilization_last(ctx) == pytest.approx(math.sqrt(10), rel=1e-12)


def test_contribution_is_loss_rise_when_one_layer_is_reset(trained_and_init):
    net, net0, x, y = trained_and_init
    before = {k: v.clone() for k, v in net.state_dict().items()}
    ctx = context(net, x=x, y=y, init=net0)
    # trained logits: x1 -> (6.5, 0), x2 -> (0.5, 2)
    trained = (softplus(-6.5) + softplus(-1.5)) / 2
    # fc reset to I: x1 -> (3.5, 0), x2 -> (0.5, 1)
    fc_reset = (softplus(-3.5) + softplus(-0.5)) / 2
    # head reset to 0 with bias 0: logits 0 -> log 2 each
    head_reset = math.log(2)
    np.testing.assert_allclose(layer.contribution(ctx), [fc_reset - trained] * 3 + [head_reset - trained], rtol=1e-6)
    for k, v in net.state_dict().items():  # functional_call, not mutation
        assert torch.equal(v, before[k])


def test_contribution_is_zero_for_a_layer_at_its_init(trained_and_init):
    net, _, x, y = trained_and_init
    net0 = hand_mlp([[[2, 0], [0, 2]], [[0, 0], [0, 0]]])  # fc unchanged since init
    out = layer.contribution(context(net, x=x, y=y, init=net0))
    assert (out[:3] == 0.0).all() and out[3] > 0


@pytest.mark.parametrize("depth, hidden", [(2, [0, 0, 1]), (3, [0, 1, 2]), (4, [0, 2, 3])])
def test_layer_signatures_read_fixed_relative_depths_with_batchnorm(depth, hidden):
    """4 values whatever the depth: the hidden layers nearest 1/3, 2/3 and 1 of the body, then the classifier."""
    cfg = dict(in_shape=[5], num_classes=3, width=8, depth=depth, batchnorm=True)
    torch.manual_seed(0)
    net, net0 = build_model("mlp", cfg).eval(), build_model("mlp", cfg).eval()
    x, y = torch.randn(30, 5), torch.randint(0, 3, (30,))
    ctx = MeasureContext(model=net, probe_layers=net.probe_layers(), needs=NEEDS, init_model=net0,
                         train=TrainingSet(x, y, num_classes=3))
    names = [f"blocks.{i}.fc" for i in hidden] + ["head"]
    expected = [float((net.get_submodule(n).weight - net0.get_submodule(n).weight).detach().norm()) for n in names]
    np.testing.assert_allclose(layer.utilization_all(ctx), expected, rtol=1e-6)
    base = layer.mean_loss(ctx, x, y)
    rise = []
    for n in names:  # reset one layer by hand, on a copy
        net1 = copy.deepcopy(net)
        with torch.no_grad():
            net1.get_submodule(n).weight.copy_(net0.get_submodule(n).weight)
            net1.get_submodule(n).bias.copy_(net0.get_submodule(n).bias)
            rise.append(float(F.cross_entropy(net1(x).double(), y)) - base)
    np.testing.assert_allclose(layer.contribution(ctx), rise, rtol=1e-6, atol=1e-12)


# --- Natekar & Sharma: DBI x mixup ------------------------------------------------------------------

def test_davies_bouldin_matches_sklearn():
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(60, 7, generator=g) + torch.arange(60)[:, None] % 3
    labels = torch.arange(60) % 3
    assert pgdl.davies_bouldin(feats, labels) == pytest.approx(davies_bouldin_score(feats.numpy(), labels.numpy()),
                                                               rel=1e-6)


def test_dbi_mixup_hand_value():
    # identity network on nonnegative inputs: first hidden probe (blocks.0.fc) = x and logits = x
    net = hand_mlp([[[1, 0], [0, 1]], [[1, 0], [0, 1]]])
    x, y = [[2.0, 0.0], [4.0, 0.0], [0.0, 1.0], [0.0, 3.0]], [0, 0, 1, 1]
    ctx = context(net, x=x, y=y)
    # clusters: centroids (3, 0) and (0, 2), mean distances 1 and 1 -> DBI = 2 / sqrt 13
    # (the reference's mean over j with j = k as 0 would give 1 / sqrt 13)
    dbi = 2 / math.sqrt(13)
    assert dbi == pytest.approx(davies_bouldin_score(np.array(x), np.array(y)))
    # one within-class pair per class: midpoints (3, 0) and (0, 2)
    mixup = (softplus(-3) + softplus(-2)) / 2
    assert pgdl.dbi_mixup(ctx) == pytest.approx(dbi * mixup, rel=1e-6)


def test_dbi_mixup_uses_the_augmentation():
    net = hand_mlp([[[1, 0], [0, 1]], [[1, 0], [0, 1]]])
    x, y = [[2.0, 0.0], [4.0, 0.0], [0.0, 1.0], [0.0, 3.0]], [0, 0, 1, 1]
    plain = pgdl.dbi_mixup(context(net, x=x, y=y))
    noisy = pgdl.dbi_mixup(context(net, x=x, y=y, augmentation=dict(shift=0, noise=1.0)))
    assert noisy != pytest.approx(plain)


# --- Aithal et al.: augmentation robustness ---------------------------------------------------------

class SwapContext(MeasureContext):
    """A context whose augmentation swaps the two input features, deterministically."""

    def augment(self, x, generator=None):
        self._require("augment")
        return x.flip(-1)


def test_augment_robustness_is_zero_under_identity_augmentation():
    net = hand_mlp([[[1, 0], [0, 1]], [[1, 2], [0, 1]]])
    x, y = torch.rand(50, 2).tolist(), [0, 1] * 25
    assert pgdl.augment_robustness(context(net, x=x, y=y)) == 0.0


def test_augment_robustness_hand_value_with_one_flip():
    # logits = x + (3, 0) on nonnegative x
    net = hand_mlp([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], [None, [3.0, 0.0]])
    x, y = [[0.0, 1.0], [0.0, 4.0]], [0, 1]
    # x1: (3, 1) -> swapped (4, 0): class 0 kept, |sigma(2) - sigma(4)|
    # x2: (3, 4) -> swapped (7, 0): argmax flips, penalty 1
    sigma = lambda t: 1 / (1 + math.exp(-t))  # noqa: E731
    expected = (abs(sigma(2) - sigma(4)) + 1.0) / 2
    assert pgdl.augment_robustness(context(net, x=x, y=y, cls=SwapContext)) == pytest.approx(expected, rel=1e-9)


def test_augment_robustness_is_seeded():
    net = hand_mlp([[[1, 0.5], [0.3, 1]], [[1, -1], [0.5, 1]]])
    x, y = torch.rand(40, 2).tolist(), [0, 1] * 20
    aug = dict(shift=1, noise=0.3)
    a, b = (pgdl.augment_robustness(context(net, x=x, y=y, augmentation=aug, seed=s)) for s in (0, 0))
    assert a == b and a > 0


# --- Lassance et al.: VPM ---------------------------------------------------------------------------

def on_circle(*angles: float) -> torch.Tensor:
    return torch.tensor([[math.cos(a), math.sin(a)] for a in angles], dtype=torch.float64)


def test_knn1_adjacency_is_unsymmetrised_and_keeps_ties():
    # 1 has two equidistant neighbours (2 and 3); 4's nearest is 2 but 2's nearest is 1
    a = pgdl.knn1_adjacency(3 * on_circle(0.0, 0.5, -0.5, 2.0))  # the scale is normalised away
    expected = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]], dtype=torch.float64)
    assert torch.equal(a, expected)


def test_label_variation_hand_value():
    a = pgdl.knn1_adjacency(on_circle(0.0, 0.5, -0.5, 2.0))
    y = torch.tensor([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=torch.float64)
    # D = diag(2, 1, 1, 1): tr(Y^T Y) = 4 minus the normalised edges with equal labels,
    # 1->2 and 2->1, each 1/sqrt(2 * 1); n = 4
    assert pgdl.label_variation(a, y) == pytest.approx((4 - math.sqrt(2)) / 16, rel=1e-12)


def test_label_variation_with_soft_labels():
    a = pgdl.knn1_adjacency(on_circle(0.0, 0.5, 1.2, 2.2))  # 1->2, 2->1, 3->2, 4->3, all degree 1
    y = torch.tensor([[1, 0], [0.5, 0.5], [0, 1], [0.25, 0.75]], dtype=torch.float64)
    # sum ||y_i||^2 = 3.125; sum y_i . y_nn(i) = 0.5 + 0.5 + 0.5 + 0.75 = 2.25
    assert pgdl.label_variation(a, y) == pytest.approx((3.125 - 2.25) / 16, rel=1e-12)


def test_beta22_moments():
    lam = pgdl.beta22(200_000, torch.Generator().manual_seed(0)).double()
    assert lam.min() >= 0 and lam.max() <= 1
    assert float(lam.mean()) == pytest.approx(0.5, abs=0.005)
    assert float(lam.var()) == pytest.approx(1 / 20, abs=0.002)  # uniform would give 1/12


def test_head_input_is_the_penultimate_representation():
    torch.manual_seed(0)
    mlp = build_model("mlp", dict(in_shape=[6], num_classes=3, width=5, depth=2)).eval()
    x = torch.randn(4, 6)
    torch.testing.assert_close(pgdl.head_input(mlp, x), mlp.blocks(mlp.input(x)))
    nin = build_model("nin", dict(in_shape=[3, 8, 8], num_classes=3, base_channels=4)).eval()
    xi = torch.randn(4, 3, 8, 8)
    torch.testing.assert_close(pgdl.head_input(nin, xi), nin.blocks(xi).flatten(1))


def test_vpm_is_seeded_and_in_range():
    torch.manual_seed(0)
    net = build_model("mlp", dict(in_shape=[6], num_classes=2, width=8, depth=2)).eval()
    x, y = torch.randn(60, 6), torch.arange(60) % 2
    values = [pgdl.vpm(context(net, x=x, y=y, seed=s)) for s in (0, 0, 1)]
    assert values[0] == values[1]
    assert all(0 <= v <= 1000 for v in values)
    assert values[0] != values[2]
