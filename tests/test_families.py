"""Architecture families: shapes, probe layers, config round-trips, parameter counts and options."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from genbench.models import build_model, list_families
from genbench.models.registry import evenly_spaced

N = 5

CASES = [
    ("cnn1d", dict(in_shape=[40], num_classes=3, channels=4)),
    ("cnn1d", dict(in_shape=[2, 40], num_classes=3, channels=4, depth=5, batchnorm=True, dropout=0.3)),
    ("nin", dict(in_shape=[3, 8, 8], num_classes=4, base_channels=8)),
    ("nin", dict(in_shape=[3, 8, 8], num_classes=4, base_channels=8, width=1.5, batchnorm=True, dropout=0.5)),
    ("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=4, base_channels=4, blocks_per_stage=1)),
    ("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=4, base_channels=4, norm="group", width=2)),
]


def _ids(case):
    return f"{case[0]}-{json.dumps(case[1], sort_keys=True)}"


def _run_with_hooks(m: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    mods, captured = dict(m.named_modules()), {}
    handles = [mods[name].register_forward_hook(lambda _m, _i, out, name=name: captured.__setitem__(name, out))
               for name in m.probe_layers()]
    try:
        y = m(x)
    finally:
        for h in handles:
            h.remove()
    return y, captured


def test_families_registered():
    assert {"mlp", "cnn1d", "nin", "resnet32v2"} <= set(list_families())


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_shapes_probes_and_roundtrip(case):
    family, cfg = case
    torch.manual_seed(0)
    m = build_model(family, cfg).eval()
    x = torch.randn(N, *cfg["in_shape"])
    y, captured = _run_with_hooks(m, x)
    assert y.shape == (N, cfg["num_classes"])

    probes = m.probe_layers()
    assert len(probes) == 4 and probes[0] == "input"
    assert len(set(probes)) == 4
    assert set(probes) <= set(dict(m.named_modules()))
    assert list(captured) == probes
    assert all(t.shape[0] == N and t.dim() >= 3 for t in captured.values())
    assert torch.equal(captured["input"].reshape(x.shape), x)
    assert not torch.equal(captured[probes[1]].flatten(1)[:, :3], captured[probes[2]].flatten(1)[:, :3])

    assert json.loads(json.dumps(m.config)) == m.config
    clone = type(m)(**m.config)
    assert clone.config == m.config
    assert [(k, v.shape) for k, v in clone.state_dict().items()] == [(k, v.shape) for k, v in m.state_dict().items()]
    clone.load_state_dict(m.state_dict())
    assert torch.equal(clone.eval()(x), y)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_eval_is_deterministic(case):
    family, cfg = case
    m = build_model(family, {**cfg, **({"dropout": 0.5} if family != "resnet32v2" else {})})
    x = torch.randn(N, *cfg["in_shape"])
    m.train()
    m(x)
    m.eval()
    with torch.no_grad():
        assert torch.equal(m(x), m(x))


def test_dropout_is_active_in_train_mode():
    m = build_model("nin", dict(in_shape=[3, 8, 8], num_classes=4, base_channels=8, dropout=0.5)).train()
    x = torch.randn(N, 3, 8, 8)
    torch.manual_seed(1)
    a = m(x)
    torch.manual_seed(2)
    assert not torch.equal(a, m(x))


def _nparams(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_param_count_cnn1d():
    m = build_model("cnn1d", dict(in_shape=[40], num_classes=3, channels=4, depth=2, kernel_size=3))
    conv1 = 1 * 4 * 3 + 4        # 16
    conv2 = 4 * 4 * 3 + 4        # 52
    head = 4 * 3 + 3             # 15
    assert _nparams(m) == conv1 + conv2 + head == 83
    m_bn = build_model("cnn1d", dict(m.config, batchnorm=True))
    assert _nparams(m_bn) == 83 + 2 * (2 * 4)


def test_param_count_nin():
    m = build_model("nin", dict(in_shape=[3, 8, 8], num_classes=3, base_channels=8))
    conv1x1 = 8 * 8 + 8                          # 72
    block1 = (3 * 8 * 9 + 8) + 2 * conv1x1       # 224 + 144 = 368
    block23 = (8 * 8 * 9 + 8) + 2 * conv1x1      # 584 + 144 = 728
    head = 8 * 3 * 1 * 1 + 3                     # 8x8 -> 4 -> 2 -> 1, so a 1x1 head: 27
    assert _nparams(m) == block1 + 2 * block23 + head == 1851
    m_bn = build_model("nin", dict(m.config, batchnorm=True))
    assert _nparams(m_bn) == 1851 + 9 * (2 * 8)
    m_wide = build_model("nin", dict(m.config, width=1.5))
    assert m_wide.blocks[0].conv1.out_channels == 12


def test_nin_on_signals_counts_and_keeps_its_signal():
    """The NiN transplanted to 1-D: kernels 3 and 1 along the length, the head as wide as what is left (40 -> 20 ->
    10 -> 5); He init, so that ten convolutions without batchnorm do not shrink a signal to nothing (PyTorch's
    default init divides its scale by about 2.4 per layer: 1e-4 after ten)."""
    m = build_model("nin", dict(in_shape=[40], num_classes=3, base_channels=8))
    conv1x1 = 8 * 8 + 8
    block1, block23 = (1 * 8 * 3 + 8) + 2 * conv1x1, (8 * 8 * 3 + 8) + 2 * conv1x1
    head = 8 * 3 * 5 + 3
    assert _nparams(m) == block1 + 2 * block23 + head == 987
    assert build_model("nin", dict(in_shape=[2, 40], num_classes=3, base_channels=8))(torch.randn(4, 2, 40)).shape \
        == (4, 3)
    with pytest.raises(ValueError, match="nin needs in_shape"):
        build_model("nin", dict(in_shape=[1, 2, 3, 4], num_classes=3))
    torch.manual_seed(0)
    x = torch.randn(512, 40)
    with torch.no_grad():
        h = build_model("nin", dict(in_shape=[40], num_classes=3, base_channels=32)).blocks(x.unsqueeze(1))
    assert 0.2 < float(h.square().mean().sqrt()) < 5.0  # the last block's activations keep the input's scale


def test_param_count_resnet():
    m = build_model("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=3, base_channels=4, blocks_per_stage=1))
    stem = 3 * 4 * 9                                          # 108, no bias
    stage1 = 2 * 4 + 4 * 4 * 9 + 2 * 4 + 4 * 4 * 9 + 4 * 4    # norm, conv, norm, conv, projection: 320
    stage2 = 2 * 4 + 4 * 8 * 9 + 2 * 8 + 8 * 8 * 9 + 4 * 8    # 920
    stage3 = 2 * 8 + 8 * 16 * 9 + 2 * 16 + 16 * 16 * 9 + 8 * 16  # 3632
    final = 2 * 16 + 16 * 3 + 3                               # final norm + linear: 83
    assert _nparams(m) == stem + stage1 + stage2 + stage3 + final == 5063
    assert _nparams(build_model("resnet32v2", dict(m.config, norm="group"))) == 5063


def test_resnet32_has_32_weighted_layers():
    m = build_model("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=10, base_channels=4))
    convs = [mod for mod in m.modules() if isinstance(mod, nn.Conv2d) and mod.kernel_size != (1, 1)]
    linears = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
    assert len(convs) == 31 and len(linears) == 1
    assert len(convs) + len(linears) == 32
    assert [m.stage1[0].conv1.out_channels, m.stage2[0].conv1.out_channels, m.stage3[0].conv1.out_channels] == [4, 8, 16]
    x = torch.randn(2, 3, 8, 8)
    _, captured = _run_with_hooks(m.eval(), x)
    assert [tuple(captured[f"stage{i}"].shape[1:]) for i in (1, 2, 3)] == [(4, 8, 8), (8, 4, 4), (16, 2, 2)]


def test_resnet_group_norm_groups():
    m = build_model("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=10, width=4, base_channels=4,
                                       norm="group", blocks_per_stage=1))
    gns = [mod for mod in m.modules() if isinstance(mod, nn.GroupNorm)]
    assert gns and not any(isinstance(mod, nn.BatchNorm2d) for mod in m.modules())
    assert {(g.num_channels, g.num_groups) for g in gns} == {(16, 16), (32, 32), (64, 32)}
    assert all(g.num_groups == min(32, g.num_channels) for g in gns)


def test_resnet_bad_norm():
    with pytest.raises(ValueError, match="batch.*group"):
        build_model("resnet32v2", dict(in_shape=[3, 8, 8], num_classes=10, norm="layer"))


def test_nin_batchnorm_and_dropout_options():
    base = dict(in_shape=[3, 8, 8], num_classes=4, base_channels=8)
    plain = build_model("nin", base)
    assert not any(isinstance(mod, nn.modules.batchnorm._BatchNorm) for mod in plain.modules())
    assert not any(isinstance(mod, nn.Dropout) for mod in plain.modules())
    assert plain.probe_layers() == ["input", "blocks.0.conv3", "blocks.1.conv3", "blocks.2.conv3"]

    bn = build_model("nin", dict(base, batchnorm=True))
    mods = dict(bn.named_modules())
    assert sum(isinstance(mod, nn.BatchNorm2d) for mod in bn.modules()) == 9
    assert all(isinstance(mods[name], nn.BatchNorm2d) for name in bn.probe_layers()[1:])

    drop = build_model("nin", dict(base, dropout=0.2))
    drops = [name for name, mod in drop.named_modules() if isinstance(mod, nn.Dropout)]
    assert drops == ["blocks.0.drop", "blocks.1.drop"]
    assert all(mod.p == 0.2 for mod in drop.modules() if isinstance(mod, nn.Dropout))


def test_nin_head_covers_remaining_extent():
    m = build_model("nin", dict(in_shape=[3, 32, 32], num_classes=10, base_channels=8))
    assert m.head.kernel_size == (4, 4)
    _, captured = _run_with_hooks(m.eval(), torch.randn(2, 3, 32, 32))
    assert [tuple(captured[n].shape[2:]) for n in m.probe_layers()[1:]] == [(16, 16), (8, 8), (4, 4)]


def test_cnn1d_probes_and_input():
    m = build_model("cnn1d", dict(in_shape=[40], num_classes=3, channels=4, depth=6, batchnorm=True))
    assert m.probe_layers() == ["input", "blocks.1.bn", "blocks.3.bn", "blocks.5.bn"]
    assert m.probe_layers()[1:] == evenly_spaced([f"blocks.{i}.bn" for i in range(6)])
    _, captured = _run_with_hooks(m.eval(), torch.randn(N, 40))
    assert captured["input"].shape == (N, 1, 40)
    assert captured["blocks.1.bn"].shape == (N, 4, 10)
    assert (captured["blocks.1.bn"] < 0).any()
    nobn = build_model("cnn1d", dict(m.config, batchnorm=False))
    assert nobn.probe_layers()[1:] == ["blocks.1.conv", "blocks.3.conv", "blocks.5.conv"]
