"""The zoo on disk (zoo.json, models.parquet, safetensors checkpoints, dataset card) and the `Zoo`
object that reads it: the table, models at their final or initial weights, and their exact data; whether
a zoo holds every model of its recipe, and the state of each zoo folder."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd
import torch
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from ..device import resolve_device
from ..errors import GenbenchError, did_you_mean, string_list
from ..fileio import atomic_write, sha256_file, write_json_atomic
from ..models import build_model
from ..paths import is_plain_name, plain_name, zoos_dir
from ..text import plain_text
from .data import Pool, TrainingSet, load_pool, train_subset
from .recipe import TRAIN_DEFAULTS, list_recipes
from .roles import build_command_of, manifest_training, not_built

MANIFEST = "zoo.json"
TABLE = "models.parquet"
DATASET = "dataset.safetensors"
PENDING_TABLE = ".models.parquet.pending"  # a build's next table, before the manifest citing it is written
TIMING_COLUMNS = ("train_seconds",)  # differ between otherwise identical builds
REQUIRED_COLUMNS = ("model_id", "gap")  # what every reader of a zoo's table needs (DESIGN.md 3)
FILE_COLUMNS = ("checkpoint", "init_checkpoint")  # the table's paths (relative to the zoo folder)
HASH_COLUMNS = ("checkpoint_sha256", "init_sha256")  # the table's sha256 hex digests (also used in cache paths)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def save_checkpoint(path: Path, state: dict[str, torch.Tensor], metadata: dict[str, Any]) -> str:
    """Write a safetensors checkpoint atomically; return its sha256.

    The metadata goes into one JSON entry: safetensors orders several entries differently from one
    process to the next, and a checkpoint's bytes (and so its hash) must be reproducible."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    header = {"genbench": json.dumps(metadata, sort_keys=True)}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=header))
    return sha256_file(path)


def expected_count(grid: dict[str, list[Any]], twins: list[Any] | None) -> int:
    """How many models a recipe makes: every grid point, each followed by its twins (as `Recipe.expand()`)."""
    return math.prod(len(values) for values in grid.values()) * (1 + len(twins or []))


def read_table(root: Path, fix: str = "delete it and rebuild the zoo, or download it again") -> pd.DataFrame | None:
    """The models table of a zoo folder, or None before the first model is written; a file that is no table (empty,
    cut short, another format) is refused in one line ending in `fix`, what to do about it."""
    p = root / TABLE
    if not p.exists():
        return None
    try:
        return pd.read_parquet(p)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise GenbenchError(f"{p}: the table file is unreadable ({plain_text(e)}); {fix}") from None


