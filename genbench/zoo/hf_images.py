"""Load any Hugging Face image-classification dataset (Hub id or local directory) as uint8 NCHW tensors for zoo training."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import GenbenchError, did_you_mean

__all__ = ["ImageData", "load_image_classification", "to_float"]

_GRAY_MODES = {"1", "L"}          # PIL modes stored as one channel; everything else becomes RGB
_LABEL_PREFERENCE = ("label", "fine_label")  # ClassLabel names preferred over "first ClassLabel"
_BATCH = 1000                      # images decoded per numpy batch
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ImageData:
    """Train/test images (uint8, N x C x H x W) and int64 labels, with class names and where they came from."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    class_names: list[str]
    source: dict[str, Any] = field(default_factory=dict)


def load_image_classification(path: str, *, revision: str | None = None, image_column: str | None = None,
                              label_column: str | None = None, train_split: str = "train",
                              test_split: str = "test", cache_dir: str | None = None) -> ImageData:
    """Load `path` (Hub repo id, `save_to_disk` folder, or folder of data files) into uint8 tensors, checking columns and splits."""
    dd, kind = _load_dataset_dict(path, revision=revision, cache_dir=cache_dir)
    for arg, split in (("train_split", train_split), ("test_split", test_split)):
        if split not in dd:
            raise GenbenchError(f"dataset {path!r} has no split {split!r}; splits present: "
                                f"{', '.join(sorted(dd)) or '(none)'}. Pass {arg}=... with one of them.")
    train, test = dd[train_split], dd[test_split]
    img_col, lab_col = _pick_columns(path, train.features, image_column, label_column)
    missing = [c for c in (img_col, lab_col) if c not in test.column_names]
    if missing:
        raise GenbenchError(f"split {test_split!r} of {path!r} lacks column(s) {missing}; it has: "
                            f"{', '.join(test.column_names)}.")

    mode = _target_mode(train, img_col)
    x_train = _images(train, img_col, mode, f"{path}[{train_split}]")
    x_test = _images(test, img_col, mode, f"{path}[{test_split}]")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise GenbenchError(f"{path!r}: train images are {tuple(x_train.shape[1:])} (C, H, W) but test images are "
                            f"{tuple(x_test.shape[1:])}; all images must share one size.")
    y_train, y_test = _labels(train, lab_col), _labels(test, lab_col)

    feature = train.features[lab_col]
    if type(feature).__name__ == "ClassLabel":
        class_names = [str(n) for n in feature.names]
    else:  # explicit integer column without ClassLabel: classes are 0..max
        top = max(int(y.max()) if len(y) else -1 for y in (y_train, y_test))
        class_names = [str(i) for i in range(top + 1)]
    num_classes = len(class_names)
    for split, y in ((train_split, y_train), (test_split, y_test)):
        bad = (y < 0) | (y >= num_classes)
        if bool(bad.any()):
            raise GenbenchError(f"split {split!r} of {path!r} has {int(bad.sum())} label(s) outside 0..{num_classes - 1} "
                                f"in column {lab_col!r} (e.g. {int(y[bad][0])}; -1 means unlabeled). "
                                f"Pick labelled splits with train_split=/test_split=.")

    source = dict(path=str(path), kind=kind, requested_revision=revision,
                  revision=revision if kind != "hub" else (_resolved_revision(train) or revision),
                  image_column=img_col, label_column=lab_col, train_split=train_split, test_split=test_split,
                  image_mode=mode)
    return ImageData(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                     num_classes=num_classes, class_names=class_names, source=source)


