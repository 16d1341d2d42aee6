"""Batched (stacked) training equals the plain one-model torch.optim loop, model by model."""
from __future__ import annotations

import pytest
import torch

from genbench.zoo.build import plan_groups
from genbench.zoo.data import load_pool
from genbench.zoo.recipe import parse_recipe
from genbench.models.mlp import dropout_codes, stacked_mlp_forward
from genbench.models import build_model
from genbench.zoo.train import _flush_, train_group, train_one


@pytest.fixture(scope="module")
def pool():
    return load_pool({"name": "digits"})


def _recipe(family, arch, grid, **train):
    return parse_recipe({"name": "t", "dataset": {"name": "digits"}, "family": family, "arch": arch, "grid": grid,
                         "train": {"epochs": 2, "batch_size": 32, "train_size": 400, **train}})


def _assert_same(batched, reference, atol):
    for a, b in zip(batched, reference):
        assert a.spec.model_id == b.spec.model_id
        assert (a.epochs, a.steps) == (b.epochs, b.steps)
        assert a.state.keys() == b.state.keys()
        for k in a.state:
            assert torch.allclose(a.state[k].float(), b.state[k].float(), atol=atol, rtol=0), k
        for k in a.init_state:
            assert torch.equal(a.init_state[k], b.init_state[k])


CASES = [
    # SGD + momentum: per-model init, data order, lr, weight decay, augmentation, label noise, batchnorm
    ("mlp", {"width": 16}, {"batchnorm": [False, True], "weight_decay": [0.0, 0.01], "augment": [False, True],
                             "lr": [0.01, 0.05]}, {"optimizer": "sgd", "label_noise": 0.1, "lr_milestones": [1]}),
    # Adam (without batchnorm: Adam turns the float noise in the zero gradient of a bias before BN into steps)
    ("mlp", {"width": 16}, {"weight_decay": [0.0, 0.01], "lr": [0.001, 0.003], "seed": [0, 1]}, {"optimizer": "adam"}),
    # the convolutional families' grouped convolutions (models/stacked.py)
    ("cnn1d", {"channels": 4}, {"batchnorm": [False, True], "lr": [0.01, 0.05], "augment": [False, True]},
     {"optimizer": "sgd", "weight_decay": 0.001}),
    ("cnn1d", {"channels": 4, "depth": 2}, {"weight_decay": [0.0, 0.01], "lr": [0.001, 0.003]}, {"optimizer": "adam"}),
]


@pytest.mark.parametrize("family,arch,grid,train", CASES, ids=["mlp-sgd", "mlp-adam", "cnn1d-sgd", "cnn1d-adam"])
def test_one_epoch_batched_equals_one_by_one(pool, family, arch, grid, train):
    specs = _recipe(family, arch, grid, **train).expand()
    for group in plan_groups(specs):
        assert len(group) >= 2
        _assert_same(train_group(group, pool), [train_one(s, pool) for s in group], atol=1e-4)


def test_nin_on_signals_batched_equals_one_by_one_in_float64(pool):
    """DEMOGEN's NiN on signals (the official DEMOGEN zoo's family) trains channels last with a hand-written backward
    (models/stacked_signals.py). In float32 its sums run in another order than Conv1d's, and train-mode batchnorm
    over 5 channels amplifies that rounding into different trajectories within two epochs (0.03 here); in float64
    both ways must agree to rounding."""
    import dataclasses
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        wide = dataclasses.replace(pool, x_train=pool.x_train.double(), x_test=pool.x_test.double())
        specs = _recipe("nin", {"base_channels": 5}, {"batchnorm": [False, True], "lr": [0.01, 0.03],
                                                      "augment": [False, True], "weight_decay": [0.0, 0.002]},
                        optimizer="sgd", momentum=0.9).expand()
        for group in plan_groups(specs):
            assert len(group) >= 4
            _assert_same(train_group(group, wide), [train_one(s, wide) for s in group], atol=1e-10)
    finally:
        torch.set_default_dtype(old)