def read_manifest(path: Path) -> dict[str, Any]:
    """A zoo's manifest (zoo.json) as a JSON object; a file that is not UTF-8 JSON of an object is refused."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # not UTF-8 text, or not JSON
        why = (f"not UTF-8 text ({e.reason} at byte {e.start})" if isinstance(e, UnicodeDecodeError)
               else f"not valid JSON ({e})")
        raise GenbenchError(f"{path} is {why}; rebuild or re-download the zoo") from None
    if not isinstance(manifest, dict):
        raise GenbenchError(f"{path} holds a {type(manifest).__name__}, not a JSON object; rebuild or re-download "
                            "the zoo")
    for key, least in (("num_classes", 2), ("train_pool_size", 0), ("test_size", 0)):  # read with int() later
        v = manifest.get(key, least)
        if (v is not None or key == "num_classes") and (isinstance(v, bool) or not isinstance(v, int) or v < least):
            raise GenbenchError(f"{path}: its field {key} is {v!r}, not a whole number >= {least} (was it edited?); "
                                "rebuild or re-download the zoo")
    shape = manifest.get("in_shape", [1])
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise GenbenchError(f"{path}: its field in_shape is {shape!r}, not a list of whole numbers >= 1 (was it "
                            "edited?); rebuild or re-download the zoo")
    return manifest


def commit_table(root: Path, table: pd.DataFrame, manifest: dict[str, Any]) -> str:
    """Save a zoo's table and the manifest that cites its sha256 (set in `manifest`) so that a crash at any point
    leaves a zoo that the next build completes; return the sha256.

    1. the new table is written beside the current one (PENDING_TABLE); 2. the manifest citing it is written;
    3. it replaces the current table. Each step is an atomic rename. A crash before step 2 leaves the current
    table and manifest in agreement (`recover_table` drops the pending table; the build trains its new models
    again); a crash after it leaves the manifest citing the pending table, which `recover_table` puts in place."""
    pending = root / PENDING_TABLE
    atomic_write(pending, lambda tmp: table.to_parquet(tmp, index=False))
    manifest.setdefault("files", {})[TABLE] = sha = sha256_file(pending)
    write_json_atomic(root / MANIFEST, manifest)
    _install(pending, root / TABLE)
    return sha


def _install(pending: Path, path: Path) -> None:
    """The last step of `commit_table`: the pending table becomes the table (an atomic rename)."""
    os.replace(pending, path)


def recover_table(root: Path, manifest: dict[str, Any] | None) -> str | None:
    """Finish or undo a `commit_table` that a crash interrupted; return what was done ('finished', 'dropped') or
    None when nothing was pending. A pending table that the manifest cites is put in place (the manifest was
    committed); any other is deleted (it was not: the current table and manifest still agree)."""
    pending = root / PENDING_TABLE
    if not pending.is_file():
        return None
    cited = ((manifest or {}).get("files") or {}).get(TABLE)
    if cited is not None and sha256_file(pending) == cited:
        _install(pending, root / TABLE)
        return "finished"
    pending.unlink()
    return "dropped"


def zoo_file(rel: Any, *, source: str) -> str:
    """`rel` when it is a path inside a zoo folder: relative, '/'-separated, each part a plain file name (no '..',
    nothing hidden, no absolute path); else a GenbenchError naming it and where it came from. The files a zoo's
    manifest and table list come from a download, so none of them may point outside the zoo."""
    parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
    if not parts or not all(is_plain_name(part) for part in parts):
        raise GenbenchError(f"file path {rel!r} (from {source}) is not a path inside the zoo folder (plain names "
                            "separated by '/': letters, digits, '.', '_' and '-', none starting with a dot); "
                            "genbench refuses to use it; rebuild or re-download the zoo")
    return rel


def _check_table(table: pd.DataFrame, source: str) -> None:
    """Refuse a table that lacks a column every zoo's table has (REQUIRED_COLUMNS), whose model ids are missing or
    repeated, or whose file paths or hashes could lead outside the zoo (or its caches): every checkpoint path a
    `zoo_file`, every hash 64 lowercase hex digits."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table]
    if missing:
        raise GenbenchError(f"{source} has no column {', '.join(map(repr, missing))}: a zoo's table holds one row per "
                            f"model with at least {' and '.join(REQUIRED_COLUMNS)} (train_acc - test_acc); rebuild "
                            "or re-download the zoo")
    ids = table["model_id"]
    unnamed, repeated = ids.index[ids.isna()], ids[ids.duplicated()]
    if len(unnamed) or len(repeated):
        what = (f"no model_id in row {unnamed[0]}" if len(unnamed) else
                f"the model_id {plain_text(str(repeated.iloc[0]))!r} on {int((ids == repeated.iloc[0]).sum())} rows")
        raise GenbenchError(f"{source} has {what}: each model needs its own id; rebuild or re-download the zoo")
    for col in FILE_COLUMNS:
        for v in table[col] if col in table else ():
            zoo_file(v, source=f"{source}, column {col!r}")
    for col in HASH_COLUMNS:
        for v in table[col] if col in table else ():
            if not (isinstance(v, str) and _SHA256.fullmatch(v)):
                raise GenbenchError(f"{source}, column {col!r}: {v!r} is not a sha256 (64 hex digits); rebuild or "
                                    "re-download the zoo")


