"""Builders shared by the tests: a tiny genbench MLP with hand-set weights, a MeasureContext around a model, and a
record's command line read back by the CLI's own parser. Tests import it as a sibling module (`from helpers import
hand_mlp, measure_context`)."""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from genbench.defaults import SEED
from genbench.measures.context import MeasureContext, TrainingSet
from genbench.models.mlp import MLP


def hand_mlp(weights: Sequence[Any], biases: Sequence[Any] | None = None, *, batchnorm: bool = False) -> MLP:
    """An eval-mode genbench MLP whose Linear layers hold `weights` (nested lists or tensors, one row per output),
    in order, the last one the head: depth = len(weights) - 1 hidden layers of width len(weights[0]) (depth 0 is a
    linear classifier). `biases` gives one bias per layer, None for zeros; all biases are zero without it. With
    `batchnorm` every hidden layer gets a BatchNorm at its defaults (running mean 0, variance 1, scale 1, shift 0)."""
    ws = [torch.as_tensor(w, dtype=torch.float32) for w in weights]
    bs = [None] * len(ws) if biases is None else list(biases)
    if len(bs) != len(ws):
        raise ValueError(f"{len(ws)} weight matrices but {len(bs)} biases")
    depth = len(ws) - 1
    net = MLP(in_shape=[ws[0].shape[1]], num_classes=ws[-1].shape[0],
              width=ws[0].shape[0] if depth else ws[0].shape[1], depth=depth, batchnorm=batchnorm)
    layers = [net.blocks[i].fc for i in range(depth)] + [net.head]
    with torch.no_grad():
        for lin, w, b in zip(layers, ws, bs):
            lin.weight.copy_(w)
            if b is None:
                lin.bias.zero_()
            else:
                lin.bias.copy_(torch.as_tensor(b, dtype=torch.float32))
    return net.eval()


def measure_context(model: nn.Module, train: TrainingSet | None = None, *, x: Any = None, y: Any = None,
                    num_classes: int | None = None, data_kind: str = "signal", augmentation: dict | None = None,
                    init: nn.Module | None = None, needs: Sequence[str] = (), measure: str = "measure",
                    seed: int = SEED, memo: dict | None = None,
                    cls: type[MeasureContext] = MeasureContext) -> MeasureContext:
    """A `cls` context on `model`, probing its own probe_layers(). The training set is `train`, or one made from
    `x` (as float32) and `y` with `num_classes` classes (default: the largest label + 1), `data_kind` and
    `augmentation`; `init` is the model at its initial weights. The other arguments go to the context as they are:
    fix a test file's measure name and needs once with functools.partial."""
    if x is not None or y is not None:
        if train is not None:
            raise ValueError("give either a training set or x and y, not both")
        x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)
        train = TrainingSet(x, y, num_classes=int(y.max()) + 1 if num_classes is None else num_classes,
                            data_kind=data_kind, augmentation={} if augmentation is None else augmentation)
    return cls(model=model, probe_layers=model.probe_layers(), measure=measure, needs=tuple(needs), seed=seed,
               train=train, init_model=init, memo=memo)


def parsed_command(command: str) -> tuple[str, dict[str, Any]]:
    """The subcommand a recorded `genbench ...` command line names and the parameters the CLI's parser reads from it
    (every option, defaults included): an option that does not exist, or a value it refuses, raises."""
    import typer.main

    from genbench.cli import app
    words = shlex.split(command)
    assert words[0] == "genbench", command
    group, path, rest = typer.main.get_command(app), [], words[1:]
    while hasattr(group, "commands") and rest and rest[0] in group.commands:
        path.append(rest[0])
        group, rest = group.commands[rest[0]], rest[1:]
    ctx = group.make_context(" ".join(path), rest)
    return " ".join(path), dict(ctx.params)
