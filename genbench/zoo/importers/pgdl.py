"""A task of the PGDL competition (NeurIPS 2020, "Predicting Generalization in Deep Learning") imported as a genbench
zoo: each Keras model rebuilt by the "keras" family with its final and initial weights, the task's training and test
shards stored with the zoo, the hyperparameters of model_configs.json as hp.* columns and its recorded accuracies as
the targets, after checking that genbench's recomputed accuracies equal them.

A task folder holds model_configs.json ({id: {"hparams": {name: {"current_value", "possible_values"}}, "metrics":
{"train_acc", "test_acc"}}}), one folder model_<id>/ per model (config.json, weights.hdf5, weights_init.hdf5) and
dataset_1/{train,test}/shard_*.tfrecord (Examples of two serialized tensors, 'inputs' float32 channels-last and
'output' an int32 label)."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ...errors import GenbenchError
from ...fileio import sha256_file
from ...models.keras import KerasSequential, keras_state_dict
from ...paths import plain_name, zoos_dir
from ..data import Pool
from ..storage import DATASET, Zoo, save_checkpoint
from ..train import evaluate_model
from .keras_h5 import read_keras_weights
from .staging import check_destination, finish_zoo, imported_manifest, imported_row, save_pair, staged_folder
from .tfrecords import read_examples

CONFIGS = "model_configs.json"
DATA = "dataset_1"
FEATURES = ("inputs", "output")
TOLERANCE = 1e-3  # recomputed vs recorded accuracy: a conversion error moves it far more than float ties do
_RESERVED = ("train_size", "label_noise")  # hp.* columns genbench itself writes for every zoo


@dataclass(frozen=True)
class TaskModel:
    """One model of a task: its id (the folder name), folder, hyperparameters, recorded metrics and the possible
    values its entry lists per hyperparameter."""

    model_id: str
    folder: Path
    hparams: dict[str, Any]
    train_acc: float
    test_acc: float
    possible: dict[str, list[Any]]


def default_name(task_dir: Path) -> str:
    """pgdl-<task folder name>, made a plain name."""
    return "pgdl-" + re.sub(r"[^A-Za-z0-9._-]+", "-", task_dir.resolve().name).strip("-.")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise GenbenchError(f"duplicate model id(s) {dup}")
    return dict(pairs)


def _accuracy(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise GenbenchError(f"{where} is {value!r}, not an accuracy in [0, 1]; fix {CONFIGS}")
    return float(value)


def read_task(task_dir: Path) -> list[TaskModel]:
    """The models of a task folder, checked: every entry of model_configs.json has its folder with config.json and
    both weight files, every model folder has an entry, no id appears twice."""
    path = task_dir / CONFIGS
    if not task_dir.is_dir():
        raise GenbenchError(f"{task_dir} is not a folder; pass a PGDL task folder (one holding {CONFIGS})")
    if not path.is_file():
        raise GenbenchError(f"{task_dir} has no {CONFIGS}, so it is no PGDL task folder; pass the folder that holds "
                            f"{CONFIGS}, the model_* folders and {DATA}/")
    try:
        configs = json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise GenbenchError(f"{path} is not valid JSON ({e})") from None
    except GenbenchError as e:
        raise GenbenchError(f"{path}: {e}; each model must appear once: remove or rename the repeated entry") from None
    if not isinstance(configs, dict) or not configs:
        raise GenbenchError(f"{path} must map each model id to its hparams and metrics")
    models, seen = [], {}
    for key, entry in configs.items():
        model_id = key if key.startswith("model_") else f"model_{key}"
        if model_id in seen:
            raise GenbenchError(f"{path}: entries {seen[model_id]!r} and {key!r} both name model {model_id!r} "
                                "(duplicate model id); remove one")
        seen[model_id] = key
        plain_name(model_id, what="model id", source=str(path))
        where = f"{path}, model {key!r}"
        if not isinstance(entry, dict) or not isinstance(entry.get("hparams"), dict) or \
                not isinstance(entry.get("metrics"), dict):
            raise GenbenchError(f"{where}: needs 'hparams' and 'metrics' objects")
        metrics = entry["metrics"]
        accs = [_accuracy(metrics.get(k), f"{where}, metrics.{k}") for k in ("train_acc", "test_acc")]
        hp = {h: (v.get("current_value") if isinstance(v, dict) else v) for h, v in entry["hparams"].items()}
        possible = {h: v["possible_values"] for h, v in entry["hparams"].items()
                    if isinstance(v, dict) and isinstance(v.get("possible_values"), list)}
        folder = task_dir / model_id
        for rel in ("config.json", "weights.hdf5", "weights_init.hdf5"):
            if not (folder / rel).is_file():
                raise GenbenchError(f"PGDL task {task_dir}: model {model_id!r} has no {rel} (expected {folder / rel}); "
                                    "copy the complete task folder, or remove the model's entry from "
                                    f"{CONFIGS}")
        models.append(TaskModel(model_id, folder, hp, *accs, possible))
    strays = sorted(p.name for p in task_dir.iterdir() if p.is_dir() and p.name.startswith("model_")
                    and p.name not in seen)
    if strays:
        raise GenbenchError(f"PGDL task {task_dir}: model folder(s) {strays} have no entry in {CONFIGS}, so their "
                            "recorded accuracies are unknown; add their entries or remove the folders")
    return models


def grid_of(models: list[TaskModel], configs_path: Path) -> dict[str, list[Any]]:
    """The hyperparameter axes and the values the models take, in model_configs.json's order of possible values."""
    names = list(models[0].hparams)
    for m in models:
        if set(m.hparams) != set(names):
            raise GenbenchError(f"{configs_path}: model {m.model_id!r} has hyperparameters {sorted(m.hparams)}, model "
                                f"{models[0].model_id!r} has {sorted(names)}; every model needs the same ones")
    clash = [n for n in names if n in _RESERVED]
    if clash:
        raise GenbenchError(f"{configs_path}: hyperparameter(s) {clash} clash with the columns genbench writes for "
                            "every zoo (hp.train_size, hp.label_noise); rename them")
    for m in models:  # a table column holds one number or string per model, and one type per column
        for n in names:
            v = m.hparams[n]
            if v is None or isinstance(v, (list, dict)):
                raise GenbenchError(f"{configs_path}: model {m.model_id!r} has hyperparameter {n!r} = {v!r}; a "
                                    "hyperparameter's value is one number or string")
    for n in names:
        kinds = {type(m.hparams[n]) for m in models} - {bool}
        if len(kinds) > 1 and not kinds <= {int, float}:
            raise GenbenchError(f"{configs_path}: hyperparameter {n!r} is a number in some models and a string in "
                                "others; give it one type")
    grid = {}
    for n in names:
        order = next((m.possible[n] for m in models if n in m.possible), [])
        values = list(dict.fromkeys(m.hparams[n] for m in models))
        grid[n] = sorted(values, key=lambda v: order.index(v) if v in order else len(order))
    return grid


