"""What every importer of a zoo published elsewhere shares: the zoo is written into a hidden folder beside its
destination and renamed into place only when complete, so a failed import leaves nothing behind and a zoo folder is
never half-written; each model's two checkpoints, its table row and the zoo's manifest take the same form whatever
the source."""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from ...errors import GenbenchError
from ...fileio import write_text_atomic
from ...version import __version__
from ..card import dataset_card
from ..storage import Zoo, commit_table, save_checkpoint

BUILD_ONLY = ("epochs", "steps", "converged", "twin_of", "perturbation")  # columns an import leaves empty by default


def check_destination(root: Path) -> None:
    """Refuse to import over anything that already exists (a zoo is never overwritten or merged)."""
    if root.exists():
        raise GenbenchError(f"{root} already exists; pass another folder with --out (or another --name), or delete "
                            "it to import again")


@contextmanager
def staged_folder(root: Path) -> Iterator[Path]:
    """A fresh hidden folder beside `root` to write into; renamed to `root` when the block ends without error,
    deleted otherwise."""
    check_destination(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.parent / f".{root.name}.importing-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        check_destination(root)  # another process may have made it meanwhile
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save_pair(root: Path, model_id: str, model: nn.Module, state: Mapping[str, torch.Tensor],
              init_state: Mapping[str, torch.Tensor], *, family: str = "keras") -> dict[str, str]:
    """Save one imported model's final and initial weights (as `model` holds them once loaded, its architecture in
    each header); the table's checkpoint columns. `model` is left at its final weights."""
    meta = {"family": family, "arch": model.config, "model_id": model_id, "genbench_version": __version__}
    files: dict[str, str] = {}
    for column, sha_column, suffix, weights in (("checkpoint", "checkpoint_sha256", "", state),
                                                ("init_checkpoint", "init_sha256", ".init", init_state)):
        rel = f"checkpoints/{model_id}{suffix}.safetensors"
        model.load_state_dict(weights)
        files[column], files[sha_column] = rel, save_checkpoint(root / rel, model.state_dict(), meta)
    model.load_state_dict(state)
    return files


def imported_row(model_id: str, hp: Mapping[str, Any], model: nn.Module, dataset: str, files: Mapping[str, str],
                 *, family: str = "keras", **columns: Any) -> dict[str, Any]:
    """One table row of an imported model: id, hp.* columns, family and architecture, `columns` (targets, metrics,
    provenance, in the order given), the columns only a genbench build fills (None unless given), its checkpoints."""
    row = {"model_id": model_id, **{f"hp.{k}": v for k, v in hp.items()}, "family": family,
           "arch": json.dumps(model.config), "dataset": dataset, **columns}
    for column in BUILD_ONLY:
        row.setdefault(column, None)
    return {**row, **files, "train_seconds": math.nan}


def imported_manifest(name: str, *, kind: str, source: Path, description: str, dataset: dict[str, Any],
                      num_classes: int, data_kind: str, in_shape: list[int], train_pool_size: int | None, test_size: int,
                      grid: dict[str, list[Any]], imported: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The zoo.json of an imported zoo (its `files` filled in as they are written): what any zoo's manifest holds,
    `fields` beside them, and under `imported` the source's kind, folder, import time and what `imported` adds."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return {
        "format_version": 1, "name": name, "version": 1, "description": description, "dataset": dataset,
        "num_classes": num_classes, "data_kind": data_kind, "in_shape": in_shape, "train_pool_size": train_pool_size,
        "test_size": test_size, "grid": grid, "twins": [], **fields, "genbench_version": __version__,
        "torch_version": torch.__version__, "device": "cpu", "created": now,
        "imported": {"kind": kind, "source": str(source.resolve()), "created": now, **imported},
        "files": {},
    }


def finish_zoo(root: Path, rows: list[dict[str, Any]], manifest: dict[str, Any],
               card: Callable[[Zoo], str] = dataset_card) -> None:
    """Write the table and the manifest citing it, then the dataset card, into the staged folder `root`."""
    commit_table(root, pd.DataFrame(rows), manifest)
    write_text_atomic(root / "README.md", card(Zoo(root)))
