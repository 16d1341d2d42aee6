"""Margin measures against values computed by hand on tiny networks, and the one-pass trick against a loop."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from genbench.measures import margin as M
from genbench.measures import output as O
from genbench.measures.context import TrainingSet
from genbench.measures.weights import rescale_relu_pair
from genbench.models import build_model
from helpers import hand_mlp, measure_context


def _linear_net() -> torch.nn.Module:
    """A 2-3-3 MLP whose hidden pre-activations are positive on the points used: logits = W2 (W1 x + b1)."""
    return hand_mlp([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]],
                    [(1.0, 1.0, 1.0), None])


X = torch.tensor([[3.0, 0.5], [0.5, 2.0], [1.0, 1.0], [2.0, 0.0]])
Y = torch.tensor([0, 1, 1, 0])
TRAIN = TrainingSet(X, Y, num_classes=3)   # the classes of _linear_net; other data sets: the largest label + 1
context = partial(measure_context, measure="margin.test", needs=("train_data",))


def _hand_margins():
    """Distances at input and hidden layer written out: in the linear region grad_h(f_i - f_j) = w2_i - w2_j
    and grad_x(f_i - f_j) = W1^T (w2_i - w2_j)."""
    W1 = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    b1 = np.array([1.0, 1.0, 1.0])
    W2 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])
    xs, ys = X.numpy().astype(float), Y.numpy()
    H = xs @ W1.T + b1
    F = H @ W2.T
    d_in, d_h, out = [], [], []
    for f, y in zip(F, ys):
        order = [k for k in np.argsort(-f, kind="stable")]
        j = order[1] if order[0] == y else order[0]
        w = W2[y] - W2[j]
        out.append(f[y] - f[j])
        d_in.append((f[y] - f[j]) / np.sqrt(np.sum((W1.T @ w) ** 2)))
        d_h.append((f[y] - f[j]) / np.sqrt(np.sum(w ** 2)))
    tv_in = xs.var(axis=0).sum()
    tv_h = H.var(axis=0).sum()
    return np.array(d_in), np.array(d_h), tv_in, tv_h, np.array(out), F


def test_margins_match_hand_computation():
    net = _linear_net()
    m = M.compute_margins(net, net.probe_layers(), iter([(X, Y)]))
    d_in, d_h, tv_in, tv_h, out, F = _hand_margins()
    assert net.probe_layers() == ["input", "blocks.0.fc"]
    np.testing.assert_allclose(m.distance[0], d_in, rtol=1e-6)
    np.testing.assert_allclose(m.distance[1], d_h, rtol=1e-6)
    np.testing.assert_allclose(m.total_variation, [tv_in, tv_h], rtol=1e-9)
    np.testing.assert_allclose(m.output_margin, out, rtol=1e-6)
    np.testing.assert_array_equal(m.correct, F.argmax(1) == Y.numpy())
    # the point (1, 1) with label 1 is misclassified: its margin is negative and excluded from signatures
    assert m.distance[0][2] < 0 and not m.correct[2]


def test_batches_give_the_same_margins_as_one_batch():
    net = _linear_net()
    one = M.compute_margins(net, net.probe_layers(), iter([(X, Y)]))
    two = M.compute_margins(net, net.probe_layers(), iter([(X[:3], Y[:3]), (X[3:], Y[3:])]))
    np.testing.assert_allclose(one.distance, two.distance, rtol=1e-12)
    np.testing.assert_allclose(one.total_variation, two.total_variation, rtol=1e-6)


def test_quartile_signature_by_hand():
    # Q1=2, Q2=3, Q3=4, IQR=2: whiskers reach 2-3=-1 and 4+3=7, so the fences are 1 and 4 (100 is an outlier);
    # negative margins (misclassified points) are dropped first
    np.testing.assert_allclose(M.quartile_signature([1, 2, 3, 4, 100, -5]), [1, 2, 3, 4, 4])
    np.testing.assert_allclose(M.quartile_signature([1.0, 2.0]), [1.0, 1.25, 1.5, 1.75, 2.0])
    with pytest.raises(ValueError, match="no positive margins"):
        M.quartile_signature([-1.0, 0.0])


def test_moment_signature_by_hand():
    d = np.array([1.0, 2.0, -3.0])
    expected = [1.5, np.sqrt(2.5), (4.5) ** (1 / 3), (8.5) ** 0.25, (16.5) ** 0.2]
    np.testing.assert_allclose(M.moment_signature(d), expected)


def test_qrt_signatures_use_normalised_positive_margins():
    net = _linear_net()
    d_in, d_h, tv_in, tv_h, _, _ = _hand_margins()
    ctx = context(net, TRAIN)
    # one hidden layer: the three fixed relative depths 1/3, 2/3 and 1 all read it
    sig = M.qrt_log(ctx).reshape(4, 5)
    np.testing.assert_allclose(sig[0], M.quartile_signature(d_in / np.sqrt(tv_in)), rtol=1e-6)
    for row in sig[1:]:
        np.testing.assert_allclose(row, M.quartile_signature(d_h / np.sqrt(tv_h)), rtol=1e-6)
    np.testing.assert_allclose(M.qrt_log_unnorm(ctx).reshape(4, 5)[0], M.quartile_signature(d_in), rtol=1e-6)
    hinge_h = np.mean(np.maximum(0, 1 - d_h / np.sqrt(tv_h)))
    np.testing.assert_allclose(M.lm_linear(ctx), [np.mean(np.maximum(0, 1 - d_in / np.sqrt(tv_in))), *[hinge_h] * 3],
                               rtol=1e-6)


@pytest.mark.parametrize("depth, hidden", [(2, [0, 0, 1]), (3, [0, 1, 2]), (4, [0, 2, 3])])
def test_signatures_have_one_length_whatever_the_depth(depth, hidden):
    """A zoo of depths 2-4 gives 20-value quartile signatures: the rows of hidden probes nearest relative depths
    1/3, 2/3 and 1, computed here from the margins of every probe layer."""
    torch.manual_seed(depth)
    net = build_model("mlp", dict(in_shape=[12], num_classes=5, width=16, depth=depth)).eval()
    x, y = torch.randn(40, 12), torch.randint(0, 5, (40,))
    ctx = context(net, x=x, y=y)
    probes = [f"blocks.{i}.fc" for i in range(depth)]
    every = M.compute_margins(net, ["input", *probes], iter([(x, y)])).normalized()
    expected = [M.quartile_signature(every[0]), *(M.quartile_signature(every[1 + i]) for i in hidden)]
    np.testing.assert_allclose(M.qrt_log(ctx).reshape(4, 5), expected, rtol=1e-6)
    assert len(M.moment_log(ctx)) == 20 and len(M.sf_log(ctx)) == len(M.lm_linear(ctx)) == 4
    np.testing.assert_allclose(M.qrt_log(ctx).reshape(4, 5)[3], M.sl_log(ctx), rtol=0)


def _bn_mlp(seed: int, **arch) -> torch.nn.Module:
    """A 3-layer batchnorm MLP (12 inputs, 5 classes) in eval mode, its running statistics randomised."""
    torch.manual_seed(seed)
    net = build_model("mlp", dict(in_shape=[12], num_classes=5, width=16, depth=3, batchnorm=True, **arch))
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, torch.nn.BatchNorm1d):
                mod.running_mean.normal_()
                mod.running_var.uniform_(0.5, 2.0)
    return net.eval()


def test_one_backward_pass_equals_a_per_example_loop():
    net = _bn_mlp(0, dropout=0.3)
    x, y = torch.randn(30, 12), torch.randint(0, 5, (30,))
    layers = net.probe_layers()
    fast = M.compute_margins(net, layers, iter([(x, y)]))
    modules = dict(net.named_modules())
    for n in range(30):
        store = {}
        hooks = [modules[name].register_forward_hook(lambda _m, _i, o, name=name: store.__setitem__(name, o))
                 for name in layers]
        xi = x[n:n + 1].clone().requires_grad_(True)
        logits = net(xi)[0]
        for h in hooks:
            h.remove()
        i = int(y[n])
        others = logits.detach().clone()
        others[i] = -float("inf")
        j = int(others.argmax()) if int(logits.argmax()) == i else int(logits.argmax())
        diff = logits[i] - logits[j]
        for k, name in enumerate(layers):
            (g,) = torch.autograd.grad(diff, store[name], retain_graph=True)
            expected = float(diff.detach()) / float(torch.sqrt(g.detach().double().pow(2).sum()))
            assert fast.distance[k, n] == pytest.approx(expected, rel=1e-5)


class _TimesOne(torch.nn.Module):
    """The same logits (x * 1.0 is exact) in a tensor that is not the last Linear's output, so compute_margins
    takes the backward pass from the logits with the one-hot direction instead of starting at the head."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) * 1.0


