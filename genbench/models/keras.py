"""A Keras Sequential model (the layer list of a PGDL `config.json`) rebuilt as an equivalent torch network.

Images enter channels first ([C, H, W], as in every genbench zoo); Keras's channels-last kernels are transposed when
its weights are loaded (`keras_state_dict`), and Flatten flattens in Keras's [H, W, C] order, so the network computes
what the Keras model computes. A final softmax is left out: genbench measures take logits, and softmax keeps the
argmax, so accuracies are unchanged."""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import GenbenchError
from .registry import evenly_spaced, register_family

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "linear": None}  # and softmax (below)
# Keras options that change training only (initial values, penalties, statistics updates), never the forward pass.
_TRAINING_ONLY = ("name", "trainable", "dtype", "momentum", "seed", "noise_shape")
_TRAINING_SUFFIXES = ("_initializer", "_regularizer", "_constraint")
# The options each mapped layer reads; any other option is refused rather than silently ignored.
_OPTIONS: dict[str, set[str]] = {
    "Dense": {"units", "activation", "use_bias"},
    "Conv2D": {"filters", "kernel_size", "strides", "padding", "dilation_rate", "activation", "use_bias", "groups",
               "data_format"},
    "MaxPooling2D": {"pool_size", "strides", "padding", "data_format"},
    "AveragePooling2D": {"pool_size", "strides", "padding", "data_format"},
    "GlobalAveragePooling2D": {"data_format", "keepdims"},
    "GlobalMaxPooling2D": {"data_format", "keepdims"},
    "BatchNormalization": {"axis", "epsilon", "center", "scale"},
    "Dropout": {"rate"},
    "Flatten": {"data_format"},
    "Activation": {"activation"},
}
SUPPORTED_LAYERS = tuple(_OPTIONS)


SIZES = ("units", "filters", "kernel_size", "strides", "pool_size", "dilation_rate", "groups")
MAX_SIZE = 1 << 20  # a layer's width, kernel or stride at most: no network of a zoo has more


def _size(v: Any) -> bool:
    """Whether `v` is a layer size a config can give: a whole number from 1 to MAX_SIZE."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and 1 <= v <= MAX_SIZE


def _pair(v: Any, default: Any = None) -> tuple[int, int]:
    v = default if v is None else v
    return (int(v), int(v)) if isinstance(v, (int, float)) else (int(v[0]), int(v[1]))


def _same_pads(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int] = (1, 1)
               ) -> tuple[int, int, int, int]:
    """TensorFlow's 'same' padding (left, right, top, bottom): the extra row/column goes after, not before."""
    pads = []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return left, right, top, bottom


def _out_size(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: str,
              dilation: Sequence[int] = (1, 1)) -> list[int]:
    if padding == "same":
        return [math.ceil(n / s) for n, s in zip(size, stride)]
    return [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(size, kernel, stride, dilation)]


class ChannelsLastFlatten(nn.Module):
    """Flatten [N, C, H, W] in Keras's order ([N, H, W, C] flattened), so the next Dense reads its kernel as stored."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1).flatten(1) if x.dim() == 4 else x.flatten(1)


class Softmax(nn.Module):
    """Keras's softmax: over the last axis, which is the channel axis (dim 1) of a [N, C, H, W] map."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(x, dim=1 if x.dim() == 4 else -1)


class AvgPoolSame(nn.Module):
    """TensorFlow's 'same' average pooling: the padded positions do not count in the mean."""

    def __init__(self, pads: tuple[int, int, int, int], kernel: tuple[int, int], stride: tuple[int, int]):
        super().__init__()
        self.pads, self.kernel, self.stride = pads, kernel, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = F.avg_pool2d(F.pad(x, self.pads), self.kernel, self.stride)
        ones = F.pad(torch.ones_like(x[:1, :1]), self.pads)
        return total / F.avg_pool2d(ones, self.kernel, self.stride)


