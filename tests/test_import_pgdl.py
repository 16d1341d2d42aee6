"""`genbench zoo import pgdl`: the PGDL starting kit's toy task (real files, when GENBENCH_PGDL_TOY names a copy: its
licence, CC BY-NC 4.0, keeps it out of the repository; docs/pgdl.md) imports and every model reproduces its recorded
accuracies; a task of conv models written here in the real layout imports through the command line; conv models written here in Keras's HDF5 layout match an independent numpy
forward pass (channels last, Keras's flatten order); bad task folders give one clear error and leave nothing."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.models.keras import KerasSequential, keras_state_dict
from genbench.zoo.importers.keras_h5 import read_keras_weights
from genbench.zoo.importers.pgdl import import_pgdl

TOY = Path(os.environ.get("GENBENCH_PGDL_TOY", "/nonexistent")).expanduser()  # sample_data/toy_data of the kit
needs_toy = pytest.mark.skipif(not (TOY / "model_configs.json").is_file(),
                               reason="set GENBENCH_PGDL_TOY to the PGDL starting kit's sample_data/toy_data "
                                      "(docs/pgdl.md)")
WEIGHTED = ("Dense", "Conv2D", "BatchNormalization")
MLP_ONLY = {"pacbayes.marginal_likelihood"}  # the analytic NNGP kernel exists for the "mlp" family only


def recorded(task: Path) -> dict[str, dict]:
    return {f"model_{k}": v for k, v in json.loads((task / "model_configs.json").read_text()).items()}


# --------------------------------------------------------------------------- the starting kit's toy task

@pytest.fixture(scope="module")
def toy_zoo(tmp_path_factory, home):
    return import_pgdl(TOY, out=tmp_path_factory.mktemp("pgdl") / "toy", progress=False)


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(x).argmax(1) == y).double().mean().item()


@needs_toy
def test_every_toy_model_reproduces_its_recorded_train_and_test_accuracy(toy_zoo):
    zoo = gb.load_zoo(toy_zoo.root)
    want = recorded(TOY)
    assert sorted(zoo.model_ids) == sorted(want) and len(zoo) == 18 and zoo.complete
    assert zoo.verify() == []
    for mid, entry in want.items():
        model = zoo.load_model(mid)
        assert accuracy(model, *zoo.train_data(mid)) == pytest.approx(entry["metrics"]["train_acc"], abs=1e-12), mid
        assert accuracy(model, *zoo.test_data(mid)) == pytest.approx(entry["metrics"]["test_acc"], abs=1e-12), mid
        row = zoo.row(mid)
        assert row["gap"] == pytest.approx(entry["metrics"]["train_acc"] - entry["metrics"]["test_acc"])
        assert {h: row[f"hp.{h}"] for h in entry["hparams"]} == {h: v["current_value"]
                                                                 for h, v in entry["hparams"].items()}
    assert zoo.hparams == {"num_units": [64, 128, 256], "num_layers": [1, 2, 3], "activation_function": ["relu", "tanh"]}
    assert len(zoo.pool.y_train) == 200 and len(zoo.pool.y_test) == 100


@needs_toy
def test_toy_init_checkpoint_holds_weights_init_and_provenance_is_recorded(toy_zoo):
    zoo = gb.load_zoo(toy_zoo.root)
    with h5py.File(TOY / "model_3" / "weights_init.hdf5") as f:
        first = f.attrs["layer_names"][0].decode()
        kernel = np.asarray(f[first][f[first].attrs["weight_names"][0].decode()])
    init, final = zoo.load_model("model_3", init=True), zoo.load_model("model_3")
    assert torch.equal(init.dense0.weight, torch.from_numpy(kernel.T))
    assert not torch.equal(init.dense0.weight, final.dense0.weight)
    source = zoo.manifest["imported"]["source_sha256"]
    assert {"model_configs.json", "model_3/weights_init.hdf5", "dataset_1/train/shard_0.tfrecord"} <= set(source)


@needs_toy
def test_toy_zoo_runs_every_builtin_measure(toy_zoo):
    values = gb.evaluate(gb.list_measures(), toy_zoo, models=["model_8", "model_9"], cache=False, progress=False)
    errors = {c[:-len(":error")]: e for c in values if c.endswith(":error") for e in values[c] if e is not None}
    assert set(errors) == MLP_ONLY, errors
    model = toy_zoo.load_model("model_8")
    assert model.probe_layers() == ["input", "dense0", "dense1"] and isinstance(model.head, torch.nn.Linear)


# --------------------------------------------------------------------------- conv models written in Keras's layout

CONV_A = [  # odd, non-square input: a swapped H/W, a wrong 'same' pad or flatten order changes the outputs
    {"layer_name": "Conv2D", "filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same",
     "activation": "relu"},
    {"layer_name": "BatchNormalization", "epsilon": 0.01},
    {"layer_name": "MaxPooling2D", "pool_size": 2, "strides": 1, "padding": "same"},
    {"layer_name": "Conv2D", "filters": 5, "kernel_size": [2, 3], "use_bias": False},
    {"layer_name": "AveragePooling2D", "pool_size": [3, 3], "strides": 2, "padding": "same"},
    {"layer_name": "Flatten"},
    {"layer_name": "Dropout", "rate": 0.3},
    {"layer_name": "Dense", "units": 6, "activation": "tanh"},
    {"layer_name": "Dense", "units": 3, "activation": "softmax"},
]
CONV_B = [
    {"layer_name": "Conv2D", "filters": 4, "kernel_size": 3, "padding": "same"},
    {"layer_name": "BatchNormalization", "center": False},
    {"layer_name": "Activation", "activation": "relu"},
    {"layer_name": "AveragePooling2D", "pool_size": 2},
    {"layer_name": "Conv2D", "filters": 3, "kernel_size": 1.0, "kernel_initializer": "he_normal"},
    {"layer_name": "GlobalAveragePooling2D"},
    {"layer_name": "Activation", "activation": "softmax"},
]
IMAGE = [8, 7, 3]  # every 'same' padding of CONV_A below is asymmetric along one axis at least


def tf_pads(n: int, k: int, s: int) -> tuple[int, int]:
    total = max((-(-n // s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def pad_same(h: np.ndarray, k: tuple[int, int], s: tuple[int, int], value: float) -> np.ndarray:
    (t, b), (l, r) = tf_pads(h.shape[1], k[0], s[0]), tf_pads(h.shape[2], k[1], s[1])
    return np.pad(h, ((0, 0), (t, b), (l, r), (0, 0)), constant_values=value)


def windows(h: np.ndarray, k: tuple[int, int], s: tuple[int, int]):
    for i in range((h.shape[1] - k[0]) // s[0] + 1):
        for j in range((h.shape[2] - k[1]) // s[1] + 1):
            yield i, j, h[:, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1], :]


def act(h: np.ndarray, name: str | None) -> np.ndarray:
    if name == "softmax":
        e = np.exp(h - h.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, None: lambda v: v, "linear": lambda v: v}[name](h)


def pair(v, default=None):
    v = default if v is None else v
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))


def numpy_forward(layers: list[dict], x: np.ndarray, weights: list[dict] | None = None,
                  rng: np.random.Generator | None = None) -> tuple[np.ndarray, list[dict]]:
    """Keras's forward pass in numpy on channels-last inputs (float64); draws the weights when `weights` is None."""
    h, made, it = x.astype(np.float64), [], iter(weights or [])

    def get(shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
        w = next(it) if weights is not None else {
            k: (rng.uniform(0.5, 1.5, s) if k == "moving_variance" else rng.normal(0, 0.7, s)) for k, s in shapes.items()}
        made.append(w)
        return w

    for spec in layers:
        kind = spec["layer_name"]
        if kind == "Conv2D":
            k, s = pair(spec["kernel_size"]), pair(spec.get("strides"), 1)
            shapes = {"kernel": (*k, h.shape[-1], spec["filters"])}
            if spec.get("use_bias", True):
                shapes["bias"] = (spec["filters"],)
            w = get(shapes)
            if spec.get("padding") == "same":
                h = pad_same(h, k, s, 0.0)
            out = np.zeros((h.shape[0], (h.shape[1] - k[0]) // s[0] + 1, (h.shape[2] - k[1]) // s[1] + 1,
                            spec["filters"]))
            for i, j, patch in windows(h, k, s):
                out[:, i, j, :] = np.tensordot(patch, w["kernel"], axes=([1, 2, 3], [0, 1, 2]))
            h = act(out + w.get("bias", 0.0), spec.get("activation"))
        elif kind == "Dense":
            w = get({"kernel": (h.shape[-1], spec["units"]), "bias": (spec["units"],)})
            h = act(h @ w["kernel"] + w["bias"], spec.get("activation"))
        elif kind == "BatchNormalization":
            c = h.shape[-1]
            names = ["gamma"] * spec.get("scale", True) + ["beta"] * spec.get("center", True)
            w = get({n: (c,) for n in [*names, "moving_mean", "moving_variance"]})
            h = (h - w["moving_mean"]) / np.sqrt(w["moving_variance"] + spec.get("epsilon", 1e-3))
            h = h * w.get("gamma", 1.0) + w.get("beta", 0.0)
        elif kind in ("MaxPooling2D", "AveragePooling2D"):
            k = pair(spec.get("pool_size"), 2)
            s = pair(spec.get("strides"), k)
            fill = -np.inf if kind == "MaxPooling2D" else np.nan  # 'same' average pooling leaves the padding out
            h = pad_same(h, k, s, fill) if spec.get("padding") == "same" else h
            out = np.zeros((h.shape[0], (h.shape[1] - k[0]) // s[0] + 1, (h.shape[2] - k[1]) // s[1] + 1, h.shape[3]))
            for i, j, patch in windows(h, k, s):
                out[:, i, j, :] = patch.max((1, 2)) if kind == "MaxPooling2D" else np.nanmean(patch, (1, 2))
            h = out
        elif kind == "GlobalAveragePooling2D":
            h = h.mean((1, 2))
        elif kind == "Flatten":
            h = h.reshape(len(h), -1)  # channels last: Keras's own order
        elif kind == "Activation":
            h = act(h, spec["activation"])
        else:
            assert kind == "Dropout", kind
    return h, made


def write_keras_h5(path: Path, layers: list[dict], weights: list[dict]) -> None:
    """Weights in the HDF5 layout of Keras 2's save_weights: layer_names, and per layer group its weight_names and
    one dataset per weight at <layer>/<layer>/<name>:0 (layers without weights listed with none)."""
    it = iter(weights)
    with h5py.File(path, "w") as f:
        names = []
        for i, spec in enumerate(layers):
            layer = f"{spec['layer_name'].lower()}_{i}"
            names.append(layer.encode())
            g = f.create_group(layer)
            w = next(it) if spec["layer_name"] in WEIGHTED else {}
            g.attrs["weight_names"] = np.array([f"{layer}/{k}:0".encode() for k in w], dtype="S")
            for k, v in w.items():
                g.create_dataset(f"{layer}/{k}:0", data=np.asarray(v, dtype=np.float32))
        f.attrs["layer_names"] = np.array(names, dtype="S")
        f.attrs["backend"], f.attrs["keras_version"] = b"tensorflow", b"2.4.0"


def torch_model(layers: list[dict], shape: list[int], weights: list[dict], tmp: Path) -> KerasSequential:
    """The family's model with weights read back from a Keras HDF5 file (as the importer reads them)."""
    write_keras_h5(tmp / "w.hdf5", layers, weights)
    model = KerasSequential(layers=layers, input_shape=shape)
    model.load_state_dict(keras_state_dict(model, [w for _, w in read_keras_weights(tmp / "w.hdf5")]))
    return model.eval()


@pytest.mark.parametrize("layers", [CONV_A, CONV_B], ids=["conv-pool-bn-flatten-dense", "conv-bn-gap-softmax"])
def test_keras_conv_models_match_an_independent_numpy_forward(layers, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, *IMAGE)).astype(np.float32)
    probs, weights = numpy_forward(layers, x, rng=rng)
    model = torch_model(layers, IMAGE, weights, tmp_path)
    with torch.no_grad():
        logits = model(torch.from_numpy(x).permute(0, 3, 1, 2))
    assert model.dropped_softmax and logits.shape == (16, 3)
    np.testing.assert_allclose(torch.softmax(logits.double(), 1).numpy(), probs, atol=1e-6)
    assert not np.allclose(logits.numpy(), probs, atol=1e-3)  # the module gives logits, not probabilities


def test_flatten_follows_keras_channels_last_order(tmp_path):
    layers = [{"layer_name": "Flatten"}, {"layer_name": "Dense", "units": 2}]
    x = np.random.default_rng(2).normal(size=(4, 3, 2, 5)).astype(np.float32)
    kernel = np.random.default_rng(3).normal(size=(30, 2))
    model = torch_model(layers, [3, 2, 5], [{"kernel": kernel, "bias": np.zeros(2)}], tmp_path)
    with torch.no_grad():
        out = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_allclose(out, x.reshape(4, -1) @ kernel, atol=1e-5)
    channels_first = x.transpose(0, 3, 1, 2).reshape(4, -1) @ kernel  # what a plain torch Flatten would compute
    assert not np.allclose(out, channels_first, atol=1e-3)


def test_mlp_with_batchnorm_and_softmax_kept_on_request(tmp_path):
    layers = [{"layer_name": "Dense", "units": 7}, {"layer_name": "BatchNormalization"},
              {"layer_name": "Activation", "activation": "tanh"}, {"layer_name": "Dense", "units": 3,
                                                                   "activation": "softmax"}]
    rng = np.random.default_rng(4)
    x = rng.normal(size=(10, 5))
    probs, weights = numpy_forward(layers, x, rng=rng)
    model = torch_model(layers, [5], weights, tmp_path)
    assert model.probe_layers() == ["input", "batchnormalization1"]
    with torch.no_grad():
        np.testing.assert_allclose(torch.softmax(model(torch.tensor(x, dtype=torch.float32)), 1).numpy(), probs,
                                   atol=1e-6)
        kept = KerasSequential(layers=layers, input_shape=[5], drop_final_softmax=False)
        kept.load_state_dict(model.state_dict())
        np.testing.assert_allclose(kept.eval()(torch.tensor(x, dtype=torch.float32)).numpy(), probs, atol=1e-6)


# --------------------------------------------------------------------------- a task folder written here

def tensor_bytes(a: np.ndarray) -> bytes:
    """tf.io.serialize_tensor's output: a TensorProto with dtype, shape and the raw little-endian content."""
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

    dtype = {np.dtype(np.float32): 1, np.dtype(np.int32): 3}[a.dtype]
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=n) for n in a.shape])
    return TensorProto(dtype=dtype, tensor_shape=shape, tensor_content=a.tobytes()).SerializeToString()