def read_split(task_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(inputs, labels) of dataset_1/<split>/shard_*.tfrecord in shard order; None when the split has no shards."""
    shards = sorted((task_dir / DATA / split).glob("shard_*.tfrecord"),
                    key=lambda p: (int(m.group(1)) if (m := re.search(r"(\d+)", p.stem)) else -1, p.name))
    if not shards:
        return None
    data = read_examples(shards, FEATURES)
    x, y = data["inputs"].astype(np.float32), data["output"]
    bad = np.flatnonzero(~np.isfinite(x.reshape(len(x), -1)).all(1)) if len(x) else []
    if len(bad):  # imported, such inputs made every recomputed accuracy "differ": a bug to report, it said
        raise GenbenchError(f"{task_dir / DATA / split}: the inputs of {len(bad)} example(s) are not finite (the first "
                            f"is example {int(bad[0])}); the task's data are damaged: copy or extract the task again")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if len(y) == 0:  # an empty split read as float64 of shape (0,): said as what it is
        raise GenbenchError(f"{task_dir / DATA / split}: its shards hold no example; copy the complete task folder")
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise GenbenchError(f"{task_dir / DATA / split}: 'output' must be one integer label per example, got "
                            f"{y.dtype} of shape {y.shape[1:]}")
    if (y < 0).any():  # an IndexError from inside the accuracy check before
        raise GenbenchError(f"{task_dir / DATA / split}: label {int(y.min())} is negative; labels are the classes "
                            "0, 1, ...")
    return x, y.astype(np.int64)


def _channels_first(x: np.ndarray) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.permute(0, 3, 1, 2).contiguous() if t.dim() == 4 else t


def _pool(task_dir: Path) -> tuple[Pool, list[int], bool]:
    """The task's data as a genbench pool (images channels first), the Keras input shape, and whether a test split
    exists."""
    train = read_split(task_dir, "train")
    if train is None:
        raise GenbenchError(f"PGDL task {task_dir} has no training shards ({DATA}/train/shard_*.tfrecord); copy the "
                            "complete task folder")
    test = read_split(task_dir, "test")
    has_test = test is not None
    if test is None:
        test = (np.zeros((0, *train[0].shape[1:]), np.float32), np.zeros((0,), np.int64))
    elif test[0].shape[1:] != train[0].shape[1:]:
        raise GenbenchError(f"PGDL task {task_dir}: test inputs have shape {test[0].shape[1:]}, training inputs "
                            f"{train[0].shape[1:]}")
    kind = "image" if train[0].ndim == 4 else "signal"
    labels = np.concatenate([train[1], test[1]])
    pool = Pool(_channels_first(train[0]), torch.from_numpy(train[1]), _channels_first(test[0]),
                torch.from_numpy(test[1]), int(labels.max()) + 1, kind)
    return pool, list(train[0].shape[1:]), has_test


def _with_classes(pool: Pool, outputs: set[int], task_dir: Path) -> Pool:
    """The pool with the number of classes the models output (one for all, covering every label)."""
    if len(outputs) != 1 or pool.num_classes > min(outputs):
        raise GenbenchError(f"PGDL task {task_dir}: the models output {sorted(outputs)} classes and the labels go up "
                            f"to {pool.num_classes - 1}; every model must output one score per label")
    return Pool(pool.x_train, pool.y_train, pool.x_test, pool.y_test, outputs.pop(), pool.kind)


def keras_model(m: TaskModel) -> KerasSequential:
    """The torch model that one PGDL model's config.json describes (weights not loaded)."""
    config_path = m.folder / "config.json"
    try:
        config = json.loads(config_path.read_text())
        layers, shape = config["model_config"], config["input_shape"]
        return KerasSequential(layers=layers, input_shape=shape)
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise GenbenchError(f"{config_path} is not a PGDL model config (needs 'model_config' and 'input_shape'): "
                            f"{e}") from None
    except GenbenchError as e:
        raise GenbenchError(f"{config_path}: {e}") from None


def convert_model(m: TaskModel, input_shape: list[int]) -> tuple[KerasSequential, dict[str, torch.Tensor],
                                                                   dict[str, torch.Tensor]]:
    """The torch model of one PGDL model and its final and initial state dicts."""
    config_path = m.folder / "config.json"
    model = keras_model(m)
    if model.config["input_shape"] != input_shape:
        raise GenbenchError(f"{config_path}: input_shape {model.config['input_shape']} differs from the task's data, "
                            f"{input_shape}")
    states = []
    for file in ("weights.hdf5", "weights_init.hdf5"):
        path = m.folder / file
        layers_in_file = read_keras_weights(path)
        if len(layers_in_file) != len(model.keras_layers):
            raise GenbenchError(
                f"{path} does not match {config_path}: the file has {len(layers_in_file)} layers with weights "
                f"({', '.join(n for n, _ in layers_in_file)}), the config has {len(model.keras_layers)} "
                f"({', '.join(k for _, k, _ in model.keras_layers)}); export this model's weights again")
        try:
            states.append(keras_state_dict(model, [w for _, w in layers_in_file]))
        except GenbenchError as e:
            raise GenbenchError(f"{path} does not match {config_path}: {e}; export this model's weights "
                                "again") from None
        bad = [k for k, v in states[-1].items() if v.is_floating_point() and not torch.isfinite(v).all()]
        if bad:  # the init weights are checked by nothing else (the final ones by the accuracies)
            raise GenbenchError(f"{path}: the weights {bad[:3]} are not finite (inf or NaN); export this model's "
                                "weights again")
    model.load_state_dict(states[0])
    return model.eval(), states[0], states[1]


def import_pgdl(task_dir: str | Path, *, name: str | None = None, out: str | Path | None = None,
                tolerance: float = TOLERANCE, progress: bool = True) -> Zoo:
    """Import a PGDL task folder as the zoo `name` (default pgdl-<folder>) in `out` (default $GENBENCH_HOME/zoos/NAME).

    Every model's train and test accuracy is recomputed and must equal the recorded one within `tolerance`, or the
    import fails; the folder appears only when the import is complete."""
    task_dir = Path(task_dir).expanduser()
    name = plain_name(name or default_name(task_dir), what="zoo name", source="--name")
    root = Path(out).expanduser() if out is not None else zoos_dir() / name
    check_destination(root)
    models = read_task(task_dir)
    grid = grid_of(models, task_dir / CONFIGS)
    outputs = {keras_model(m).num_classes for m in models}  # every config mapped before any data is read
    pool, input_shape, has_test = _pool(task_dir)
    pool = _with_classes(pool, outputs, task_dir)
    with staged_folder(root) as tmp, torch.no_grad():
        rows, sources = [], {CONFIGS: sha256_file(task_dir / CONFIGS)}
        for m in tqdm(models, desc=f"importing {name}", unit="model", disable=not progress):
            rows.append(_write_model(tmp, m, pool, input_shape, f"pgdl/{task_dir.resolve().name}"))
            for rel in ("config.json", "weights.hdf5", "weights_init.hdf5"):
                sources[f"{m.model_id}/{rel}"] = sha256_file(m.folder / rel)
        _check_accuracies(rows, tolerance, has_test)
        for shard in sorted((task_dir / DATA).glob("*/shard_*.tfrecord")):
            sources[str(shard.relative_to(task_dir))] = sha256_file(shard)
        manifest = _manifest(name, task_dir, grid, pool, has_test, sources, tolerance)
        manifest["files"][DATASET] = save_checkpoint(tmp / DATASET, pool.tensors(), {"dataset": name})
        finish_zoo(tmp, rows, manifest)
    return Zoo(root)


def _write_model(root: Path, m: TaskModel, pool: Pool, input_shape: list[int], dataset: str) -> dict[str, Any]:
    """Convert one model, save both checkpoints, recompute its metrics; its table row."""
    model, state, init_state = convert_model(m, input_shape)
    files = save_pair(root, m.model_id, model, state, init_state)
    train_acc, train_loss = evaluate_model(model, pool.x_train, pool.y_train)
    test_acc, test_loss = evaluate_model(model, pool.x_test, pool.y_test) if len(pool.y_test) else (math.nan,) * 2
    hp = {**m.hparams, "train_size": len(pool.y_train), "label_noise": 0.0}
    return imported_row(
        m.model_id, hp, model, dataset, files, train_indices_seed=0,
        train_acc=m.train_acc, test_acc=m.test_acc, gap=m.train_acc - m.test_acc,
        recomputed_train_acc=train_acc, recomputed_test_acc=test_acc, train_loss=train_loss, test_loss=test_loss,
        epochs=None, steps=None, converged=None, twin_of=None, perturbation=None,
        final_softmax_dropped=bool(model.dropped_softmax))


def _check_accuracies(rows: list[dict[str, Any]], tolerance: float, has_test: bool) -> None:
    """Refuse the import when a recomputed accuracy is off the recorded one: the conversion would be wrong."""
    splits = ("train", "test") if has_test else ("train",)
    off = [f"{r['model_id']} {s} {r[f'recomputed_{s}_acc']:.4f} vs recorded {r[f'{s}_acc']:.4f}"
           for r in rows for s in splits if abs(r[f"recomputed_{s}_acc"] - r[f"{s}_acc"]) > tolerance]
    if off:
        raise GenbenchError(f"{len(off)} recomputed accuracies differ from the task's recorded ones by more than "
                            f"{tolerance}: {'; '.join(off[:5])}{' ...' if len(off) > 5 else ''}; genbench does not "
                            "reproduce these models (report it with the task's name), or pass a larger --tolerance")


def _manifest(name: str, task_dir: Path, grid: dict[str, list[Any]], pool: Pool, has_test: bool,
              sources: dict[str, str], tolerance: float) -> dict[str, Any]:
    """The task zoo's zoo.json: the source folder and the sha256 of each of its files, how outputs were mapped."""
    return imported_manifest(
        name, kind="pgdl", source=task_dir,
        description=f"PGDL task {task_dir.resolve().name!r} imported from {task_dir.resolve()}: Keras models "
                    "rebuilt in torch, their recorded accuracies as targets.",
        dataset={"name": "pgdl", "task": task_dir.resolve().name}, num_classes=pool.num_classes,
        data_kind=pool.kind, in_shape=list(pool.x_train.shape[1:]), train_pool_size=len(pool.y_train),
        test_size=len(pool.y_test), grid=grid,
        imported={"test_split": has_test, "targets": "train_acc and test_acc as recorded in model_configs.json",
                  "recomputed_tolerance": tolerance,
                  "outputs": "logits: a final softmax of a Keras model is left out (the argmax is unchanged)",
                  "source_sha256": sources})