class _Builder:
    """Walks the Keras layer list, tracking the Keras-side shape ([H, W, C] or [F]), and adds torch modules."""

    def __init__(self, input_shape: Sequence[int]):
        self.shape = [int(s) for s in input_shape]
        self.modules: OrderedDict[str, nn.Module] = OrderedDict(input=nn.Identity())
        # (module name, Keras layer type, Keras weight names) of each layer with weights, in order
        self.weighted: list[tuple[str, str, tuple[str, ...]]] = []

    def add(self, i: int, spec: Mapping[str, Any]) -> None:
        kind = spec.get("layer_name")
        if kind not in _OPTIONS:
            raise GenbenchError(f"Keras layer {i} has type {kind!r}, which genbench does not map to torch; supported "
                                f"layer types: {', '.join(SUPPORTED_LAYERS)}")
        opts = {k: v for k, v in spec.items() if k != "layer_name"}
        unknown = sorted(k for k in opts if k not in _OPTIONS[kind] and k not in _TRAINING_ONLY
                         and not k.endswith(_TRAINING_SUFFIXES))
        if unknown:
            raise GenbenchError(f"Keras layer {i} ({kind}): option(s) {unknown} are not mapped to torch (mapped: "
                                f"{sorted(_OPTIONS[kind])}); genbench cannot rebuild this model exactly")
        if str(opts.get("padding", "valid")).lower() not in ("valid", "same"):
            raise GenbenchError(f"Keras layer {i} ({kind}): padding {opts['padding']!r} is not supported (only "
                                "'valid' and 'same')")
        if opts.get("data_format") not in (None, "channels_last"):
            raise GenbenchError(f"Keras layer {i} ({kind}): data_format {opts['data_format']!r} is not supported "
                                "(only channels_last, Keras's default)")
        for key in SIZES:  # a lying config: torch's negative dimension, a ZeroDivisionError, terabytes asked for
            v = opts.get(key)
            if v is not None and not all(_size(x) for x in (v if isinstance(v, (list, tuple)) else [v])):
                raise GenbenchError(f"Keras layer {i} ({kind}): {key} {v!r}: a layer size is a whole number from 1 "
                                    f"to {MAX_SIZE}; this config cannot describe a model")
        rate = opts.get("rate", 0.0)
        if kind == "Dropout" and not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 <= rate < 1):
            raise GenbenchError(f"Keras layer {i} (Dropout): rate {rate!r} is not a fraction in [0, 1)")
        handler = "_activation_layer" if kind == "Activation" else "_" + kind.lower()
        try:
            getattr(self, handler)(f"{kind.lower()}{i}", opts)
        except KeyError as e:
            raise GenbenchError(f"Keras layer {i} ({kind}) lacks the option {e.args[0]!r}") from None

    def _need_rank(self, name: str, rank: int, what: str) -> None:
        if len(self.shape) != rank:
            raise GenbenchError(f"Keras layer {name}: {what} needs an input of rank {rank}, got shape {self.shape}")

    def _activation(self, name: str, activation: Any) -> None:
        act = "linear" if activation is None else activation
        if act == "softmax":
            self.modules[name] = Softmax()
        elif isinstance(act, str) and act in ACTIVATIONS:
            if ACTIVATIONS[act] is not None:
                self.modules[name] = ACTIVATIONS[act]()
        else:
            raise GenbenchError(f"Keras activation {act!r} (at {name}) is not mapped; supported: "
                                f"{', '.join([*ACTIVATIONS, 'softmax'])}")

    def _dense(self, name: str, o: dict[str, Any]) -> None:
        self._need_rank(name, 1, "Dense (put a Flatten before it)")
        units = int(o["units"])
        bias = bool(o.get("use_bias", True))
        self.modules[name] = nn.Linear(self.shape[0], units, bias=bias)
        self.weighted.append((name, "Dense", ("kernel", "bias") if bias else ("kernel",)))
        self.shape = [units]
        self._activation(name + "_act", o.get("activation"))

    def _conv2d(self, name: str, o: dict[str, Any]) -> None:
        self._need_rank(name, 3, "Conv2D")
        h, w, c = self.shape
        k, s, d = _pair(o["kernel_size"]), _pair(o.get("strides"), 1), _pair(o.get("dilation_rate"), 1)
        padding, groups, filters = str(o.get("padding", "valid")).lower(), int(o.get("groups", 1)), int(o["filters"])
        pads = _same_pads((h, w), k, s, d) if padding == "same" else (0, 0, 0, 0)
        if pads[0] == pads[1] and pads[2] == pads[3]:
            pad_arg: Any = (pads[2], pads[0])
        else:
            self.modules[name + "_pad"] = nn.ZeroPad2d(pads)
            pad_arg = 0
        bias = bool(o.get("use_bias", True))
        self.modules[name] = nn.Conv2d(c, filters, k, stride=s, padding=pad_arg, dilation=d, groups=groups, bias=bias)
        self.weighted.append((name, "Conv2D", ("kernel", "bias") if bias else ("kernel",)))
        self.shape = [*_out_size((h, w), k, s, padding, d), filters]
        self._activation(name + "_act", o.get("activation"))

    def _pooling(self, name: str, o: dict[str, Any], kind: str) -> None:
        self._need_rank(name, 3, kind)
        h, w, c = self.shape
        k = _pair(o.get("pool_size"), 2)
        s = _pair(o.get("strides"), k)
        padding = str(o.get("padding", "valid")).lower()
        pads = _same_pads((h, w), k, s) if padding == "same" else (0, 0, 0, 0)
        if kind == "MaxPooling2D":
            if any(pads):
                self.modules[name + "_pad"] = nn.ConstantPad2d(pads, float("-inf"))
            self.modules[name] = nn.MaxPool2d(k, s)
        else:
            self.modules[name] = AvgPoolSame(pads, k, s) if any(pads) else nn.AvgPool2d(k, s)
        self.shape = [*_out_size((h, w), k, s, padding), c]

    def _maxpooling2d(self, name: str, o: dict[str, Any]) -> None:
        self._pooling(name, o, "MaxPooling2D")

    def _averagepooling2d(self, name: str, o: dict[str, Any]) -> None:
        self._pooling(name, o, "AveragePooling2D")

    def _global(self, name: str, o: dict[str, Any], kind: str, pool: type[nn.Module]) -> None:
        self._need_rank(name, 3, kind)
        self.modules[name] = pool(1)
        if o.get("keepdims"):
            self.shape = [1, 1, self.shape[-1]]
        else:
            self.modules[name + "_flat"] = nn.Flatten()
            self.shape = [self.shape[-1]]

    def _globalaveragepooling2d(self, name: str, o: dict[str, Any]) -> None:
        self._global(name, o, "GlobalAveragePooling2D", nn.AdaptiveAvgPool2d)

    def _globalmaxpooling2d(self, name: str, o: dict[str, Any]) -> None:
        self._global(name, o, "GlobalMaxPooling2D", nn.AdaptiveMaxPool2d)

    def _batchnormalization(self, name: str, o: dict[str, Any]) -> None:
        axis = o.get("axis", -1)
        axis = axis[0] if isinstance(axis, (list, tuple)) and len(axis) == 1 else axis
        if axis not in (-1, len(self.shape)):
            raise GenbenchError(f"Keras layer {name}: BatchNormalization over axis {axis} is not supported (only the "
                                "channel axis, -1)")
        norm = nn.BatchNorm2d if len(self.shape) == 3 else nn.BatchNorm1d
        if len(self.shape) not in (1, 3):
            raise GenbenchError(f"Keras layer {name}: BatchNormalization needs an input of rank 1 or 3, got {self.shape}")
        self.modules[name] = norm(self.shape[-1], eps=float(o.get("epsilon", 1e-3)))
        names = ("gamma",) * bool(o.get("scale", True)) + ("beta",) * bool(o.get("center", True))
        self.weighted.append((name, "BatchNormalization", (*names, "moving_mean", "moving_variance")))

    def _dropout(self, name: str, o: dict[str, Any]) -> None:
        self.modules[name] = nn.Dropout(float(o.get("rate", 0.0)))

    def _flatten(self, name: str, o: dict[str, Any]) -> None:
        self.modules[name] = ChannelsLastFlatten()
        self.shape = [math.prod(self.shape)]

    def _activation_layer(self, name: str, o: dict[str, Any]) -> None:
        self._activation(name, o.get("activation"))