def write_shards(folder: Path, x: np.ndarray, y: np.ndarray, shards: int = 2) -> None:
    from tfrecord.writer import TFRecordWriter

    folder.mkdir(parents=True)
    for s, idx in enumerate(np.array_split(np.arange(len(y)), shards)):
        w = TFRecordWriter(str(folder / f"shard_{s}.tfrecord"))
        for i in idx:
            w.write({"inputs": (tensor_bytes(x[i]), "byte"), "output": (tensor_bytes(np.int32(y[i])), "byte")})
        w.close()


def write_task(root: Path, seed: int = 0) -> dict[str, dict]:
    """A PGDL task of 4 conv models (2 architectures x 2 seeds) on random 8x7x3 images, 3 classes; the recorded
    accuracies are the numpy forward's."""
    rng = np.random.default_rng(seed)
    x_train, x_test = rng.normal(size=(40, *IMAGE)).astype(np.float32), rng.normal(size=(20, *IMAGE)).astype(np.float32)
    y_train, y_test = rng.integers(0, 3, 40), rng.integers(0, 3, 20)
    write_shards(root / "dataset_1" / "train", x_train, y_train)
    write_shards(root / "dataset_1" / "test", x_test, y_test, shards=1)
    configs = {}
    for i, (arch, layers) in enumerate([(a, l) for a, l in (("A", CONV_A), ("B", CONV_B)) for _ in range(2)]):
        folder = root / f"model_{i}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_config": layers, "input_shape": IMAGE}))
        _, weights = numpy_forward(layers, x_train[:1], rng=rng)
        _, init = numpy_forward(layers, x_train[:1], rng=rng)
        write_keras_h5(folder / "weights.hdf5", layers, weights)
        write_keras_h5(folder / "weights_init.hdf5", layers, init)
        acc = {s: float((numpy_forward(layers, x, weights)[0].argmax(1) == y).mean())
               for s, x, y in (("train_acc", x_train, y_train), ("test_acc", x_test, y_test))}
        configs[str(i)] = {"hparams": {"arch": {"possible_values": ["A", "B"], "current_value": arch},
                                       "seed": {"possible_values": [0, 1], "current_value": i % 2}},
                           "metrics": acc}
    (root / "model_configs.json").write_text(json.dumps(configs, indent=2))
    return configs