def test_backward_from_the_head_equals_backward_from_the_logits_bit_for_bit():
    net = _bn_mlp(3)
    x, y = torch.randn(200, 12), torch.randint(0, 5, (200,))
    layers = net.probe_layers()
    head = M.compute_margins(net, layers, iter([(x[:120], y[:120]), (x[120:], y[120:])]))
    wrapped = _TimesOne(net)
    logits = M.compute_margins(wrapped, [f"net.{n}" for n in layers], iter([(x[:120], y[:120]), (x[120:], y[120:])]))
    np.testing.assert_array_equal(head.distance, logits.distance)
    np.testing.assert_array_equal(head.total_variation, logits.total_variation)
    np.testing.assert_array_equal(head.output_margin, logits.output_margin)


def test_normalised_signatures_survive_relu_rescaling_and_unnormalised_do_not():
    torch.manual_seed(1)
    net = build_model("mlp", dict(in_shape=[8], num_classes=3, width=16, depth=3)).eval()
    x = torch.randn(200, 8)
    y = net(x).argmax(1)  # every point correctly classified
    scaled = rescale_relu_pair(net, 5.0)
    a, b = M.qrt_log(context(net, x=x, y=y)), M.qrt_log(context(scaled, x=x, y=y))
    np.testing.assert_allclose(a, b, rtol=1e-4)
    ua, ub = M.qrt_log_unnorm(context(net, x=x, y=y)), M.qrt_log_unnorm(context(scaled, x=x, y=y))
    assert not np.allclose(ua, ub, rtol=1e-2)