def _signal_params(model, m, scale=0.5):
    params = {k: (torch.randn(m, *p.shape) * scale).requires_grad_() for k, p in model.named_parameters()}
    buffers = {k: torch.stack([v] * m).clone() for k, v in model.named_buffers()}
    for k, v in buffers.items():  # running statistics away from their defaults
        if k.endswith("running_mean"):
            v.uniform_(-0.5, 0.5)
        elif k.endswith("running_var"):
            v.uniform_(0.5, 2.0)
    return params, buffers


def _signal_cases():
    from genbench.models.stacked_signals import Conv, Drop, Head, Norm, Relu
    from genbench.models.cnn1d import CNN1D

    def cnn(kernel, stride, bn):  # cnn1d's module supplies parameters of the right shapes; the head is its Linear
        layers = []
        for i in range(3):
            layers += [Conv(f"blocks.{i}.conv", kernel, stride, kernel // 2)]
            layers += [Norm(f"blocks.{i}.bn", 1e-5, 0.1)] if bn else []
            layers += [Relu(), Drop()]
        return lambda length: CNN1D(in_shape=[length], num_classes=4, channels=5, depth=3, kernel_size=kernel,
                                    stride=stride, batchnorm=bn), layers + [Head("head", "mean")]

    return {"cnn-k5-s2-bn": cnn(5, 2, True), "cnn-k3-s1": cnn(3, 1, False), "cnn-k7-s2": cnn(7, 2, False)}


@pytest.mark.parametrize("length", [40, 37])
@pytest.mark.parametrize("case", ["nin", "nin-bn", "nin-2ch", "cnn-k5-s2-bn", "cnn-k3-s1", "cnn-k7-s2"])
def test_hand_written_signal_gradient_is_autograds_in_float64(case, length):
    """models/stacked_signals.py: the gradient written by hand equals autograd's through the same stacked forward
    (float64, each model with its own dropout rate and the same masks), the running statistics move the same way,
    and in eval mode each model's logits are its own module's."""
    from genbench.models.stacked import dropout_rates
    from genbench.models.stacked_signals import StackedSignals
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        m, b = 3, 16
        archs = [{"dropout": r} for r in (0.0, 0.3, 0.5)]
        channels = [2] if case == "nin-2ch" else []  # signals [C, L] as well as [L]
        if case.startswith("nin"):
            make = lambda n: build_model("nin", dict(in_shape=[*channels, n], num_classes=4,  # noqa: E731
                                                     base_channels=5, batchnorm=case != "nin"))
            net = make(length).stacked_gradient(archs, "cpu")
        else:
            make, layers = _signal_cases()[case]
            net = StackedSignals(layers, dropout_rates(archs, "cpu", layout=(-1, 1, 1)))
        model = make(length)
        params, buffers = _signal_params(model, m)
        twin = {k: v.clone() for k, v in buffers.items()}
        x, y = torch.randn(m, b, *channels, length), torch.randint(0, 4, (m, b))
        torch.manual_seed(1)
        logits = net.forward(params, buffers, x, True)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), y.reshape(-1), reduction="sum") / b
        expected = torch.autograd.grad(loss, list(params.values()))
        grads = {k: torch.full_like(p, float("nan")) for k, p in params.items()}
        torch.manual_seed(1)
        net(params, twin, x, y, grads)
        scale = max(e.abs().max().item() for e in expected)
        for (k, g), e in zip(grads.items(), expected):
            assert torch.allclose(g, e, rtol=0, atol=1e-12 * scale), k
        for k in buffers:
            assert torch.equal(buffers[k], twin[k]), k
        ev = net.forward(params, twin, x, False)
        for i in range(m):
            one = make(length).eval()
            one.load_state_dict({**{k: v[i].detach() for k, v in params.items()}, **{k: v[i] for k, v in twin.items()}})
            assert torch.allclose(ev[i], one(x[i]), rtol=0, atol=1e-12), i
    finally:
        torch.set_default_dtype(old)