@register_family("keras")
class KerasSequential(nn.Sequential):
    """A Keras Sequential (`layers`: the `model_config` list of a PGDL config.json; `input_shape`: Keras's, channels
    last; `in_shape`: the torch input's, channels first) as torch modules named after the Keras layers; images enter
    as [N, C, H, W]. The last weighted layer is
    `head`; probes are the input and up to 3 evenly spaced hidden Dense/Conv2D outputs (after their BatchNorm when
    one follows directly, before the activation)."""

    def __init__(self, *, layers: Sequence[Mapping[str, Any]], input_shape: Sequence[int],
                 drop_final_softmax: bool = True, in_shape: Sequence[int] | None = None):
        if not isinstance(input_shape, Sequence) or not input_shape or not all(_size(d) for d in input_shape):
            raise GenbenchError(f"input_shape {input_shape!r} is not a list of whole numbers from 1 to {MAX_SIZE}")
        keras_shape = [int(s) for s in input_shape]
        torch_shape = [keras_shape[-1], *keras_shape[:-1]] if len(keras_shape) == 3 else keras_shape
        if in_shape is not None and [int(s) for s in in_shape] != torch_shape:
            raise GenbenchError(f"in_shape {list(in_shape)} is not the channels-first form of input_shape "
                                f"{keras_shape} ({torch_shape})")
        b = _Builder(keras_shape)
        for i, spec in enumerate(layers):
            if not isinstance(spec, Mapping):
                raise GenbenchError(f"Keras layer {i} is a {type(spec).__name__}, not an object with 'layer_name'")
            b.add(i, spec)
        if not b.weighted or b.weighted[-1][1] == "BatchNormalization":
            raise GenbenchError("a Keras model needs a Dense or Conv2D layer as its last weighted layer (the "
                                "classifier)")
        names = list(b.modules)
        dropped = drop_final_softmax and isinstance(b.modules[names[-1]], Softmax)
        if dropped:
            del b.modules[names[-1]]
        head = b.weighted[-1][0]
        renamed = OrderedDict(("head" if n == head else n, m) for n, m in b.modules.items())
        super().__init__(renamed)
        self.config = dict(layers=[dict(s) for s in layers], input_shape=keras_shape,
                           drop_final_softmax=bool(drop_final_softmax), in_shape=torch_shape)
        self.dropped_softmax = dropped
        self.keras_layers = [("head" if n == head else n, kind, names) for n, kind, names in b.weighted]
        self.output_shape = list(b.shape)

    @property
    def num_classes(self) -> int:
        return int(self.output_shape[-1])

    def probe_layers(self) -> list[str]:
        names = list(self._modules)
        hidden = []
        for name, kind, _ in self.keras_layers[:-1]:
            if kind == "BatchNormalization":
                continue
            nxt = names[names.index(name) + 1] if names.index(name) + 1 < len(names) else None
            hidden.append(nxt if nxt is not None and isinstance(self._modules[nxt], (nn.BatchNorm1d, nn.BatchNorm2d))
                          else name)
        return ["input", *evenly_spaced(hidden)]


