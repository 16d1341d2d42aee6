"""The folder the sandboxed worker computes from: job.json (the entry, where measure.py is, the device, the memory
cap), then each model's checkpoints and its training set (inputs and labels as trained), exported the first time
the harness asks for that model; never a zoo's test split, its table (gaps, test accuracies), a model id or a zoo
name. Checkpoints are written again with their tensors only: a zoo's checkpoint carries metadata (the model's
hyperparameters, its label noise) that would tell a measure what its gap depends on."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ...zoo.storage import Zoo

JOB_FILE = "job.json"


def _tensors_only(src: Path, dst: Path) -> None:
    """The checkpoint `src` at `dst` with its tensors and nothing else (no header metadata)."""
    save_file(load_file(str(src.resolve())), str(dst))


def _digest(x: torch.Tensor, y: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in (x, y):
        h.update(f"{t.dtype}{tuple(t.shape)}".encode() + t.numpy().tobytes())
    return h.hexdigest()


class JobFolder:
    """The job folder of one submission run; `model(zoo, id)` exports a model on first use and says where it is.
    Every checkpoint is a new file of its tensors only, whatever `link` says (kept for the callers that pass it)."""

    def __init__(self, root: Path, *, entry: str, measure_file: str, device: str, memory_bytes: int,
                 link: bool = True):
        self.root, self.link = Path(root), link
        self.root.mkdir(parents=True, exist_ok=True)
        self.zoos: dict[str, str] = {}  # zoo root -> its folder name (z0, z1, ...)
        self.models: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.train: dict[str, str] = {}  # training set digest -> its file, per zoo folder
        job = {"entry": entry, "measure_file": measure_file, "device": device, "memory_bytes": int(memory_bytes)}
        (self.root / JOB_FILE).write_text(json.dumps(job))

    @property
    def file(self) -> Path:
        return self.root / JOB_FILE

    def model(self, zoo: Zoo, model_id: str) -> dict[str, Any] | None:
        """Where the worker finds the model: {"folder", "family", "arch", "checkpoint", "init", "train"}; exported
        now if it is not there yet. None when the model cannot be read here (the harness says so itself)."""
        zkey = str(Path(zoo.root).resolve())
        if (zkey, model_id) not in self.models:
            folder = self.zoos.setdefault(zkey, f"z{len(self.zoos)}")
            try:
                self.models[(zkey, model_id)] = self._export(zoo, model_id, folder)
            except Exception:  # the harness reports the model as not loadable, in its own words
                self.models[(zkey, model_id)] = None
        return self.models[(zkey, model_id)]

    def _export(self, zoo: Zoo, model_id: str, folder: str) -> dict[str, Any]:
        out = self.root / folder
        out.mkdir(exist_ok=True)
        j = sum(1 for (z, _) in self.models if self.zoos.get(z) == folder)
        row = zoo.row(model_id)
        spec: dict[str, Any] = {"folder": folder, "family": str(row["family"]), "arch": json.loads(row["arch"])}
        for key, column, name in (("checkpoint", "checkpoint", f"m{j}.safetensors"),
                                  ("init", "init_checkpoint", f"m{j}.init.safetensors")):
            src = zoo.root / str(row[column])
            if src.is_file():
                _tensors_only(src, out / name)
                spec[key] = name
        if not zoo.has_training_data:  # a zoo of weights only: SandboxExecutor.run refuses measures that need data
            return spec
        train = zoo.training_set(model_id)
        x, y = train.x.detach().cpu().contiguous(), train.y.detach().cpu().contiguous()
        key = f"{folder}/{_digest(x, y)}"
        if key not in self.train:
            self.train[key] = f"t{len(self.train)}.safetensors"
            save_file({"x": x, "y": y}, str(out / self.train[key]))
        spec["train"] = {"file": self.train[key], "num_classes": int(train.num_classes),
                         "data_kind": str(train.data_kind), "augmentation": dict(train.augmentation)}
        return spec