def test_a_convolution_the_grouped_reading_cannot_do_is_refused():
    from genbench.models.stacked_signals import Conv, Head, fits
    assert fits([Conv("a", 3, 2, 1), Conv("b", 5, 2, 2), Conv("c", 1), Head("head", "mean")], 37)
    assert not fits([Conv("a", 4, 2, 2), Head("head", "mean")], 40)  # even kernel: 21 steps out, not 20
    assert not fits([Conv("a", 3, 1, 0), Head("head", "mean")], 40)  # no padding: 38 steps out


def test_groups_split_by_shape_not_by_dropout():
    specs = _recipe("mlp", {}, {"width": [8, 16], "batchnorm": [False, True], "dropout": [0.0, 0.5]}).expand()
    groups = plan_groups(specs)
    assert len(groups) == 4 and all(len(g) == 2 for g in groups)
    assert all({s.arch["dropout"] for s in g} == {0.0, 0.5} for g in groups)
    assert [len(g) for g in plan_groups(specs * 1, max_group=1)] == [1] * 8


def test_stacked_dropout_is_per_model():
    torch.manual_seed(0)
    m, b, d, w = 3, 512, 5, 64
    params = {"blocks.0.fc.weight": torch.randn(m, w, d), "blocks.0.fc.bias": torch.ones(m, w),
              "head.weight": torch.eye(w)[None, :10].expand(m, 10, w).contiguous(), "head.bias": torch.zeros(m, 10)}
    params["blocks.0.fc.weight"].zero_()
    x = torch.randn(m, b, d)
    keep = torch.tensor([1.0, 0.5, 0.8]).view(-1, 1, 1)
    out = stacked_mlp_forward(params, {}, x, depth=1, batchnorm=False, dropout=dropout_codes(keep), train=True)
    assert torch.equal(out[0], torch.ones(b, 10))  # keep = 1: untouched
    for i, k in ((1, 0.5), (2, 0.8)):
        kept = (out[i] != 0).float().mean().item()
        assert abs(kept - k) < 0.03
        assert torch.allclose(out[i][out[i] != 0], torch.full_like(out[i][out[i] != 0], 1 / k))
    ev = stacked_mlp_forward(params, {}, x, depth=1, batchnorm=False, dropout=dropout_codes(keep), train=False)
    assert torch.equal(ev, torch.ones(m, b, 10))


def test_dropout_codes_quantise_the_keep_probability_to_16_bits():
    thr, scale = dropout_codes(torch.tensor([1.0, 0.8, 0.5]))
    kept = (thr.double() + 32769) / 65536  # codes in [-32768, 32767] at or below the threshold
    assert thr[0] == 32767 and kept[0] == 1.0 and kept[2] == 0.5
    assert abs(kept[1] - 0.8) <= 0.5 / 65536
    assert torch.allclose(scale.double(), 1 / kept)


def test_optimizer_state_is_flushed_of_subnormals():
    x = torch.tensor([1e-40, -1e-40, 1.2e-38, -3.0, 0.0])
    assert torch.equal(_flush_(x.clone()), torch.tensor([0.0, 0.0, 1.2e-38, -3.0, 0.0]))
    tiny = torch.finfo(torch.float32).tiny
    y = torch.tensor([1e-40, -1e-40, 1.2e-38, -3.0, 0.0, -0.0, tiny, -tiny, float("nan")])
    expected = torch.nn.functional.hardshrink(y, tiny)  # the out-of-place flush the optimizer used before
    assert _flush_(y) is y and torch.equal(y.view(torch.int32), expected.view(torch.int32))  # in place, same bits


def _bits(t):
    return t.detach().contiguous().view(torch.int32)