def test_jacobian_margin_of_a_linear_network():
    net = _linear_net()
    W = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]) @ np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    _, _, _, _, out, _ = _hand_margins()
    expected = out / (np.sqrt(2) * np.linalg.norm(W, 2))
    np.testing.assert_allclose(M.jacobian_log(context(net, TRAIN)), M.quartile_signature(expected), rtol=1e-6)


def test_spectral_complexity_and_spectral_margin_by_hand():
    net = _linear_net()
    W1 = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    W2 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])
    s1, s2 = np.linalg.norm(W1, 2), np.linalg.norm(W2, 2)
    l1, l2 = np.linalg.norm(W1, axis=1).sum(), np.linalg.norm(W2, axis=1).sum()
    r = s1 * s2 * ((l1 / s1) ** (2 / 3) + (l2 / s2) ** (2 / 3)) ** 1.5
    assert M.spectral_complexity(net) == pytest.approx(r, rel=1e-9)
    _, _, _, _, out, _ = _hand_margins()
    scale = r * np.linalg.norm(X.numpy()) / len(X)
    np.testing.assert_allclose(M.spectral_log(context(net, TRAIN)), M.quartile_signature(out / scale), rtol=1e-6)


def test_output_measures_by_hand():
    net = _linear_net()
    _, _, _, _, out, F = _hand_margins()
    ctx = context(net, TRAIN)
    assert O.margin_inv(ctx) == pytest.approx(1 / np.quantile(out, 0.1) ** 2, rel=1e-6)
    p = np.exp(F - F.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert O.entropy(ctx) == pytest.approx(float(-(p * np.log(p)).sum(1).mean()), rel=1e-6)


def test_undeclared_needs_are_refused():
    net = _linear_net()
    ctx = context(net, TRAIN, needs=())
    with pytest.raises(ValueError, match="did not declare"):
        M.qrt_log(ctx)
    with pytest.raises(ValueError, match="init_weights"):
        _ = context(net, TRAIN).init_model


def test_points_flat_at_a_layer_are_left_out_there():
    net = _linear_net()
    x = torch.cat([X, torch.tensor([[-5.0, -5.0]])])  # every hidden ReLU is off: no gradient flows back
    y = torch.cat([Y, torch.tensor([0])])
    m = M.compute_margins(net, net.probe_layers(), iter([(x, y)]))
    assert np.isnan(m.distance[:, -1]).all() and np.isfinite(m.distance[:, :-1]).all()
    np.testing.assert_allclose(M.qrt_log_unnorm(context(net, x=x, y=y)), M.qrt_log_unnorm(context(net, TRAIN)),
                               rtol=1e-6)
    lm = M.lm_linear(context(net, x=x, y=y))
    assert np.isfinite(lm).all()


@pytest.mark.parametrize("shape,bn", [((40,), False), ((40,), True), ((3, 8, 8), False)])
def test_relu_rescaling_keeps_a_nin_the_same_function(shape, bn):
    """A NiN block holds three convolutions in one Sequential: the rescaled pair is its first convolution (or its
    batchnorm) and the next convolution of the same block, so the network computes the same logits; scaling the
    next block's first convolution instead (as once) changed them."""
    torch.manual_seed(0)
    net = build_model("nin", dict(in_shape=list(shape), num_classes=4, base_channels=6, batchnorm=bn)).eval()
    if bn:
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
    scaled = rescale_relu_pair(net, 3.0)
    x = torch.randn(64, *shape)
    with torch.no_grad():
        torch.testing.assert_close(scaled(x), net(x), rtol=1e-5, atol=1e-5)
    first = net.blocks[0].bn1 if bn else net.blocks[0].conv1
    assert torch.allclose(getattr(scaled.blocks[0], "bn1" if bn else "conv1").weight, 3.0 * first.weight)
    assert torch.allclose(scaled.blocks[0].conv2.weight, net.blocks[0].conv2.weight / 3.0)
    assert torch.equal(scaled.blocks[1].conv1.weight, net.blocks[1].conv1.weight)
