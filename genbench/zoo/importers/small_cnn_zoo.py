"""The Small CNN Zoo (Unterthiner et al. 2020, "Predicting Neural Network Accuracy from Weights") imported as a genbench
zoo: one model per training run, its final checkpoint (step 86 by default) and the step-0 checkpoint of the same run as
its init, rebuilt by the "keras" family, the run's config.* hyperparameters as hp.* columns and its recorded train and
test accuracy as the targets.

A dataset folder holds weights.npy (one row per run and checkpoint: the network's 4970 parameters flattened, layer by
layer bias then kernel, TensorFlow's kernel order [kh, kw, in, out]), metrics.csv.gz (the same rows: config.*, modeldir,
step, train_accuracy, test_accuracy, train_loss, test_loss) and layout.csv (which columns of weights.npy hold which
tensor). The network: three Conv2D of 16 filters 3x3, stride 2, 'valid' padding, the run's activation; global average
pooling; Dense(10), logits; on grayscale images (28x28 MNIST and Fashion-MNIST, 32x32 CIFAR-10 and SVHN). The zoo
ships no images and does not record each run's training subset: a zoo imported from it has no training data, so
only measures that read weights alone run on it."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ...errors import GenbenchError
from ...fileio import sha256_file
from ...models.keras import KerasSequential, keras_state_dict
from ...paths import plain_name, zoos_dir
from ..storage import Zoo
from .staging import check_destination, finish_zoo, imported_manifest, imported_row, save_pair, staged_folder

WEIGHTS, METRICS, LAYOUT = "weights.npy", "metrics.csv.gz", "layout.csv"
FINAL_STEP, INIT_STEP = 86, 0
# per dataset: image side, training-set size before config.train_fraction, test-set size (TFDS splits)
DATASETS = {"mnist": (28, 60_000, 10_000), "fashion_mnist": (28, 60_000, 10_000), "cifar10": (32, 50_000, 10_000),
            "svhn": (32, 73_257, 26_032)}
ALIASES = {"svhn_cropped": "svhn"}
FILTERS, LAYERS, CLASSES, KERNEL = 16, 3, 10, 3
# the flat vector, layer by layer, bias before kernel (the order of the paper's notebook and of layout.csv)
SEGMENTS = (("conv1", "bias", (FILTERS,)), ("conv1", "kernel", (KERNEL, KERNEL, 1, FILTERS)),
            ("conv2", "bias", (FILTERS,)), ("conv2", "kernel", (KERNEL, KERNEL, FILTERS, FILTERS)),
            ("conv3", "bias", (FILTERS,)), ("conv3", "kernel", (KERNEL, KERNEL, FILTERS, FILTERS)),
            ("dense", "bias", (CLASSES,)), ("dense", "kernel", (FILTERS, CLASSES)))
N_PARAMS = sum(int(np.prod(s)) for _, _, s in SEGMENTS)  # 4970
NEEDED = ("modeldir", "step", "train_accuracy", "test_accuracy")
MAX_LEVELS = 8  # a config.* column with more values is a continuous hyperparameter (an hp.* column, not a grid axis)
NO_DATA = ("the Small CNN Zoo ships no images and does not record which training subset each network saw; only "
           "measures that read weights alone run on it")


def keras_layers(activation: str) -> list[dict[str, Any]]:
    """The network of every run, as the keras family reads a Keras layer list."""
    conv = {"layer_name": "Conv2D", "filters": FILTERS, "kernel_size": [KERNEL, KERNEL], "strides": [2, 2],
            "padding": "valid", "activation": activation}
    return [dict(conv) for _ in range(LAYERS)] + [{"layer_name": "GlobalAveragePooling2D"},
                                                   {"layer_name": "Dense", "units": CLASSES, "activation": "linear"}]


def check_layout(path: Path) -> None:
    """layout.csv must place the tensors where SEGMENTS says: one row per tensor, in order, bias before kernel, of
    the documented sizes; anything else is refused, naming the row."""
    try:
        layout = pd.read_csv(path)
    except Exception as e:  # noqa: BLE001 (one line for any unreadable file)
        raise GenbenchError(f"cannot read {path}: {type(e).__name__}: {e}") from None
    cols = {c.lower(): c for c in layout.columns}
    name = next((cols[c] for c in ("varname", "name", "variable") if c in cols), None)
    start = next((cols[c] for c in ("start_idx", "start") if c in cols), None)
    end = next((cols[c] for c in ("end_idx", "end") if c in cols), None)
    if None in (name, start, end):
        raise GenbenchError(f"{path}: expected columns varname, start_idx and end_idx (one row per tensor), found "
                            f"{list(layout.columns)}")
    if len(layout) != len(SEGMENTS):
        raise GenbenchError(f"{path} lists {len(layout)} tensors; the Small CNN Zoo's network has {len(SEGMENTS)} "
                            "(3 convolutions and a dense layer, each a bias and a kernel)")
    offset = 0
    for i, ((layer, part, shape), row) in enumerate(zip(SEGMENTS, layout.itertuples(index=False))):
        var, a, b = str(getattr(row, name)), int(getattr(row, start)), int(getattr(row, end))
        size = int(np.prod(shape))
        if part not in var.lower() or (a, b) != (offset, offset + size):
            raise GenbenchError(f"{path}, row {i + 1} ({var!r}, columns {a}-{b}): expected the {layer} {part} at "
                                f"columns {offset}-{offset + size}; this is not the Small CNN Zoo's layout")
        offset += size


def split_weights(flat: np.ndarray) -> list[dict[str, np.ndarray]]:
    """One run's flat vector as the Keras weights of its 4 weighted layers ({'kernel', 'bias'} each)."""
    out: list[dict[str, np.ndarray]] = []
    offset = 0
    for layer, part, shape in SEGMENTS:
        size = int(np.prod(shape))
        if part == "bias":
            out.append({})
        out[-1][part] = np.array(flat[offset:offset + size], dtype=np.float32).reshape(shape)  # a copy: rows may be mmapped
        offset += size
    return out