@pytest.mark.parametrize("rates", [None, [0.0, 0.3, 0.5]], ids=["no-dropout", "dropout"])
def test_hand_written_stacked_mlp_gradient_is_autograds_bit_for_bit(rates):
    torch.manual_seed(0)
    m, b, d = 3, 16, 5
    model = build_model("mlp", dict(in_shape=[d], num_classes=4, width=8, depth=2))
    archs = [{"dropout": r} for r in (rates or [0.0] * m)]
    params = {k: (torch.randn(m, *p.shape) * 0.5).requires_grad_() for k, p in model.named_parameters()}
    x, y = torch.randn(m, b, d), torch.randint(0, 4, (m, b))
    torch.manual_seed(1)  # the same dropout masks both ways
    logits = model.stacked_forward(archs, "cpu")(params, {}, x, True)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), y.reshape(-1), reduction="sum") / b
    expected = torch.autograd.grad(loss, list(params.values()))
    torch.manual_seed(1)
    grads = {k: torch.empty_like(p) for k, p in params.items()}
    gradient = model.stacked_gradient(archs, "cpu")
    for _ in range(2):  # buffers reused from the first call
        torch.manual_seed(1)
        gradient(params, {}, x, y, grads)
        for (k, g), e in zip(grads.items(), expected):
            assert torch.equal(_bits(g), _bits(e)), k
    bn = build_model("mlp", dict(in_shape=[d], num_classes=4, width=8, depth=2, batchnorm=True))
    assert bn.stacked_gradient(archs, "cpu") is None  # batchnorm: trained through autograd


def test_stopping_rule_snapshots_each_model_when_it_fits(pool):
    specs = _recipe("mlp", {"width": 32}, {"lr": [0.0001, 0.1]}, epochs=40,
                    stop={"metric": "train_acc", "threshold": 1.0}, train_size=100).expand()
    fast_lr, slow_lr = specs[1], specs[0]
    trained = {t.spec.model_id: t for t in train_group(specs, pool)}
    fast, slow = trained[fast_lr.model_id], trained[slow_lr.model_id]
    assert fast.converged and fast.epochs < 40
    assert not slow.converged and slow.epochs == 40
    ref = train_one(fast_lr, pool)
    assert ref.converged and ref.epochs == fast.epochs


@pytest.mark.parametrize("optimizer,lrs", [("sgd", [0.03, 0.05, 0.1]), ("adam", [0.003, 0.005, 0.02])])
def test_models_leave_the_stack_when_they_fit_and_the_rest_train_on_unchanged(pool, optimizer, lrs):
    specs = _recipe("mlp", {"width": 32}, {"lr": lrs}, epochs=40, optimizer=optimizer, weight_decay=0.001,
                    stop={"metric": "train_acc", "threshold": 1.0}, train_size=100).expand()
    batched = train_group(specs, pool)
    reference = [train_one(s, pool) for s in specs]
    assert len({t.epochs for t in batched}) == 3  # each finished (or hit the cap) at its own epoch
    assert [t.converged for t in batched] == [t.converged for t in reference]
    _assert_same(batched, reference, atol=1e-4)


def _images(n: int = 256, classes: int = 4):
    """A small image pool (8 x 8 RGB, random): the NiN's shapes without downloading CIFAR."""
    from genbench.zoo.data import Pool
    g = torch.Generator().manual_seed(0)
    return Pool(x_train=torch.randn(n, 3, 8, 8, generator=g), y_train=torch.randint(0, classes, (n,), generator=g),
                x_test=torch.randn(64, 3, 8, 8, generator=g), y_test=torch.randint(0, classes, (64,), generator=g),
                num_classes=classes, kind="image")


@pytest.mark.parametrize("family,arch,grid", [
    ("nin", {"base_channels": 4}, {"batchnorm": [False, True], "lr": [0.01, 0.03], "augment": [False, True]}),
    ("resnet32v2", {"base_channels": 4, "blocks_per_stage": 1}, {"norm": ["batch", "group"], "lr": [0.01, 0.03]}),
], ids=["nin", "resnet32v2"])
def test_image_families_batched_equal_one_by_one(family, arch, grid):
    pool = _images()
    recipe = parse_recipe({"name": "t", "dataset": {"name": "digits"}, "family": family, "arch": arch, "grid": grid,
                           "train": {"epochs": 2, "batch_size": 32, "train_size": 128, "optimizer": "sgd",
                                     "weight_decay": 0.001}})
    for group in plan_groups(recipe.expand()):
        assert len(group) >= 2
        _assert_same(train_group(group, pool), [train_one(s, pool) for s in group], atol=1e-4)


