"""Datasets a zoo trains on (MNIST-1D generated offline, sklearn digits, Hugging Face images), the
per-model training subsets and label corruption derived from recorded seeds, and augmentations."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import GenbenchError, did_you_mean


@dataclass(frozen=True)
class Pool:
    """All examples a zoo can draw from: the training pool and the clean test set."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    kind: str  # "signal" (1-D vectors) or "image" (C x H x W); decides the augmentation

    @property
    def in_shape(self) -> list[int]:
        return list(self.x_train.shape[1:])

    def tensors(self) -> dict[str, torch.Tensor]:
        """The four tensors, as stored in a zoo's dataset.safetensors."""
        return {"x_train": self.x_train, "y_train": self.y_train, "x_test": self.x_test, "y_test": self.y_test}


@dataclass(frozen=True)
class TrainingSet:
    """The exact inputs and labels (corrupted ones included) one model was trained on, un-augmented."""

    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    data_kind: str = "signal"
    augmentation: dict[str, Any] = field(default_factory=dict)


def _mnist1d(spec: dict[str, Any]) -> Pool:
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args(as_dict=True)
    unknown = set(spec) - set(args) - {"name"}
    if unknown:
        raise GenbenchError(f"dataset mnist1d: unknown generator argument(s) {sorted(unknown)}; "
                            f"allowed: {sorted(k for k in args if k != 'url')}")
    args.update({k: v for k, v in spec.items() if k != "name"})
    state = np.random.get_state()  # make_dataset reseeds numpy's global generator
    try:
        data = make_dataset(_ObjectView(args))
    finally:
        np.random.set_state(state)
    f = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32)  # noqa: E731
    y = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.int64)  # noqa: E731
    return Pool(f(data["x"]), y(data["y"]), f(data["x_test"]), y(data["y_test"]), 10, "signal")


class _ObjectView:
    def __init__(self, d: dict[str, Any]):
        self.__dict__ = d


def _digits(spec: dict[str, Any]) -> Pool:
    from sklearn.datasets import load_digits

    test_fraction = float(spec.get("test_fraction", 0.3))
    seed = int(spec.get("seed", 0))
    d = load_digits()
    x = torch.as_tensor(d.data / 16.0, dtype=torch.float32)
    x = (x - x.mean()) / x.std()
    y = torch.as_tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * len(y)))
    test, train = perm[:n_test].sort().values, perm[n_test:].sort().values
    return Pool(x[train], y[train], x[test], y[test], 10, "signal")


def _hf(spec: dict[str, Any]) -> Pool:
    from .hf_images import load_image_classification, to_float

    kwargs = {k: v for k, v in spec.items() if k in ("revision", "image_column", "label_column",
                                                     "train_split", "test_split", "cache_dir")}
    if "path" not in spec:
        raise GenbenchError("dataset 'hf' needs a 'path' (a Hub repo id such as uoft-cs/cifar10, or a local directory)")
    data = load_image_classification(spec["path"], **kwargs)
    x_train = data.x_train.float() / 255.0
    mean, std = x_train.mean(dim=(0, 2, 3)), x_train.std(dim=(0, 2, 3))
    return Pool(to_float(data.x_train, mean, std), data.y_train, to_float(data.x_test, mean, std),
                data.y_test, int(data.num_classes), "image")


DATASETS = {"mnist1d": _mnist1d, "digits": _digits, "hf": _hf}
EMBEDDED = {"mnist1d", "digits"}  # small enough to be stored inside the zoo


def load_pool(spec: dict[str, Any]) -> Pool:
    """Materialise the dataset a recipe names (never downloads MNIST-1D: it is generated)."""
    name = spec.get("name")
    if name not in DATASETS:
        raise did_you_mean(str(name), DATASETS, what="dataset", hint="Set dataset.name in the recipe.")
    return DATASETS[name](spec)


def train_subset(pool: Pool, *, train_size: int | None, label_noise: float, data_seed: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices into the training pool and the labels as trained (corrupted ones included).

    Subsets are the first n of a seeded permutation, and corruption is drawn per pool position, so
    subsets of one seed are nested across train sizes and share their corrupted labels. A corrupted
    label is replaced by a different class chosen uniformly.
    """
    n_pool = len(pool.y_train)
    n = n_pool if train_size is None else int(train_size)
    if not 0 < n <= n_pool:
        raise GenbenchError(f"train_size {n} is outside 1..{n_pool} (the size of the training pool)")
    if not 0.0 <= label_noise < 1.0:
        raise GenbenchError(f"label_noise {label_noise} must be in [0, 1)")
    g = torch.Generator().manual_seed(int(data_seed))
    perm = torch.randperm(n_pool, generator=g)
    flip = torch.rand(n_pool, generator=g) < label_noise
    offset = torch.randint(1, pool.num_classes, (n_pool,), generator=g)
    idx = perm[:n]
    labels = pool.y_train[idx].clone()
    corrupt = flip[:n]
    labels[corrupt] = (labels[corrupt] + offset[:n][corrupt]) % pool.num_classes
    return idx, labels


def draw_augmentation(kind: str, shape: tuple[int, ...], gen: torch.Generator, *, shift: int = 4,
                      noise: float = 0.1) -> dict[str, torch.Tensor]:
    """The random numbers that augment one model's batch of `shape`, drawn from `gen` on the CPU so
    that a model's stream is the same on every device and in every grouping."""
    b = shape[0]
    if kind == "signal":
        s = torch.randint(-shift, shift + 1, (b,), generator=gen)
        return {"shift": s, "noise": torch.randn(shape, generator=gen) * noise}
    if kind == "image":
        dy = torch.randint(0, 2 * shift + 1, (b,), generator=gen) - shift
        dx = torch.randint(0, 2 * shift + 1, (b,), generator=gen) - shift
        return {"dy": dy, "dx": dx, "flip": torch.rand(b, generator=gen) < 0.5}
    raise GenbenchError(f"no augmentation for data kind {kind!r}")


def apply_augmentation(x: torch.Tensor, kind: str, draw: dict[str, torch.Tensor]) -> torch.Tensor:
    """Augment a batch with drawn numbers: circular shift + Gaussian noise for 1-D signals, random crop
    (zero padding) + horizontal flip for images. Batches of several models may be concatenated."""
    draw = {k: v.to(x.device) for k, v in draw.items()}
    b = x.shape[0]
    if kind == "signal":
        length = x.shape[-1]
        idx = (torch.arange(length, device=x.device)[None, :] - draw["shift"][:, None]) % length
        idx = idx.view(b, *([1] * (x.dim() - 2)), length).expand_as(x)
        return torch.gather(x, -1, idx) + draw["noise"]
    _, c, h, w = x.shape
    pad = int(max(draw["dy"].abs().max(), draw["dx"].abs().max())) if b else 0
    x = torch.where(draw["flip"][:, None, None, None], x.flip(-1), x)
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    rows = torch.arange(h, device=x.device)[None, :] + pad + draw["dy"][:, None]
    cols = torch.arange(w, device=x.device)[None, :] + pad + draw["dx"][:, None]
    padded = torch.gather(padded, 2, rows[:, None, :, None].expand(b, c, h, padded.shape[-1]))
    return torch.gather(padded, 3, cols[:, None, None, :].expand(b, c, h, w))


def augment(x: torch.Tensor, kind: str, gen: torch.Generator, *, shift: int = 4, noise: float = 0.1
            ) -> torch.Tensor:
    """Randomly augment one model's batch (see `draw_augmentation` and `apply_augmentation`)."""
    return apply_augmentation(x, kind, draw_augmentation(kind, tuple(x.shape), gen, shift=shift, noise=noise))