def read_metrics(path: Path, rows: int) -> pd.DataFrame:
    """metrics.csv.gz, checked: the needed columns, one row per row of weights.npy."""
    try:
        df = pd.read_csv(path)
    except Exception as e:  # noqa: BLE001
        raise GenbenchError(f"cannot read {path}: {type(e).__name__}: {e}") from None
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise GenbenchError(f"{path} lacks the column(s) {missing} (found {list(df.columns)[:12]}...); it must be the "
                            "Small CNN Zoo's metrics file")
    if len(df) != rows:
        raise GenbenchError(f"{path} has {len(df)} rows but {WEIGHTS} has {rows}: each row of one must describe the "
                            "same checkpoint as the same row of the other")
    dup = df.duplicated(["modeldir", "step"])
    if dup.any():
        first = df.loc[dup].iloc[0]
        raise GenbenchError(f"{path}: run {first['modeldir']!r} has step {first['step']} twice ({int(dup.sum())} "
                            "duplicate rows); each run's checkpoint must appear once")
    return df


def dataset_of(metrics: pd.DataFrame, dataset: str | None, folder: Path) -> str:
    """The dataset the runs were trained on: --dataset, else the config.dataset column (which must agree)."""
    column = metrics.get("config.dataset")
    found = set() if column is None else {ALIASES.get(str(d), str(d)) for d in column.dropna().unique()}
    if dataset is None:
        if column is None:
            raise GenbenchError(f"{folder}: no config.dataset column; say which dataset with --dataset "
                                f"({'|'.join(DATASETS)})")
        if len(found) != 1:
            raise GenbenchError(f"{folder}: config.dataset holds {sorted(found)}; import one dataset at a time (one "
                                "folder per dataset, as the authors publish them)")
        (dataset,) = found
    dataset = ALIASES.get(dataset, dataset)
    if dataset not in DATASETS:
        raise GenbenchError(f"unknown dataset {dataset!r}; the Small CNN Zoo's are {', '.join(DATASETS)}")
    if found - {dataset}:
        raise GenbenchError(f"{folder}: --dataset {dataset} but config.dataset says {sorted(found)}; leave "
                            "--dataset out, or import the folder of that dataset")
    return dataset


def default_name(dataset: str) -> str:
    return f"small-cnn-zoo-{dataset.replace('_', '-')}"