@pytest.mark.parametrize("family,arch,shape", [("cnn1d", {"channels": 6, "depth": 2}, (40,)),
                                                ("nin", {"base_channels": 6}, (3, 8, 8)),
                                                ("nin", {"base_channels": 6}, (40,))])
def test_conv_dropout_is_per_model_and_off_in_eval(family, arch, shape):
    """Grouped stacked forward: in eval mode each model's logits are its own module's; in train mode, model 0
    (rate 0) is untouched and the others differ from it only through their own dropout."""
    from genbench.zoo.train import _stacked_forward, _views
    torch.manual_seed(0)
    archs = [{**arch, "in_shape": list(shape), "num_classes": 5, "dropout": r} for r in (0.0, 0.5, 0.9)]
    models = [build_model(family, a).eval() for a in archs]
    names = [k for k, _ in models[0].named_parameters()]
    flat = torch.stack([torch.cat([m.state_dict()[k].flatten() for k in names]) for m in models])
    params = _views(flat, {k: p.shape for k, p in models[0].named_parameters()}, grad=False)
    forward = _stacked_forward([type("S", (), {"arch": a})() for a in archs], models[0], "cpu")
    x = torch.randn(256, *shape)
    xs = x.expand(3, *x.shape)
    ev = forward(params, {}, xs, False)
    for i, m in enumerate(models):
        assert torch.allclose(ev[i], m(x), atol=1e-5)
    tr = forward(params, {}, xs, True)
    assert torch.allclose(tr[0], ev[0], atol=1e-5)  # rate 0: no unit dropped
    assert not torch.allclose(tr[1], ev[1], atol=1e-3) and not torch.allclose(tr[2], ev[2], atol=1e-3)


def test_the_gpu_script_runs_on_the_cpu_at_a_tiny_size(tmp_path):
    """benchmarks/gpu.sh is what the device machine runs; here, without one, its tiny CPU form must still work and
    its figures must be the ones its own timings give."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "SIZE": "tiny", "DEVICES": "cpu", "PYTHON": sys.executable, "JSON": str(tmp_path / "f.json"),
           "GENBENCH_BUILD_THREADS": "2"}
    out = subprocess.run(["bash", str(root / "benchmarks" / "gpu.sh")], env=env, capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    [r] = json.loads((tmp_path / "f.json").read_text())
    size = r["size"]
    assert r["name"] == "CPU, 2 threads" and size["base_channels"] == 4
    assert r["models_per_hour"] == pytest.approx(size["models"] * 3600 / r["build_s"])
    assert r["speedup"] == pytest.approx(r["one_by_one_s"] / r["batched_s"])
    full = 3600 * size["models"] / (r["build_s"] / (size["epochs"] * size["n_train"]) * 380 * 50_000)
    assert r["full_recipe_models_per_hour"] == pytest.approx(full)
    # every built-in ran; on a NiN only the MLP-only marginal likelihood gives no value
    from genbench.measures import registry
    assert r["catalogue_measures"] == len(registry.resolve_measures("*"))
    assert r["catalogue_failed"] == ["pacbayes.marginal_likelihood"]
    table = out.stdout.split("a slice on CIFAR-shaped random data")[1]
    assert f"{r['speedup']:.2f}x" in table and f"{r['catalogue_s_per_model']:.1f}" in table


def test_a_family_without_a_stacked_forward_trains_through_vmap_with_one_warning(pool):
    from genbench.zoo.train import SlowTrainingWarning, _stacked_forward
    specs = _recipe("mlp", {"width": 4}, {"lr": [0.01, 0.02]}).expand()
    plain = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))  # no stacked_forward
    with pytest.warns(SlowTrainingWarning, match="'Sequential' has no stacked forward"):
        forward = _stacked_forward(specs, plain, "cpu")
    params = {k: torch.stack([v.detach()] * 2) for k, v in plain.named_parameters()}
    x = torch.randn(2, 5, 8, 8)
    assert torch.allclose(forward(params, {}, x, False)[0], plain(x[0]), atol=1e-6)
