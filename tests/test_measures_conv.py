"""The norm measures on a convolutional network, against values computed here by hand with numpy: a tiny NiN in 1-D
(ten convolutions) whose kernels are read as [out, in * kernel] matrices (the reshape of Jiang et al. 2020,
docs/catalogue.md), batchnorm folded into the convolution before it, and the path norm from a plain numpy
convolution over an all-ones signal with every parameter squared; and DEMOGEN's margins at the input and at each block,
with the gradient backpropagated through the convolutions written out as dense matrices."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from genbench.measures import norm
from genbench.models.registry import build_model
from helpers import measure_context

LENGTH, CHANNELS, CLASSES = 8, 2, 3
NIN_LAYERS = [(3, 2), (1, 1), (1, 1)] * 3  # (kernel, stride) of each block's convolutions; the head follows


def tiny_nin(batchnorm: bool) -> torch.nn.Module:
    """A 1-D NiN (2 channels, 8 steps: 8 -> 4 -> 2 -> 1, a 1-wide head) with small integer weights and biases, and
    with batchnorm running statistics and affine maps away from their defaults."""
    torch.manual_seed(3)
    net = build_model("nin", dict(in_shape=[LENGTH], num_classes=CLASSES, base_channels=CHANNELS, batchnorm=batchnorm))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.Conv1d):
                m.weight.copy_(torch.randint(-2, 3, m.weight.shape).float())
                m.bias.copy_(torch.randint(-1, 2, m.bias.shape).float())
            if isinstance(m, torch.nn.BatchNorm1d):
                m.weight.uniform_(0.5, 2.0)
                m.bias.uniform_(-1.0, 1.0)
                m.running_mean.uniform_(-1.0, 1.0)
                m.running_var.uniform_(0.5, 2.0)
    return net.eval()


def folded_layers(net: torch.nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    """(kernel [out, in, k], bias) of each convolution in forward order, its batchnorm folded in by hand:
    W' = W * gamma / sqrt(var + eps) per output channel, b' = (b - mean) * gamma / sqrt(var + eps) + beta."""
    out = []
    for block in net.blocks:
        for j in (1, 2, 3):
            conv = getattr(block, f"conv{j}")
            w, b = conv.weight.detach().double().numpy(), conv.bias.detach().double().numpy()
            bn = getattr(block, f"bn{j}", None)
            if bn is not None:
                s = bn.weight.detach().double().numpy() / np.sqrt(bn.running_var.double().numpy() + bn.eps)
                w, b = w * s[:, None, None], (b - bn.running_mean.double().numpy()) * s + bn.bias.detach().double().numpy()
            out.append((w, b))
    out.append((net.head.weight.detach().double().numpy(), net.head.bias.detach().double().numpy()))
    return out


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """x [in, L] -> [out, L_out]: zero padding, then a loop over output positions."""
    xp = np.pad(x, ((0, 0), (padding, padding)))
    k = w.shape[2]
    steps = (xp.shape[1] - k) // stride + 1
    return np.stack([np.einsum("oik,ik->o", w, xp[:, t * stride:t * stride + k]) for t in range(steps)], 1) + b[:, None]


@pytest.mark.parametrize("batchnorm", [False, True])
def test_norms_of_a_conv_net_match_hand_values(batchnorm):
    net = tiny_nin(batchnorm)
    layers = folded_layers(net)
    assert len(layers) == 10
    mats = [w.reshape(w.shape[0], -1) for w, _ in layers]  # [out, in * kernel]
    fro2 = np.array([np.sum(m ** 2) for m in mats])
    spec2 = np.array([np.linalg.svd(m, compute_uv=False)[0] ** 2 for m in mats])
    ctx = measure_context(net, x=torch.zeros(4, LENGTH), y=torch.tensor([0, 1, 2, 0]))
    rel = 1e-6 if batchnorm else 1e-9  # genbench folds batchnorm in the model's float32, the hand fold is float64
    assert norm.params(ctx) == sum(m.size for m in mats) == (2 * 3 + 2 * 4) + 2 * (2 * 2 * 3 + 2 * 4) + 3 * 2 == 60
    assert norm.param(ctx) == pytest.approx(fro2.sum(), rel=rel)
    assert norm.fro_prod(ctx) == pytest.approx(np.log(fro2).sum(), rel=rel)
    assert norm.spec_prod(ctx) == pytest.approx(np.log(spec2).sum(), rel=rel)
    d = len(mats)
    assert norm.fro_sum(ctx) == pytest.approx(math.log(d) + np.log(fro2).sum() / d, rel=rel)
    assert norm.spec_sum(ctx) == pytest.approx(math.log(d) + np.log(spec2).sum() / d, rel=rel)
    # the path norm: every parameter squared, an all-ones signal, a numpy forward (ReLU of nonnegative sums is
    # the identity); the head is as wide as what is left
    h = np.ones((1, LENGTH))
    for (w, b), (k, s) in zip(layers[:-1], NIN_LAYERS):
        h = conv1d(h, w ** 2, b ** 2, stride=s, padding=k // 2)
    w, b = layers[-1]
    out = conv1d(h, w ** 2, b ** 2, stride=1, padding=0)
    assert out.shape == (CLASSES, 1)
    assert norm.path(ctx) == pytest.approx(float(out.sum()), rel=rel)


def dense(w: np.ndarray, stride: int, padding: int, length: int) -> np.ndarray:
    """The convolution as a matrix on the flattened [in, L] signal: its columns are the images of the basis signals."""
    basis = np.eye(w.shape[1] * length)
    cols = [conv1d(e.reshape(w.shape[1], length), w, np.zeros(w.shape[0]), stride, padding).ravel() for e in basis]
    return np.stack(cols, 1)


@pytest.mark.parametrize("batchnorm", [False, True])
def test_margins_of_a_conv_net_match_hand_values(batchnorm):
    """DEMOGEN's margins at the input and at each block's last convolution, the activation taken flattened:
    d = (f_y - f_j) / ||grad_a (f_y - f_j)||, the gradient backpropagated by hand through the dense matrices of the
    convolutions and the ReLU masks, and the total variation of the flattened activation over the examples."""
    from genbench.measures import margin

    torch.manual_seed(4)  # 4 channels, He-initialised weights: no example's gradient dies in the ReLUs
    net = build_model("nin", dict(in_shape=[LENGTH], num_classes=CLASSES, base_channels=4, batchnorm=batchnorm))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.Conv1d):
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, torch.nn.BatchNorm1d):
                m.weight.uniform_(0.5, 2.0), m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2.0)
    net.eval()
    layers = folded_layers(net)
    lengths, mats = [LENGTH], []
    schedule = [(k, s, k // 2) for k, s in NIN_LAYERS] + [(layers[-1][0].shape[2], 1, 0)]  # the head: no padding
    for (w, _), (k, s, pad) in zip(layers, schedule):
        mats.append(dense(w, s, pad, lengths[-1]))
        lengths.append((lengths[-1] + 2 * pad - k) // s + 1)
    biases = [np.repeat(b, n) for (_, b), n in zip(layers, lengths[1:])]
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(7, LENGTH, generator=g), torch.tensor([0, 1, 2, 0, 1, 2, 0])
    probes = [2, 5, 8]  # conv3 of each block (pre-ReLU; its batchnorm folded in)
    pre = []  # pre-activations of the ten block convolutions and the logits, per example
    for xi in x.double().numpy():
        h, a_all = xi, []
        for i, (A, b) in enumerate(zip(mats, biases)):
            a = A @ h + b
            a_all.append(a)
            h = np.maximum(a, 0) if i < len(NIN_LAYERS) else a
        pre.append(a_all)
    logits = np.array([a[-1] for a in pre])
    dist = np.zeros((4, len(x)))
    for n, (a_all, yi) in enumerate(zip(pre, y.numpy())):
        order = np.argsort(-logits[n], kind="stable")
        j = order[1] if order[0] == yi else order[0]
        grad = np.eye(CLASSES)[yi] - np.eye(CLASSES)[j]
        grads = {}
        for i in range(len(mats) - 1, -1, -1):  # grad is d(f_y - f_j)/d(output of layer i)
            if i < len(NIN_LAYERS):
                grad = grad * (a_all[i] > 0)
                grads[i] = grad
            grad = mats[i].T @ grad
        norms = np.array([np.linalg.norm(grad)] + [np.linalg.norm(grads[p]) for p in probes])
        # a point whose gradient is zero at a layer (every path through its ReLUs shut) is left out there (NaN)
        dist[:, n] = np.where(norms > 0, logits[n, yi] - logits[n, j], np.nan) / np.where(norms > 0, norms, 1.0)
    acts = [x.double().numpy()] + [np.array([a[p] for a in pre]) for p in probes]
    tv = [a.var(axis=0).sum() for a in acts]
    m = margin.compute_margins(net, net.probe_layers(), iter([(x, y)]))
    last = "bn3" if batchnorm else "conv3"
    assert m.layers == ["input"] + [f"blocks.{i}.{last}" for i in range(3)]
    np.testing.assert_allclose(m.distance, dist, rtol=1e-4)
    np.testing.assert_allclose(m.total_variation, tv, rtol=1e-4)
    assert np.isfinite(dist).mean() > 0.8 and (dist > 0).any() and (dist < 0).any()  # right and wrong examples