def import_small_cnn_zoo(folder: str | Path, *, dataset: str | None = None, limit: int | None = None,
                         step: int = FINAL_STEP, name: str | None = None, out: str | Path | None = None,
                         progress: bool = True) -> Zoo:
    """Import a Small CNN Zoo dataset folder as the zoo `name` (default small-cnn-zoo-<dataset>) in `out` (default
    $GENBENCH_HOME/zoos/NAME): the first `limit` runs (all by default) that have both the checkpoint at `step` and
    the step-0 one, runs with non-finite weights skipped and counted. The folder appears only when complete."""
    folder = Path(folder).expanduser()
    for f in (WEIGHTS, METRICS, LAYOUT):
        if not (folder / f).is_file():
            raise GenbenchError(f"{folder} has no {f}: a Small CNN Zoo folder holds {WEIGHTS}, {METRICS} and {LAYOUT}")
    if limit is not None and limit < 1:
        raise GenbenchError(f"limit (--limit) must be at least 1, got {limit!r}")
    check_layout(folder / LAYOUT)
    try:
        weights = np.load(folder / WEIGHTS, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise GenbenchError(f"cannot read {folder / WEIGHTS} as a numpy array: {e}") from None
    if not isinstance(weights, np.ndarray) or weights.dtype.kind != "f":  # an .npz renamed, bools, ints, text
        what = type(weights).__name__ if not isinstance(weights, np.ndarray) else f"an array of {weights.dtype}"
        raise GenbenchError(f"{folder / WEIGHTS} holds {what}; the Small CNN Zoo's weights are one float array")
    if weights.ndim != 2 or weights.shape[1] != N_PARAMS:
        raise GenbenchError(f"{folder / WEIGHTS} has shape {weights.shape}; the Small CNN Zoo's rows hold "
                            f"{N_PARAMS} parameters each")
    metrics = read_metrics(folder / METRICS, len(weights))
    dataset = dataset_of(metrics, dataset, folder)
    name = plain_name(name or default_name(dataset), what="zoo name", source="--name")
    root = Path(out).expanduser() if out is not None else zoos_dir() / name
    check_destination(root)
    side, pool_size, test_size = DATASETS[dataset]
    runs, skipped = _runs(metrics, weights, step, limit)
    if not runs:
        raise GenbenchError(f"{folder}: no run has both a step-{step} and a step-{INIT_STEP} checkpoint with finite "
                            f"weights ({_skipped_text(skipped)})")
    finals = metrics.loc[[r["final"] for r in runs]]
    check_final_rows(finals, folder / METRICS)
    varied = [c for c in metrics.columns if c.startswith("config.") and c != "config.dataset"
              and finals[c].nunique(dropna=False) > 1]
    with staged_folder(root) as tmp, torch.no_grad():
        rows = [_write_run(tmp, r, metrics, weights, varied, side, pool_size, dataset)
                for r in tqdm(runs, desc=f"importing {name}", unit="model", disable=not progress)]
        axes = [c[len("config."):] for c in varied if finals[c].nunique(dropna=False) <= MAX_LEVELS]
        grid = {a: sorted(pd.unique(pd.Series([row[f"hp.{a}"] for row in rows])).tolist(), key=str) for a in axes}
        finish_zoo(tmp, rows, imported_manifest(
            name, kind="small-cnn-zoo", source=folder,
            description=f"Small CNN Zoo ({dataset}) imported from {folder.resolve()}: {len(runs)} runs, the checkpoint "
                        f"at step {step} and the run's step-0 checkpoint, rebuilt in torch; the recorded accuracies "
                        "as targets.",
            dataset={"name": "small-cnn-zoo", "task": dataset, "training_data": False, "why": NO_DATA},
            num_classes=CLASSES, data_kind="image", in_shape=[1, side, side], train_pool_size=None,
            test_size=test_size, grid=grid, expected_models=len(runs),
            imported={"step": step, "init_step": INIT_STEP, "skipped": skipped, "limit": limit,
                      "continuous": [c[len("config."):] for c in varied if c[len("config."):] not in axes],
                      "targets": "train_accuracy and test_accuracy as recorded in metrics.csv.gz (not recomputed: "
                                 "the zoo has no images)",
                      "source_sha256": {f: sha256_file(folder / f) for f in (WEIGHTS, METRICS, LAYOUT)}}))
    return Zoo(root)


WRITTEN = ("config.train_size", "config.label_noise")  # hyperparameters the importer writes itself


def check_final_rows(finals: pd.DataFrame, path: Path) -> None:
    """Refuse what would make a silently wrong zoo from the rows of the checkpoints imported: an accuracy that is no
    number in [0, 1] (a percentage, a blank), a training fraction outside (0, 1], a config column that would be
    written over."""
    for col in ("train_accuracy", "test_accuracy", "config.train_fraction"):
        if col not in finals:
            continue
        values = pd.to_numeric(finals[col], errors="coerce")
        low = 0.0 if col != "config.train_fraction" else 1e-12
        bad = ~values.between(low, 1.0)
        if bad.any():
            row = finals.loc[bad].iloc[0]
            what = "an accuracy in [0, 1]" if col != "config.train_fraction" else "a fraction in (0, 1]"
            raise GenbenchError(f"{path}: {col} of run {row['modeldir']!r} at step {row['step']} is "
                                f"{_plain(row[col])!r}, not {what} ({int(bad.sum())} such row(s)); fix the file or "
                                "import another step")
    clash = [c for c in WRITTEN if c in finals and finals[c].nunique(dropna=False) > 1]
    if clash:
        raise GenbenchError(f"{path}: the column(s) {clash} vary between runs, but genbench writes train_size and "
                            "label_noise itself (from config.train_fraction, and 0.0): rename them")


def _runs(metrics: pd.DataFrame, weights: np.ndarray, step: int, limit: int | None
          ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The runs to import, in the file's order: rows of their final and initial checkpoints; what was skipped."""
    by_run: dict[str, dict[int, int]] = {}
    steps_read = pd.to_numeric(metrics["step"], errors="coerce")
    for i, (run, s, raw) in enumerate(zip(metrics["modeldir"], steps_read, metrics["step"])):
        if pd.isna(run) or not str(run).strip() or pd.isna(s) or s != int(s):
            raise GenbenchError(f"{METRICS} row {i + 2}: modeldir {run!r} and step {raw!r}: each row names its run's "
                                "folder and a whole step; fix the file")
        by_run.setdefault(str(run), {})[int(s)] = i
    runs, skipped = [], {"no checkpoint at the step": 0, "no step-0 checkpoint": 0, "non-finite weights": 0}
    for run, steps in by_run.items():
        if limit is not None and len(runs) >= limit:
            break
        if step not in steps:
            skipped["no checkpoint at the step"] += 1
        elif INIT_STEP not in steps:
            skipped["no step-0 checkpoint"] += 1
        elif not (np.isfinite(weights[steps[step]]).all() and np.isfinite(weights[steps[INIT_STEP]]).all()):
            skipped["non-finite weights"] += 1
        else:
            runs.append({"run": run, "final": steps[step], "init": steps[INIT_STEP]})
    return runs, {k: v for k, v in skipped.items() if v}


def _skipped_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{v} skipped: {k}" for k, v in skipped.items()) or "none skipped"


def model_id(run: str) -> str:
    """A plain model id from a run's modeldir (its last path component, other characters replaced)."""
    last = [p for p in re.split(r"[\\/]", run) if p][-1] if run.strip("/\\") else "run"
    return re.sub(r"[^A-Za-z0-9._-]", "_", last).lstrip(".") or "run"


def _write_run(root: Path, r: dict[str, Any], metrics: pd.DataFrame, weights: np.ndarray, varied: list[str],
               side: int, pool_size: int, dataset: str) -> dict[str, Any]:
    """Convert one run, save its final and init checkpoints; its table row."""
    row = metrics.iloc[r["final"]]
    activation = str(row.get("config.activation", "relu"))
    model = KerasSequential(layers=keras_layers(activation), input_shape=[side, side, 1])
    state = keras_state_dict(model, split_weights(weights[r["final"]]))
    init_state = keras_state_dict(model, split_weights(weights[r["init"]]))
    mid = model_id(r["run"])
    if (root / f"checkpoints/{mid}.safetensors").exists():
        raise GenbenchError(f"two runs end in the same folder name {mid!r} (e.g. {r['run']!r}); model ids must be "
                            "unique")
    files = save_pair(root, mid, model, state, init_state)
    fraction = float(row.get("config.train_fraction", 1.0))
    train_acc, test_acc = float(row["train_accuracy"]), float(row["test_accuracy"])
    return imported_row(
        mid, {**{c[len("config."):]: _plain(row[c]) for c in varied}, "train_size": int(pool_size * fraction),
              "label_noise": 0.0},
        model, f"small-cnn-zoo/{dataset}", files, train_indices_seed=None, train_acc=train_acc, test_acc=test_acc,
        gap=train_acc - test_acc, train_loss=float(row.get("train_loss", math.nan)),
        test_loss=float(row.get("test_loss", math.nan)), epochs=int(row["step"]), source_run=r["run"])


def _plain(v: Any) -> Any:
    """A numpy scalar as its Python value (the table and the manifest's grid are JSON)."""
    return v.item() if hasattr(v, "item") else v