@pytest.fixture
def task(tmp_path):
    root = tmp_path / "task"
    root.mkdir()
    write_task(root)
    return root


def test_a_task_of_conv_models_imports_through_the_cli_with_its_recorded_accuracies(task, tmp_path, home):
    out = tmp_path / "zoos" / "conv"
    res = CliRunner().invoke(app, ["zoo", "import", "pgdl", str(task), "--name", "conv-task", "--out", str(out)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "4 models" in said and "largest difference 0)" in said
    assert CliRunner().invoke(app, ["zoo", "verify", str(out)]).exit_code == 0
    zoo = gb.load_zoo(out)
    assert zoo.name == "conv-task" and zoo.manifest["data_kind"] == "image" and zoo.manifest["in_shape"] == [3, 8, 7]
    for mid, entry in recorded(task).items():
        model = zoo.load_model(mid)
        assert accuracy(model, *zoo.train_data(mid)) == entry["metrics"]["train_acc"]
        assert accuracy(model, *zoo.test_data(mid)) == entry["metrics"]["test_acc"]
        assert model.probe_layers()[0] == "input" and "head" in dict(model.named_modules())
    assert zoo.table.set_index("model_id").loc["model_2", "hp.arch"] == "B"


def test_conv_model_runs_every_builtin_measure(task, tmp_path, home):
    zoo = import_pgdl(task, out=tmp_path / "conv", progress=False)
    values = gb.evaluate(gb.list_measures(), zoo, models=["model_0"], cache=False, progress=False)  # CONV_A
    errors = {c[:-len(":error")]: e for c in values if c.endswith(":error") for e in values[c] if e is not None}
    assert set(errors) == MLP_ONLY, errors
    assert zoo.load_model("model_0").probe_layers() == ["input", "conv2d0", "conv2d3", "dense7"]
    assert zoo.load_model("model_2").probe_layers() == ["input", "batchnormalization1"]  # BN right after the conv


# --------------------------------------------------------------------------- bad input: one clear error, nothing left

def plant_missing_weights(task: Path) -> None:
    (task / "model_2" / "weights.hdf5").unlink()


def plant_extra_layer(task: Path) -> None:  # model_3's HDF5 files now hold one layer less than its config
    cfg = json.loads((task / "model_3" / "config.json").read_text())
    cfg["model_config"].insert(-1, {"layer_name": "Dense", "units": 3})
    (task / "model_3" / "config.json").write_text(json.dumps(cfg))


def plant_wrong_width(task: Path) -> None:
    cfg = json.loads((task / "model_1" / "config.json").read_text())
    cfg["model_config"][0]["filters"] = 6
    (task / "model_1" / "config.json").write_text(json.dumps(cfg))


def _edit_h5(task: Path, file: str, edit) -> None:
    """Apply `edit(layer group, its first weight's dataset name)` to the first weighted layer of model_2's `file`."""
    with h5py.File(task / "model_2" / file, "r+") as f:
        for name in f.attrs["layer_names"]:
            g = f[name.decode()]
            if len(g.attrs["weight_names"]):
                edit(g, g.attrs["weight_names"][0].decode())
                return


def plant_inf_init(task: Path) -> None:  # imported before: a non-finite init checkpoint only evaluate noticed
    def edit(g, w):
        data = g[w][()]
        del g[w]
        g.create_dataset(w, data=np.full_like(data, np.inf))
    _edit_h5(task, "weights_init.hdf5", edit)


def plant_int_init(task: Path) -> None:  # imported before without a word
    def edit(g, w):
        data = g[w][()]
        del g[w]
        g.create_dataset(w, data=data.astype(np.int32))
    _edit_h5(task, "weights_init.hdf5", edit)


def plant_missing_dataset(task: Path) -> None:  # a KeyError traceback before
    _edit_h5(task, "weights.hdf5", lambda g, w: g.__delitem__(w))


def plant_unmapped_layer(task: Path) -> None:
    cfg = json.loads((task / "model_1" / "config.json").read_text())
    cfg["model_config"].insert(1, {"layer_name": "LSTM", "units": 4})
    (task / "model_1" / "config.json").write_text(json.dumps(cfg))


def record_offsets(path: Path) -> list[int]:
    """Where each record of a TFRecord file starts (8-byte length, 4-byte crc, data, 4-byte crc)."""
    data, offsets, pos = path.read_bytes(), [], 0
    while pos < len(data):
        offsets.append(pos)
        pos += 16 + struct.unpack("<Q", data[pos:pos + 8])[0]
    return offsets


def plant_truncated_shard(task: Path) -> str:
    shard = task / "dataset_1" / "train" / "shard_1.tfrecord"
    last = record_offsets(shard)[-1]
    os.truncate(shard, last + 20)
    return f"{re.escape(str(shard))} is truncated or damaged: the record at byte offset {last} is cut off"


def plant_damaged_length(task: Path) -> str:  # tfrecord allocated the declared length: a MemoryError before
    shard = task / "dataset_1" / "train" / "shard_1.tfrecord"
    second = record_offsets(shard)[1]
    with shard.open("r+b") as f:
        f.seek(second)
        f.write(struct.pack("<Q", 1 << 60))
    return (f"{re.escape(str(shard))} is truncated or damaged: the record at byte offset {second} has a length "
            f"field \\({1 << 60}\\) that fails its checksum")


def plant_flipped_byte(task: Path) -> str:  # imported as wrong inputs: "genbench does not reproduce ... report it"
    shard = task / "dataset_1" / "train" / "shard_0.tfrecord"
    third = record_offsets(shard)[2]
    data = bytearray(shard.read_bytes())
    data[third + 12 + 60] ^= 0x40  # inside the inputs' float content
    shard.write_bytes(bytes(data))
    return (f"{re.escape(str(shard))} is truncated or damaged: the record at byte offset {third} holds data that "
            "fail their checksum")


def plant_cut_length_field(task: Path) -> str:  # the header's length itself cut off
    shard = task / "dataset_1" / "train" / "shard_1.tfrecord"
    last = record_offsets(shard)[-1]
    os.truncate(shard, last + 5)
    return f"{re.escape(str(shard))} is truncated or damaged: the record at byte offset {last} is cut off"


def _bad_tensor(task: Path, proto: bytes) -> None:
    from tfrecord.writer import TFRecordWriter

    shard = task / "dataset_1" / "test" / "shard_0.tfrecord"
    w = TFRecordWriter(str(shard))
    w.write({"inputs": (proto, "byte"), "output": (tensor_bytes(np.int32(0)), "byte")})
    w.close()


def _proto(shape: list[int], **values) -> bytes:
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

    dims = TensorShapeProto(dim=[TensorShapeProto.Dim(size=n) for n in shape])
    return TensorProto(dtype=1, tensor_shape=dims, **values).SerializeToString()


def plant_huge_shape(task: Path) -> None:  # one value "repeated" over 2^40: numpy's allocation error before
    _bad_tensor(task, _proto([1 << 20, 1 << 20], float_val=[1.0]))


def plant_shape_vs_content(task: Path) -> None:
    _bad_tensor(task, _proto([2, 2], tensor_content=np.zeros(3, np.float32).tobytes()))


def plant_duplicate_id(task: Path) -> None:
    text = (task / "model_configs.json").read_text()
    entry = json.dumps(json.loads(text)["1"])
    (task / "model_configs.json").write_text(text.rstrip()[:-1] + f', "1": {entry}\n}}')


def plant_two_names_for_one_model(task: Path) -> None:
    configs = json.loads((task / "model_configs.json").read_text())
    configs["model_1"] = configs["1"]
    (task / "model_configs.json").write_text(json.dumps(configs))


def plant_wrong_record(task: Path) -> None:  # the guard against a conversion that changes the function
    configs = json.loads((task / "model_configs.json").read_text())
    acc = configs["3"]["metrics"]["test_acc"]
    configs["3"]["metrics"]["test_acc"] = acc + 0.1 if acc < 0.5 else acc - 0.1
    (task / "model_configs.json").write_text(json.dumps(configs))


def _hparam(model: str, value) -> Callable[[Path], None]:
    def plant(task: Path) -> None:
        configs = json.loads((task / "model_configs.json").read_text())
        configs[model]["hparams"]["arch"]["current_value"] = value
        (task / "model_configs.json").write_text(json.dumps(configs))
    return plant


def plant_fewer_outputs(task: Path) -> None:  # model_2 (arch B) would score 2 of the 3 labels
    cfg = json.loads((task / "model_2" / "config.json").read_text())
    cfg["model_config"][4]["filters"] = 2
    (task / "model_2" / "config.json").write_text(json.dumps(cfg))


def _test_split(task: Path, y: np.ndarray) -> None:
    shutil.rmtree(task / "dataset_1" / "test")
    x = np.random.default_rng(1).normal(size=(len(y), *IMAGE)).astype(np.float32)
    write_shards(task / "dataset_1" / "test", x, y, shards=1)


def plant_negative_label(task: Path) -> None:  # an IndexError from inside the accuracy check before
    _test_split(task, np.array([0, 1, -1, 2] * 5))


def plant_empty_split(task: Path) -> None:  # said to be "float64 of shape ()" before
    _test_split(task, np.zeros(0, dtype=np.int64))


def plant_nan_input(task: Path) -> None:
    x = np.random.default_rng(1).normal(size=(20, *IMAGE)).astype(np.float32)
    x[7, 2, 3, 1] = np.nan
    shutil.rmtree(task / "dataset_1" / "test")
    write_shards(task / "dataset_1" / "test", x, np.arange(20) % 3, shards=1)


def plant_stray_model(task: Path) -> None:
    shutil.copytree(task / "model_0", task / "model_4")


BAD = {
    "missing-weights": (plant_missing_weights, r"model 'model_2' has no weights\.hdf5"),
    "hdf5-vs-config-layers": (plant_extra_layer, r"model_3/weights\.hdf5 does not match .*model_3/config\.json: the "
                                                 r"file has 3 layers with weights .* the config has 4"),
    "hdf5-vs-config-shape": (plant_wrong_width, r"model_1/weights\.hdf5 does not match .*config\.json: layer conv2d0 "
                                                r"\(Conv2D\): its kernel has shape \(3, 3, 3, 4\) in the file, the "
                                                r"config makes \(3, 3, 3, 6\)"),
    "unmapped-layer": (plant_unmapped_layer, r"model_1/config\.json: Keras layer 1 has type 'LSTM'.*supported layer "
                                             r"types: Dense, Conv2D, MaxPooling2D, AveragePooling2D"),
    "truncated-shard": (plant_truncated_shard, None),
    "damaged-record-length": (plant_damaged_length, None),
    "flipped-byte-in-shard": (plant_flipped_byte, None),
    "cut-length-field": (plant_cut_length_field, None),
    "huge-tensor-shape": (plant_huge_shape, r"shard_0\.tfrecord: the record at byte offset 0 is not an Example of "
                                            r"serialized tensors .*: its tensor declares shape \[1048576, 1048576\], "
                                            r"no array of at most 268435456 values"),
    "tensor-shape-vs-content": (plant_shape_vs_content, r"its tensor declares shape \[2, 2\] \(4 values\) and "
                                                        r"holds 3 values"),
    "duplicate-id": (plant_duplicate_id, r"duplicate model id\(s\) \['1'\]"),
    "two-names-one-model": (plant_two_names_for_one_model, r"entries '1' and 'model_1' both name model 'model_1'"),
    "recorded-accuracy-off": (plant_wrong_record, r"1 recomputed accuracies differ .*: model_3 test"),
    "stray-model-folder": (plant_stray_model, r"model folder\(s\) \['model_4'\] have no entry"),
    "outputs-vs-labels": (plant_fewer_outputs, r"the models output \[2, 3\] classes and the labels go up to 2"),
    "inf-init-weights": (plant_inf_init, r"model_2/weights_init\.hdf5: the weights \[.*\] are not finite"),
    "int-init-weights": (plant_int_init, r"model_2/weights_init\.hdf5: weight .* is int32 of shape .*, not a float "
                                         r"tensor"),
    # a null value imported as a grid point None ("partial: 4 of 6"); a list was a TypeError, mixed types pyarrow's
    "null-hparam": (_hparam("1", None), r"model 'model_1' has hyperparameter 'arch' = None; a hyperparameter's "),
    "list-hparam": (_hparam("1", ["A"]), r"model 'model_1' has hyperparameter 'arch' = \['A'\]"),
    "mixed-hparam": (_hparam("1", 3), r"hyperparameter 'arch' is a number in some models and a string in others"),
    "negative-label": (plant_negative_label, r"dataset_1/test: label -1 is negative"),
    "empty-split": (plant_empty_split, r"dataset_1/test: its shards hold no example"),
    "nan-input": (plant_nan_input, r"dataset_1/test: the inputs of 1 example\(s\) are not finite \(the first is "
                                   r"example 7\)"),
    "missing-dataset": (plant_missing_dataset, r"model_2/weights\.hdf5 is not a whole Keras weight file \(KeyError"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_task_is_refused_with_one_clear_line_and_leaves_nothing(case, task, tmp_path):
    plant, pattern = BAD[case]
    pattern = plant(task) or pattern
    out_parent = tmp_path / "zoos"
    out_parent.mkdir()
    with pytest.raises(GenbenchError, match=pattern) as e:
        import_pgdl(task, out=out_parent / "z", progress=False)
    assert "\n" not in str(e.value)
    assert list(out_parent.iterdir()) == []  # neither the zoo nor its staging folder


def test_an_existing_destination_is_never_overwritten(task, tmp_path):
    out = tmp_path / "z"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(GenbenchError, match="already exists"):
        import_pgdl(task, out=out, progress=False)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_family_refuses_what_it_cannot_map():
    dense = {"layer_name": "Dense", "units": 2}
    with pytest.raises(GenbenchError, match=r"activation 'selu' .* supported: relu, tanh, sigmoid, linear, softmax"):
        KerasSequential(layers=[{**dense, "activation": "selu"}], input_shape=[3])
    with pytest.raises(GenbenchError, match="data_format 'channels_first'"):
        KerasSequential(layers=[{"layer_name": "Flatten", "data_format": "channels_first"}, dense], input_shape=[2, 2, 1])
    with pytest.raises(GenbenchError, match=r"option\(s\) \['kernel_size'\] are not mapped"):
        KerasSequential(layers=[{**dense, "kernel_size": 3}], input_shape=[3])
    with pytest.raises(GenbenchError, match="Dense .*put a Flatten before it"):
        KerasSequential(layers=[dense], input_shape=[4, 4, 1])


def test_cli_prints_a_bad_task_as_one_line(task, tmp_path):
    plant_unmapped_layer(task)
    env = {**os.environ, "COLUMNS": "400", "GENBENCH_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "genbench", "zoo", "import", "pgdl", str(task), "--out",
                           str(tmp_path / "z")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()  # configs are checked before the progress bar starts
    assert len(lines) == 1 and lines[0].startswith("error: ") and "'LSTM'" in lines[0], proc.stderr
    assert not (tmp_path / "z").exists()


def test_tolerance_option_widens_the_accuracy_check_and_refuses_nonsense(task, tmp_path):
    plant_wrong_record(task)
    with pytest.raises(GenbenchError, match="by more than 0.001.*a larger --tolerance"):
        import_pgdl(task, out=tmp_path / "strict", progress=False)
    assert not (tmp_path / "strict").exists()
    res = CliRunner().invoke(app, ["zoo", "import", "pgdl", str(task), "--out", str(tmp_path / "wide"),
                                   "--tolerance", "0.9"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "wide" / "zoo.json").is_file()
    res = CliRunner().invoke(app, ["zoo", "import", "pgdl", str(task), "--out", str(tmp_path / "bad"),
                                   "--tolerance", "1.5"])
    assert res.exit_code != 0 and "--tolerance must be in [0, 1)" in str(res.exception) + res.output
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("layers, shape, message", [
    ([{"layer_name": "Dense", "units": -6}], [4], r"layer 0 \(Dense\): units -6: a layer size is a whole number"),
    ([{"layer_name": "Dense", "units": 1e12}], [4], r"units 1000000000000.0: a layer size is a whole number"),
    ([{"layer_name": "Conv2D", "filters": 2, "kernel_size": [3, 3], "strides": [0, 0], "padding": "same"},
      {"layer_name": "Flatten"}, {"layer_name": "Dense", "units": 2}], [8, 8, 1], r"strides \[0, 0\]: a layer size"),
    ([{"layer_name": "Dropout", "rate": 5}, {"layer_name": "Dense", "units": 2}], [4],
     r"layer 0 \(Dropout\): rate 5 is not a fraction in \[0, 1\)"),
    ([{"layer_name": "Dense", "units": 2}], [0], r"input_shape \[0\] is not a list of whole numbers"),
])
def test_a_config_that_cannot_describe_a_model_is_one_line(layers, shape, message):
    """Planted, each from a review of damaged PGDL configs: torch's 'negative dimension', an allocation of 40 TB, a
    ZeroDivisionError in the padding, dropout's ValueError."""
    with pytest.raises(GenbenchError, match=message):
        KerasSequential(layers=layers, input_shape=shape)
