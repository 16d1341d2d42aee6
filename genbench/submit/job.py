"""What the sandboxed worker is asked to compute, and the folder it computes it from.

`plan_tasks` lists every measure call the parent's harness will make (the conformance suite's, each zoo's, the
audit's and its rescaling control's), in the order it makes them. `export_job` writes a folder with only what the
measure is entitled to: each model's checkpoints and its training set (inputs and labels as trained), plus the
task list; never a zoo's test split, its table (gaps, test accuracies) or anything else of the zoo."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors.torch import save_file

from ..defaults import BUDGET_S, SEED
from ..harness.check import RESCALE_ALPHA
from ..scoring.audit import ALPHAS, _control_models
from ..zoo.storage import Zoo

JOB_FILE = "job.json"


@dataclass(frozen=True)
class Task:
    """One measure call: a model of a zoo (rescaled by `alpha` around a ReLU when set), its budget and seed, and
    the stage of the run it belongs to (what a crash or hang during it is reported as)."""

    zoo: Zoo
    model_id: str
    alpha: float | None
    budget_s: float | None
    stage: str
    only_if: str | None = None  # an invariance the measure must declare for the call to be made

    @property
    def where(self) -> str:
        return f"{self.stage} on {self.zoo.name}"


def base_models(zoo: Zoo) -> list[str]:
    """The audit's baseline models (not twins), sorted, as `scoring.audit.audit` picks them."""
    table = zoo.table.copy()
    table["model_id"] = table["model_id"].astype(str)
    twin_of = table["twin_of"] if "twin_of" in table else pd.Series(None, index=table.index)
    is_twin = twin_of.notna() & (twin_of.astype(str) != "")
    return sorted(table.loc[~is_twin, "model_id"])


def plan_tasks(entry: str, zoos: list[Zoo], *, check_models: int, budget_s: float | None,
               audit_zoo: Zoo | None, control_models: int = 4) -> tuple[list[Task], int]:
    """Every call the parent's harness makes, in its order, and how many of them are the conformance suite's:
    check_measure on the first zoo (its first models, the first again, the first rescaled), then `evaluate` on
    each zoo, then the audit's `evaluate` on the audit zoo and its rescaling control."""
    first = zoos[0]
    ids = first.model_ids[:max(2, check_models)]
    check_budget = budget_s or BUDGET_S
    stage = f"running the conformance suite on {len(ids)} models"
    tasks = [Task(first, mid, None, check_budget, stage) for mid in ids]
    tasks += [Task(first, ids[0], None, check_budget, stage),
              Task(first, ids[0], RESCALE_ALPHA, check_budget, stage, only_if="relu_rescale")]
    n_check = len(tasks)
    for z in zoos:
        tasks += [Task(z, mid, None, budget_s, f"evaluating {entry} on {len(z)} models") for mid in z.model_ids]
    if audit_zoo is not None:
        a = audit_zoo
        tasks += [Task(a, mid, None, BUDGET_S, f"evaluating {entry} for the fragility audit ({len(a)} models)")
                  for mid in a.model_ids]
        for mid in _control_models(base_models(a), control_models):
            stage = "running the fragility audit's rescaling control"
            tasks += [Task(a, mid, None, None, stage), *(Task(a, mid, alpha, None, stage) for alpha in ALPHAS)]
    return tasks, n_check


def _place(src: Path, dst: Path, link: bool) -> None:
    """`src` at `dst`: a hard link where allowed and the filesystem can make one (no copy), else a copy."""
    src = src.resolve()
    if link:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copyfile(src, dst)


def _zoo_folder(zoo: Zoo, folder: Path, ids: list[str], link: bool) -> dict[str, Any]:
    """Export the models `ids` of `zoo` into `folder`: checkpoints, and each distinct training set once."""
    folder.mkdir(parents=True)
    tensors: dict[str, torch.Tensor] = {}
    seen: dict[str, str] = {}

    def keep(t: torch.Tensor, prefix: str) -> str:
        t = t.detach().cpu().contiguous()
        digest = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode() + t.numpy().tobytes()).hexdigest()
        if digest not in seen:
            seen[digest] = f"{prefix}{len(tensors)}"
            tensors[seen[digest]] = t
        return seen[digest]

    models = []
    for j, mid in enumerate(ids):
        row = zoo.row(mid)
        spec: dict[str, Any] = {"family": str(row["family"]), "arch": json.loads(row["arch"])}
        for key, column in (("checkpoint", "checkpoint"), ("init", "init_checkpoint")):
            src = zoo.root / str(row[column])
            if src.is_file():
                name = f"m{j}.init.safetensors" if key == "init" else f"m{j}.safetensors"
                _place(src, folder / name, link)
                spec[key] = name
        try:
            train = zoo.training_set(mid)
        except Exception:  # the parent's own evaluation reports the model as not loadable
            train = None
        if train is not None:
            spec["train"] = {"x": keep(train.x, "x"), "y": keep(train.y, "y"), "num_classes": int(train.num_classes),
                             "data_kind": str(train.data_kind), "augmentation": dict(train.augmentation)}
        models.append(spec)
    if tensors:
        save_file(tensors, str(folder / "train.safetensors"))
    return {"folder": folder.name, "models": models}


def export_job(root: Path, tasks: list[Task], *, entry: str, measure_file: str, device: str,
               memory_bytes: int, seed: int = SEED, link: bool = True) -> Path:
    """Write the job folder `root`: one sub-folder per zoo with the checkpoints and training sets of the models
    the tasks use, and job.json (the entry, where measure.py is, the device, the memory cap and the tasks, each
    as zoo and model positions; model ids and zoo names are not needed and not written). Checkpoints are hard
    links when `link` (only for a folder the worker sees read-only), else copies."""
    zoo_index: dict[str, int] = {}
    ids: list[dict[str, int]] = []
    zoos: list[Zoo] = []
    place = []
    for t in tasks:
        key = str(Path(t.zoo.root).resolve())
        if key not in zoo_index:
            zoo_index[key] = len(zoos)
            zoos.append(t.zoo)
            ids.append({})
        i = zoo_index[key]
        ids[i].setdefault(t.model_id, len(ids[i]))
        place.append((i, ids[i][t.model_id]))
    exported = [_zoo_folder(z, root / f"z{i}", list(ids[i]), link) for i, z in enumerate(zoos)]
    job = {"entry": entry, "measure_file": measure_file, "device": device, "memory_bytes": int(memory_bytes),
           "zoos": exported,
           "tasks": [{"zoo": i, "model": j, "alpha": t.alpha, "budget_s": t.budget_s, "seed": seed,
                      "only_if": t.only_if} for t, (i, j) in zip(tasks, place)]}
    (root / JOB_FILE).write_text(json.dumps(job))
    return root / JOB_FILE