# Keras kernel -> torch weight axes: Dense [in, out] -> [out, in]; Conv2D [kh, kw, in, out] -> [out, in, kh, kw]
_TO_TORCH = {("Dense", "weight"): (1, 0), ("Conv2D", "weight"): (3, 2, 0, 1)}


def keras_state_dict(model: KerasSequential, weights: Sequence[Mapping[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """The torch state dict of `model` from the Keras weights of its weighted layers in order (one mapping of Keras
    weight name -> array per Dense/Conv2D/BatchNormalization layer): kernels transposed to torch's layout."""
    if len(weights) != len(model.keras_layers):
        raise GenbenchError(f"the weights hold {len(weights)} layers with weights, the model has "
                            f"{len(model.keras_layers)}")
    state: dict[str, torch.Tensor] = {}
    for (name, kind, names), w in zip(model.keras_layers, weights):
        if set(w) != set(names):
            raise GenbenchError(f"layer {name} ({kind}): the weights are named {sorted(w)}, the config makes "
                                f"{sorted(names)}")
        module = model._modules[name]
        if kind == "BatchNormalization":
            n = module.num_features
            arrays = {"weight": ("gamma", w.get("gamma", np.ones(n))), "bias": ("beta", w.get("beta", np.zeros(n))),
                      "running_mean": ("moving_mean", w["moving_mean"]),
                      "running_var": ("moving_variance", w["moving_variance"])}
        else:
            arrays = {"weight": ("kernel", np.asarray(w["kernel"]))}
            if module.bias is not None:
                arrays["bias"] = ("bias", w["bias"])
        for key, (keras_name, value) in arrays.items():
            target = module.state_dict()[key]
            value = np.asarray(value)
            order = _TO_TORCH.get((kind, key), (0,))
            want = tuple(target.shape[i] for i in np.argsort(order))  # the Keras shape the config makes
            if value.shape != want:
                raise GenbenchError(f"layer {name} ({kind}): its {keras_name} has shape {value.shape} in the file, "
                                    f"the config makes {want}")
            state[f"{name}.{key}"] = torch.as_tensor(np.ascontiguousarray(value.transpose(order)), dtype=target.dtype)
        if kind == "BatchNormalization":
            state[f"{name}.num_batches_tracked"] = torch.zeros((), dtype=torch.long)
    return state