class Zoo:
    """A population of trained models: `table` (one row per model), weights, and training data.

    A zoo downloaded from the Hub (`repo_id` set) records the commit it came from in `revision`; its
    table holds only the models whose two checkpoints were downloaded, the others are `missing_models`."""

    def __init__(self, root: str | Path, *, revision: str | None = None, repo_id: str | None = None):
        self.root = Path(root)
        self.revision, self.repo_id = revision, repo_id
        manifest_path = self.root / MANIFEST
        if not manifest_path.is_file():
            raise GenbenchError(f"{self.root} is not a zoo: it has no {MANIFEST}")
        self.manifest: dict[str, Any] = read_manifest(manifest_path)
        for key in ("name", "files", "grid", "dataset"):
            if key not in self.manifest:
                raise GenbenchError(f"{manifest_path} lacks the field {key!r}; rebuild or re-download the zoo")
        plain_name(self.manifest["name"], what="zoo name", source=f"{manifest_path}, field 'name'")
        if not isinstance(self.manifest["files"], dict):
            raise GenbenchError(f"{manifest_path}: field 'files' must map each file to its sha256; rebuild or "
                                "re-download the zoo")
        for rel in self.manifest["files"]:
            zoo_file(rel, source=f"{manifest_path}, field 'files'")
        table = read_table(self.root, self._refetch_hint())
        if table is None:
            raise GenbenchError(f"zoo {self.name!r} at {self.root} has no {TABLE} yet: no model is built; "
                                f"build it with `{build_command(self.name, self.root)}`")
        try:
            self._check_file(TABLE)
        except GenbenchError:
            if repo_id is None and (self.root / PENDING_TABLE).is_file():
                raise GenbenchError(f"zoo {self.name!r} at {self.root}: a build was interrupted while saving its "
                                    f"table; finish it with `{build_command(self.name, self.root)}`") from None
            raise
        _check_table(table, str(self.root / TABLE))
        self.missing_models: list[str] = []
        if repo_id is not None:
            present = [(self.root / a).is_file() and (self.root / b).is_file()
                       for a, b in zip(table["checkpoint"], table["init_checkpoint"])]
            keep = pd.Series(present, index=table.index, dtype=bool)
            self.missing_models = list(table.loc[~keep, "model_id"])
            table = table[keep].reset_index(drop=True)
        self.table: pd.DataFrame = table
        self._rows = {mid: i for i, mid in enumerate(table["model_id"])}

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def training(self) -> int:
        """Which training of its grid the zoo is (0: the recipe's own zoo; K >= 1: built with --training K)."""
        return manifest_training(self.manifest)[1]

    @property
    def version(self) -> int:
        return self.manifest.get("version", 1)

    @property
    def hparams(self) -> dict[str, list[Any]]:
        """The grid axes and their values (twins add `perturbation`)."""
        axes = dict(self.manifest["grid"])
        perturbations = [t["name"] for t in self.manifest.get("twins", [])]
        if perturbations:
            axes["perturbation"] = [None, *perturbations]
        return axes

    @property
    def model_ids(self) -> list[str]:
        return list(self.table["model_id"])

    @cached_property
    def table_sha256(self) -> str:
        """sha256 of the table's content without its timing column: what records and value tables cite,
        so that a rebuild reproducing every checkpoint and metric is recognised as the same zoo (the
        models.parquet file hash also covers the seconds each model took to train)."""
        t = self.table.drop(columns=[c for c in TIMING_COLUMNS if c in self.table]).sort_values("model_id")
        rows = t.astype(object).where(t.notna(), None).to_dict("records")
        text = json.dumps(rows, sort_keys=True, default=lambda v: v.item() if hasattr(v, "item") else str(v))
        return hashlib.sha256(text.encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        extra = f", revision={self.revision!r}, missing_models={len(self.missing_models)}" if self.repo_id else ""
        extra += "" if self.complete else f", expected_models={self.expected_models}"
        return f"Zoo(name={self.name!r}, models={len(self)}{extra}, root={str(self.root)!r})"

    # ------------------------------------------------------------ completeness

    @cached_property
    def expected_models(self) -> int:
        """How many models the zoo's recipe makes (grid points x (1 + twins), from zoo.json); an imported zoo, whose
        models need not fill a grid, says how many it holds (`expected_models`)."""
        declared = self.manifest.get("expected_models")
        if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 0:
            return declared
        grid, twins = self.manifest["grid"], self.manifest.get("twins") or []
        if not (isinstance(grid, dict) and all(isinstance(v, list) for v in grid.values())
                and isinstance(twins, list)):
            raise GenbenchError(f"{self.root / MANIFEST}: field 'grid' must map each axis to a list of values and "
                                "'twins' must be a list; rebuild or re-download the zoo")
        return expected_count(grid, twins)

    @property
    def missing_count(self) -> int:
        """Models of the recipe this copy lacks: not built yet, not downloaded, or never published."""
        return max(0, self.expected_models - len(self))

    @property
    def complete(self) -> bool:
        """Whether the zoo holds every model of its recipe; scores and records are comparable only then."""
        return self.missing_count == 0

    def completion_hint(self) -> str:
        """How to get the models this copy lacks: the command that builds or downloads them."""
        if self.repo_id is None:
            return f"finish it with `{build_command(self.name, self.root)}`"
        if self.missing_models:
            return (f"download the rest with `genbench zoo download {self.repo_id} --revision {self.revision}` "
                    "(without --models)")
        return (f"the copy on the Hub ({self.repo_id}) is partial itself: its publisher can finish it with "
                f"`genbench zoo build {self.name}` and push it again")

    def state(self) -> str:
        """'complete: all N models of the recipe', or 'partial: n of N models; <how to complete it>'."""
        if self.complete:
            return f"complete: all {len(self)} models of the recipe"
        return f"partial: {len(self)} of {self.expected_models} models; {self.completion_hint()}"

    def require_complete(self, *, allow_partial: bool = False, flag: str = "--allow-partial") -> None:
        """Refuse a partial zoo (scores on some of a zoo's models are not comparable with scores on all of them):
        a GenbenchError naming the missing count and the command that completes it, unless `allow_partial`."""
        if self.complete or allow_partial:
            return
        raise GenbenchError(f"zoo {self.name!r} is partial: {len(self)} of {self.expected_models} models, "
                            f"{self.missing_count} missing; {self.completion_hint()} (or pass {flag} to score it "
                            f"anyway: the scores then describe those {len(self)} models only, and a record of them is "
                            "marked partial and not ranked beside records on complete zoos)")

    def _refetch_hint(self) -> str:
        if self.repo_id:
            return (f"download it again with `genbench zoo download {self.repo_id} --revision {self.revision} "
                    "--force` (if that does not help, the copy on the Hub is damaged: tell its publisher)")
        return f"delete it and rebuild the zoo (`{build_command(self.name, self.root)}`), or download it again"

    def row(self, model_id: str) -> pd.Series:
        """The table row of one model."""
        if model_id not in self._rows:
            raise did_you_mean(model_id, self._rows, what=f"model id in zoo {self.name!r}:")
        return self.table.iloc[self._rows[model_id]]

    def _check_file(self, rel: str, expected: str | None = None) -> Path:
        path = self.root / rel
        expected = expected or self.manifest["files"].get(rel)
        if not path.is_file():
            hint = self._refetch_hint() if self.repo_id else "rebuild the zoo (`genbench zoo build`) or download it again"
            raise GenbenchError(f"zoo {self.name!r}: file {rel} is missing from {self.root}; {hint}")
        if expected is not None:
            actual = sha256_file(path)
            if actual != expected:
                raise GenbenchError(f"zoo {self.name!r}: file {rel} is corrupted: expected sha256 {expected}, "
                                    f"got {actual} (at {path}); {self._refetch_hint()}")
        return path

    def load_model(self, model_id: str, init: bool = False, device: str | torch.device = "cpu") -> nn.Module:
        """The model at its final (or initial) weights, in eval mode, its checkpoint verified."""
        row = self.row(model_id)
        rel, sha = (row["init_checkpoint"], row["init_sha256"]) if init else (row["checkpoint"], row["checkpoint_sha256"])
        path = self._check_file(rel, sha)
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("genbench", "{}"))
        family, arch = meta.get("family", row["family"]), meta.get("arch", json.loads(row["arch"]))
        model = build_model(family, arch)
        model.load_state_dict(load_file(str(path)))
        return model.to(resolve_device(device) if isinstance(device, str) or device is None else device).eval()

    @cached_property
    def pool(self) -> Pool:
        """The dataset the zoo was trained on: embedded in the zoo (dataset.safetensors, read only when the manifest's
        `files` lists it, and checked against its sha256), or re-loaded from its source. A dataset.safetensors the
        manifest does not list is ignored: it is no part of this zoo (e.g. left in a Hub repo by another zoo)."""
        spec = self.manifest["dataset"]
        if not self.has_training_data:
            raise GenbenchError(f"zoo {self.name!r} has no data: {self.no_data_reason}")
        if DATASET in self.manifest["files"]:
            t = load_file(str(self._check_file(DATASET)))
            return Pool(t["x_train"], t["y_train"], t["x_test"], t["y_test"],
                        int(self.manifest["num_classes"]), self.manifest["data_kind"])
        return load_pool(spec)

    @property
    def has_training_data(self) -> bool:
        """Whether the zoo holds its models' training data (an imported Small CNN Zoo does not)."""
        return self.manifest["dataset"].get("training_data") is not False

    @property
    def no_data_reason(self) -> str:
        """Why a zoo without training data has none, as its manifest says (for the errors and the card)."""
        return str(self.manifest["dataset"].get("why", "its source does not record it"))

    def train_data(self, model_id: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The exact inputs and labels (corrupted ones included) the model was trained on, un-augmented."""
        if not self.has_training_data:
            raise GenbenchError(f"zoo {self.name!r} has no training data: {self.no_data_reason}")
        row = self.row(model_id)
        idx, labels = train_subset(self.pool, train_size=int(row["hp.train_size"]),
                                   label_noise=float(row["hp.label_noise"]), data_seed=int(row["train_indices_seed"]))
        return self.pool.x_train[idx], labels

    def training_set(self, model_id: str) -> TrainingSet:
        """What a measure may see of one model's data: its exact training set, plus how its data kind is
        augmented; nothing else of the zoo."""
        x, y = self.train_data(model_id)
        train = {**TRAIN_DEFAULTS, **self.manifest.get("recipe_effective", {}).get("train", {})}
        kind = self.manifest.get("data_kind", "signal")
        aug = {"shift": int(train["aug_shift"])}
        if kind == "signal":
            aug["noise"] = float(train["aug_noise"])
        return TrainingSet(x=x, y=y, num_classes=int(self.manifest["num_classes"]), data_kind=kind, augmentation=aug)

    def select_models(self, models: str | Iterable[str] | None) -> list[str]:
        """Model ids of the zoo: all, those matching glob pattern(s), or the listed ids (checked)."""
        ids = self.model_ids
        if models is None:
            return ids
        patterns = string_list(models)
        if patterns is None:
            raise GenbenchError(f"models takes model ids or glob patterns (a string or a list of strings), got "
                                f"{models!r}")
        chosen: list[str] = []
        for pat in patterns:
            if any(ch in pat for ch in "*?["):
                hits = [i for i in ids if fnmatch.fnmatchcase(i, pat)]
                if not hits:
                    raise GenbenchError(f"no model of zoo {self.name!r} matches {pat!r}")
                chosen += hits
            elif pat in ids:
                chosen.append(pat)
            else:
                raise did_you_mean(pat, ids, what=f"model id in zoo {self.name!r}:")
        return list(dict.fromkeys(chosen))

    @property
    def ref(self) -> tuple[str, str | None, str | None, str | None]:
        """What another process needs to open the same zoo (`open_zoo_ref`): folder, Hub commit and repo, and
        the table's file hash (so a worker never reuses a zoo whose table has changed since)."""
        return str(Path(self.root).resolve()), self.revision, self.repo_id, self.manifest["files"].get(TABLE)

    def test_data(self, model_id: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The clean test set (for the harness only: it is never handed to a measure)."""
        self.row(model_id)
        return self.pool.x_test, self.pool.y_test

    def expected_files(self) -> dict[str, str]:
        """Every file the zoo records a sha256 of (the files zoo.json lists, both checkpoints of each model of its
        table), relative to its folder, with that sha256."""
        expected = dict(self.manifest["files"])
        for _, row in self.table.iterrows():
            expected[row["checkpoint"]] = row["checkpoint_sha256"]
            expected[row["init_checkpoint"]] = row["init_sha256"]
        return expected

    def verify(self) -> list[str]:
        """Re-hash every file; return one message per missing or corrupted file (empty: all good)."""
        problems = []
        for rel, sha in sorted(self.expected_files().items()):
            try:
                self._check_file(rel, sha)
            except GenbenchError as e:
                problems.append(str(e))
        return problems

    def stray_files(self) -> list[str]:
        """Files of the folder that are no part of the zoo: checkpoints/ files its table does not cite, and a
        dataset.safetensors zoo.json does not list (left by an interrupted build, copied in, or another zoo's)."""
        cited = set(self.expected_files())
        folder = self.root / "checkpoints"
        found = [p.relative_to(self.root).as_posix() for p in folder.rglob("*")
                 if p.is_file()] if folder.is_dir() else []
        found += [DATASET] if (self.root / DATASET).is_file() else []
        return sorted(set(found) - cited)


def local_zoos() -> list[str]:
    """Names of the zoos built under $GENBENCH_HOME/zoos."""
    d = zoos_dir()
    return sorted(p.name for p in d.iterdir() if (p / MANIFEST).is_file()) if d.is_dir() else []


def build_command(name: str, root: str | Path) -> str:
    """The command that builds (or finishes) the zoo `name` in the folder `root` (RECIPE-tK: with --training K)."""
    default = zoos_dir() / name
    out = "" if Path(root).resolve() == default.resolve() else f" --out {root}"
    return (build_command_of(name) or "genbench zoo build RECIPE.yaml") + out


@dataclass(frozen=True)
class FolderState:
    """What a zoo folder holds: `state` is 'complete', 'partial', 'empty' (no model yet) or 'broken' (unreadable);
    `models` and `expected` are the counts where known; `detail` says what to do about it."""

    name: str
    root: Path
    state: str
    models: int | None = None
    expected: int | None = None
    detail: str = ""


def folder_state(root: str | Path) -> FolderState:
    """The state of one zoo folder, never an exception: a broken folder is reported as such."""
    root = Path(root)
    try:
        zoo = Zoo(root)
        expected = zoo.expected_models
    except Exception as e:  # an unreadable table or manifest of any kind is the folder's state, not an error
        why = str(e) if isinstance(e, GenbenchError) else f"{type(e).__name__}: {e}"
        try:
            manifest = json.loads((root / MANIFEST).read_text())
            expected = expected_count(manifest["grid"], manifest.get("twins"))
            name = str(manifest["name"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return FolderState(root.name, root, "broken", detail=why)
        if not (root / TABLE).exists():
            return FolderState(root.name, root, "empty", 0, expected,
                               f"no model built yet; build it with `{build_command(name, root)}`")
        return FolderState(root.name, root, "broken", None, expected, why)
    if zoo.complete:
        return FolderState(root.name, root, "complete", len(zoo), expected)
    return FolderState(root.name, root, "partial", len(zoo), expected, zoo.completion_hint())


def local_zoo_states() -> list[FolderState]:
    """The state of every folder under $GENBENCH_HOME/zoos (partial and broken ones included), by folder name."""
    d = zoos_dir()
    if not d.is_dir():
        return []
    return [folder_state(p) for p in sorted(d.iterdir()) if p.is_dir() and not p.name.startswith(".")]


def load_zoo(name_or_path: str | Path, revision: str | None = None, *,
             models: str | list[str] | None = None) -> Zoo:
    """Open a zoo by folder path, by name among the zoos built locally, or from the Hub as `hf://ORG/NAME`
    (at `revision`, default main; only the `models` matching these ids or glob patterns, default all)."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise GenbenchError(f"load_zoo takes a zoo's name, its folder or hf://ORG/NAME, got {name_or_path!r}")
    s = str(name_or_path)
    if s.startswith("hf://"):
        from .hub import download_zoo
        return download_zoo(s, revision=revision, models=models)
    if revision is not None or models is not None:
        raise GenbenchError(f"revision= and models= apply to zoos on the Hub (hf://ORG/NAME), not to {s!r}")
    p = Path(name_or_path).expanduser()
    named = zoos_dir() / s
    as_name = _reads_as_name(s) and (named / MANIFEST).is_file()  # a path (./x, ~/x, a/b) is never a name
    if (p / MANIFEST).is_file():
        if as_name and named.resolve() != p.resolve():
            raise GenbenchError(f"{s!r} is both a zoo built here ({named}) and a zoo folder in the current folder "
                                f"({p.resolve()}): write ./{s} for the folder, or run from elsewhere for the zoo")
        return Zoo(p)
    if as_name:
        return Zoo(named)
    not_a_zoo = _not_a_zoo(s, p)
    if not_a_zoo:
        raise GenbenchError(not_a_zoo)
    unbuilt = not_built(s)
    if unbuilt:  # a known zoo is never "unknown"
        raise GenbenchError(unbuilt)
    hint = (f"For a zoo on the Hugging Face Hub write hf://{s}." if s.count("/") == 1 and not p.exists()
            else "`genbench zoo list` shows the local zoos and the recipes.")
    raise did_you_mean(s, local_zoos() + list_recipes(), what="zoo", hint=hint)


def _reads_as_name(s: str) -> bool:
    """Whether `s` reads as a zoo's name (no path separator, not starting with '.' or '~') rather than a path."""
    return "/" not in s and os.sep not in s and not s.startswith((".", "~"))


def _not_a_zoo(s: str, p: Path) -> str | None:
    """Why a path that names no zoo folder is none (a file, a folder without zoo.json, no such folder); None when
    `s` reads as a zoo's name (no path separator, not starting with '.' or '~') rather than a path."""
    if _reads_as_name(s):
        return None
    if p.is_file():
        if p.name == MANIFEST:
            return f"{s} is a zoo's {MANIFEST}, not the zoo: pass its folder, {p.parent}"
        return (f"{s} is a file, not a zoo: pass a zoo's folder (one holding {MANIFEST}) or a zoo's name; "
                "`genbench zoo list` shows them")
    if p.is_dir():
        inside = sorted(d.name for d in p.iterdir() if (d / MANIFEST).is_file())
        return (f"{s} is a folder without {MANIFEST}, so it is no zoo"
                + (f"; it holds the zoos {inside[:5]}: pass one of them, e.g. {p / inside[0]}" if inside else
                   ": pass a zoo's folder (one `genbench zoo build` made) or a zoo's name; `genbench zoo list` "
                   "shows them"))
    if s.count("/") == 1 and not s.startswith((".", "~", "/")):
        return None  # ORG/NAME: the Hub hint below
    return f"there is no folder {s}: pass a zoo's folder or a zoo's name; `genbench zoo list` shows them"


@lru_cache(maxsize=4)
def open_zoo_ref(root: str, revision: str | None, repo_id: str | None, table_sha256: str | None) -> Zoo:
    """The zoo of a `Zoo.ref` inside a worker, opened once per process: the same folder (a shared filesystem),
    or for a Hub zoo whose folder this node lacks, the same commit downloaded here."""
    if repo_id is not None and not Path(root).is_dir():
        from .hub import download_zoo
        return download_zoo(repo_id, revision=revision)
    return Zoo(root, revision=revision, repo_id=repo_id)