def to_float(x: torch.Tensor, mean: torch.Tensor | None = None, std: torch.Tensor | None = None) -> torch.Tensor:
    """Scale uint8 N x C x H x W to float32 in [0, 1], then standardise per channel (stats from `x` unless given)."""
    xf = x.to(torch.float32) / 255.0
    dims = (0, 2, 3)
    mean = xf.mean(dim=dims) if mean is None else torch.as_tensor(mean, dtype=torch.float32)
    std = xf.std(dim=dims) if std is None else torch.as_tensor(std, dtype=torch.float32)
    std = torch.where(std > 0, std, torch.ones_like(std))  # constant channels: centre only, avoid division by 0
    return (xf - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


def _load_dataset_dict(path: str, *, revision: str | None, cache_dir: str | None) -> tuple[Any, str]:
    """Open `path` as a DatasetDict: `load_from_disk` for save_to_disk folders, `load_dataset` otherwise."""
    import datasets

    p = Path(os.path.expanduser(str(path)))
    # Hub ids are "name" or "owner/name"; anything else path-like is meant as a local folder
    looks_local = p.is_absolute() or str(path).startswith((".", "~")) or str(path).strip("/").count("/") > 1
    try:
        if p.is_dir() and (p / "dataset_dict.json").is_file():
            dd, kind = datasets.load_from_disk(str(p)), "save_to_disk"
        elif p.is_dir():
            dd, kind = datasets.load_dataset(str(p), cache_dir=cache_dir), "local_files"
        elif looks_local or p.exists():
            raise GenbenchError(f"local dataset path {str(path)!r} is not a directory. Pass a folder written by "
                                f"DatasetDict.save_to_disk, a folder of data files, or a Hub repo id.")
        else:
            dd, kind = datasets.load_dataset(str(path), revision=revision, cache_dir=cache_dir), "hub"
    except GenbenchError:
        raise
    except Exception as e:  # noqa: BLE001 - any loader failure becomes one actionable message
        raise GenbenchError(
            f"could not load dataset {str(path)!r}: {type(e).__name__}: {' '.join(str(e).split())[:500].rstrip('.')}. "
            "The Hugging Face Hub may be unreachable (or HF_HUB_OFFLINE=1 with nothing cached): pass a local "
            "directory (written by DatasetDict.save_to_disk, or holding the repo's data files), or set HF_ENDPOINT "
            "to a reachable mirror.") from None
    if not isinstance(dd, datasets.DatasetDict):
        raise GenbenchError(f"{str(path)!r} holds a single Dataset without named splits; save a DatasetDict "
                            f"(e.g. DatasetDict(train=..., test=...).save_to_disk(...)) instead.")
    return dd, kind


def _pick_columns(path: str, features: Any, image_column: str | None, label_column: str | None) -> tuple[str, str]:
    """Choose the image (datasets.Image) and label (datasets.ClassLabel) columns, or check the given ones."""
    names = list(features)
    kinds = {n: type(f).__name__ for n, f in features.items()}
    cols = ", ".join(f"{n} ({kinds[n]})" for n in names)

    if image_column is None:
        images = [n for n in names if kinds[n] == "Image"]
        if len(images) != 1:
            what = "no datasets.Image column" if not images else f"several Image columns {images}"
            raise GenbenchError(f"{path!r} has {what}; columns: {cols}. Pass image_column=... to choose one.")
        image_column = images[0]
    elif image_column not in features:
        raise did_you_mean(image_column, names, what="image column",
                           hint=f"Columns of {path!r}: {cols}. Pass image_column=... with one of them.")
    elif kinds[image_column] != "Image":
        raise GenbenchError(f"column {image_column!r} of {path!r} is {kinds[image_column]}, not datasets.Image; "
                            f"columns: {cols}. Pass image_column=... naming an Image column.")

    if label_column is None:
        labels = [n for n in names if kinds[n] == "ClassLabel"]
        if not labels:
            raise GenbenchError(f"{path!r} has no datasets.ClassLabel column; columns: {cols}. "
                                f"Pass label_column=... naming the integer label column.")
        label_column = next((n for n in _LABEL_PREFERENCE if n in labels), labels[0])
    elif label_column not in features:
        raise did_you_mean(label_column, names, what="label column",
                           hint=f"Columns of {path!r}: {cols}. Pass label_column=... with one of them.")
    elif kinds[label_column] != "ClassLabel" and not (
            kinds[label_column] == "Value" and str(features[label_column].dtype).startswith(("int", "uint"))):
        raise GenbenchError(f"column {label_column!r} of {path!r} is {features[label_column]}, not a ClassLabel or "
                            f"integer column; columns: {cols}. Pass label_column=... naming one.")
    return image_column, label_column


def _target_mode(ds: Any, column: str) -> str:
    """Return "L" when the first training image is grayscale, else "RGB" (one mode for the whole dataset)."""
    if len(ds) == 0:
        return "RGB"
    first = ds.select_columns([column])[0][column]
    return "L" if getattr(first, "mode", "RGB") in _GRAY_MODES else "RGB"


def _images(ds: Any, column: str, mode: str, where: str) -> torch.Tensor:
    """Decode `column` to one uint8 N x C x H x W tensor in batches, converting every image to `mode`."""
    import datasets

    ds = ds.select_columns([column]).cast_column(column, datasets.Image(mode=mode)).with_format("numpy")
    n, channels = len(ds), 1 if mode == "L" else 3
    if n == 0:
        return torch.empty((0, channels, 0, 0), dtype=torch.uint8)
    out: np.ndarray | None = None
    start = 0
    for batch in ds.iter(batch_size=_BATCH):
        arr = batch[column]
        if arr.dtype == object:  # numpy formatting could not stack: sizes differ inside this batch
            sizes = sorted({tuple(np.asarray(a).shape[:2]) for a in arr})
            raise GenbenchError(f"{where}: images have different sizes (H, W) {sizes[:5]}"
                                f"{' ...' if len(sizes) > 5 else ''}; all images must share one size.")
        if arr.ndim == 3:
            arr = arr[..., None]
        if out is None:
            out = np.empty((n, *arr.shape[1:]), dtype=np.uint8)
        elif arr.shape[1:] != out.shape[1:]:
            raise GenbenchError(f"{where}: images have different sizes (H, W) "
                                f"{sorted({tuple(out.shape[1:3]), tuple(arr.shape[1:3])})}; all images must share one size.")
        out[start:start + len(arr)] = arr
        start += len(arr)
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def _labels(ds: Any, column: str) -> torch.Tensor:
    """Read the label column as an int64 tensor without decoding any image."""
    arr = ds.select_columns([column]).with_format("numpy")[:][column]
    return torch.from_numpy(np.asarray(arr, dtype=np.int64))


def _resolved_revision(ds: Any) -> str | None:
    """Best effort: the commit sha in the Hub builder's cache path (datasets keys its cache by it), else None."""
    for f in getattr(ds, "cache_files", None) or []:
        for part in Path(f.get("filename", "")).parts:
            if _SHA.match(part):
                return part
    return None
