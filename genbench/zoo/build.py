"""`build_zoo`: expand a recipe, skip the models already built, train the rest in stacked groups,
and write each group's checkpoints, rows and manifest atomically (so a killed build resumes)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import remote
from ..device import resolve_device
from ..errors import GenbenchError, check_count, did_you_mean
from ..fileio import write_json_atomic, write_text_atomic
from ..numerics import PINNED, cpu_numerics, pinned_threads
from ..paths import check_writable, plain_name, zoos_dir
from ..version import __version__
from .card import dataset_card
from .data import EMBEDDED, Pool, load_pool, train_subset
from .recipe import ModelSpec, Recipe, check_training, load_recipe
from .storage import (DATASET, MANIFEST, TABLE, Zoo, commit_table, read_manifest, read_table, recover_table,
                      save_checkpoint)
from .train import Trained, evaluate_model, full_arch, group_key, init_model, train_group

MAX_GROUP = 64


def recipe_fingerprint(recipe: Recipe) -> str:
    """Hash of everything in a recipe that changes the models (not its name or description)."""
    keys = ("seed", "dataset", "family", "arch", "grid", "train", "twins") + (("training",) if recipe.training else ())
    blob = json.dumps({k: getattr(recipe, k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def plan_groups(specs: list[ModelSpec], max_group: int = MAX_GROUP) -> list[list[ModelSpec]]:
    """Partition models into stackable groups of at most `max_group`, in recipe order."""
    by_key: dict[str, list[ModelSpec]] = {}
    for s in specs:
        by_key.setdefault(group_key(s), []).append(s)
    groups = []
    for members in by_key.values():
        n_chunks = -(-len(members) // max_group)
        size = -(-len(members) // n_chunks)
        groups += [members[i:i + size] for i in range(0, len(members), size)]
    return groups


def build_zoo(recipe: str | Path | Recipe, out: str | Path | None = None, *, limit: int | None = None,
              device: str | None = None, overrides: dict[str, Any] | None = None, progress: bool = True,
              max_group: int = MAX_GROUP, executor: str = "local", address: str | None = None,
              training: int = 0) -> Zoo:
    """Build (or finish building) the zoo of `recipe` in `out` (default $GENBENCH_HOME/zoos/NAME); `training=K`
    (K >= 1) builds training K of its grid, the zoo NAME-tK: the same models and data, other training noise.

    `executor="ray"` trains the groups as Ray tasks (cluster at `address`; `out` on a shared filesystem)."""
    if not isinstance(recipe, (str, os.PathLike, Recipe)):
        raise GenbenchError(f"build_zoo takes a recipe's name, the path of its YAML file or a Recipe, got {recipe!r}")
    if executor not in ("local", "ray"):
        raise did_you_mean(executor, ("local", "ray"), what="executor")
    if address is not None and executor != "ray":
        raise GenbenchError(f"address= is the Ray cluster's address; pass executor='ray' with it (got {executor!r})")
    if limit is not None:
        check_count("limit (--limit)", limit)  # before the zoo's folder is made
    where = "given as a Recipe" if isinstance(recipe, Recipe) else str(recipe)
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe, overrides)
    elif overrides:
        raise GenbenchError("pass overrides with a recipe name or path, not with a parsed Recipe")
    if check_training(training):
        recipe = recipe.with_training(training)
    device = resolve_device(device)
    with pinned_threads():  # reductions split by thread count: a fixed count reproduces
        return _build(recipe, where, out, limit=limit, device=device, progress=progress, max_group=max_group,
                      executor=executor, address=address)


def _build(recipe: Recipe, where: str, out: str | Path | None, *, limit: int | None, device: str, progress: bool,
           max_group: int, executor: str, address: str | None) -> Zoo:
    source = f"recipe {where}"
    plain_name(recipe.name, what="zoo name", source=f"{source}, field 'name'")  # it names the folder and the records
    specs = recipe.expand()
    for spec in specs:  # a model id names its checkpoint files
        plain_name(spec.model_id, what="model id", source=f"{source} (made from its grid values and twin names)")
    root = Path(out) if out is not None else zoos_dir() / recipe.name
    check_writable(root)  # a file there, or a folder that takes none: one line, before any training
    root.mkdir(parents=True, exist_ok=True)
    fingerprint = recipe_fingerprint(recipe)
    manifest = _existing_manifest(root, fingerprint)
    recover_table(root, manifest)  # a table commit a crash interrupted: finished, or undone
    plan = plan_groups(specs, max_group)  # on the whole recipe: a group's members share its dropout stream
    order = {s.model_id: k for k, s in enumerate(s for g in plan for s in g)}
    wanted = {s.model_id for s in (specs if limit is None else specs[:limit])}
    specs = [s for s in specs if s.model_id in wanted]
    table = read_table(root)
    built = set() if table is None else set(table["model_id"])
    # a group is committed whole, so a group only partly built was cut short by --limit: its models are trained
    # again with the whole group once this build wants all of it
    redo = {s.model_id for g in plan if all(s.model_id in wanted for s in g)
            and 0 < sum(s.model_id in built for s in g) < len(g) for s in g} & built
    todo = [[s for s in g if s.model_id in wanted] for g in plan]
    todo = [g for g in todo if any(s.model_id not in built - redo for s in g)]
    pool = load_pool(recipe.dataset)
    if manifest is None:
        manifest = _new_manifest(recipe, fingerprint, pool, device)
        if recipe.dataset["name"] in EMBEDDED:
            manifest["files"][DATASET] = save_checkpoint(root / DATASET, pool.tensors(), {"dataset": recipe.dataset["name"]})
        write_json_atomic(root / MANIFEST, manifest)
    if redo:  # out of the table before their checkpoints are written again: a crash leaves them missing, not stale
        table = table[~table["model_id"].isin(redo)].reset_index(drop=True)
        manifest["updated"] = _now()
        if len(table):
            commit_table(root, table, manifest)
        else:  # no model left: the folder as a fresh build has it (an empty table would change the columns' types)
            (root / TABLE).unlink(missing_ok=True)
            manifest["files"].pop(TABLE, None)
            write_json_atomic(root / MANIFEST, manifest)
            table = None
    done = built - redo
    dataset_name = str(recipe.dataset.get("path", recipe.dataset["name"]))
    desc = f"building {recipe.name} ({len(specs) - len(done & {s.model_id for s in specs})} models to train on {device})"
    if executor == "ray":
        finished = build_on_ray(root, todo, pool, device, dataset_name, done, address=address, desc=desc,
                                progress=progress)
    else:
        finished = _build_local(root, todo, pool, device, dataset_name, done, desc=desc, progress=progress)
    for rows in finished:
        new = pd.DataFrame(rows) if table is None else pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
        # the rows in plan order, as an uninterrupted local build writes them (Ray tasks finish in any order)
        table = new.sort_values("model_id", key=lambda ids: ids.map(order), kind="stable", ignore_index=True)
        manifest["updated"] = _now()
        commit_table(root, table, manifest)  # table and manifest: a crash at any point leaves a zoo to resume
        done |= {r["model_id"] for r in rows}
    zoo = Zoo(root)
    write_text_atomic(root / "README.md", dataset_card(zoo))
    return zoo


def build_group(root: Path, group: list[ModelSpec], pool: Pool, device: str, dataset_name: str, done: set[str],
                tick=None) -> list[dict[str, Any]]:
    """Train one stackable group and write its new models' checkpoints; return their table rows.
    This is the unit of work of every executor."""
    trained = _train(group, pool, device, tick or (lambda active: None))
    return [_write_model(root, t, pool, device, dataset_name) for t in trained if t.spec.model_id not in done]


def _build_task(pool: Any, root: str, group: list[Any], device: str, dataset_name: str,
                done: set[str]) -> list[dict[str, Any]]:
    """One stackable group trained and written on a Ray worker: exactly the local executor's unit of work."""
    return build_group(Path(root), group, pool, remote.worker_device(device), dataset_name, done)


def build_on_ray(root: Path, groups: list[list[Any]], pool: Any, device: str, dataset_name: str, done: set[str], *,
                 address: str | None = None, desc: str = "building", progress: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Each group's table rows as its Ray task finishes; failed groups are reported together at the end
    (the others are kept, so a re-run trains only what failed)."""
    calls = [(str(Path(root).resolve()), g, device, dataset_name, done & {s.model_id for s in g}) for g in groups]
    pending = remote.submit(_build_task, calls, device=device, address=address, shared=[pool])
    failures = []
    for i, result in remote.as_completed(pending, desc=f"{desc} (ray)", unit="group", progress=progress):
        if isinstance(result, BaseException):
            failures.append(f"group of {groups[i][0].model_id} ({len(groups[i])} models): {remote.task_error(result)}")
        else:
            yield result
    if failures:
        raise GenbenchError(f"{len(failures)} of {len(groups)} training task(s) failed; the other models are "
                            "saved, so running the build again retries only these:\n" + "\n".join(failures))


def _build_local(root: Path, todo: list[list[ModelSpec]], pool: Pool, device: str, dataset_name: str,
                 done: set[str], *, desc: str, progress: bool):
    """The groups trained one after the other in this process; yields each group's rows."""
    total = sum(len(g) * int(g[0].train["epochs"]) for g in todo)
    with tqdm(total=total, desc=desc, unit="model-epoch", disable=not progress) as bar:
        for group in todo:
            ran = [0]

            def tick(active: int, group=group, ran=ran) -> None:
                ran[0] += 1
                bar.update(len(group))

            rows = build_group(root, group, pool, device, dataset_name, done, tick)
            bar.update(len(group) * (int(group[0].train["epochs"]) - ran[0]))  # epochs saved by early stopping
            yield rows


def _train(group: list[ModelSpec], pool: Pool, device: str, tick) -> list[Trained]:
    flush = torch.set_flush_denormal(True)  # denormal gradients late in training stall the CPU
    try:
        return train_group(group, pool, device, on_epoch=tick)
    finally:
        if flush:
            torch.set_flush_denormal(False)


def _existing_manifest(root: Path, fingerprint: str) -> dict[str, Any] | None:
    path = root / MANIFEST
    if not path.exists():
        return None
    manifest = read_manifest(path)
    if manifest.get("recipe_fingerprint") != fingerprint:
        raise GenbenchError(f"{root} holds a zoo built from a different recipe (or different overrides); "
                            "build into another folder with --out, or delete that folder to start over")
    before = manifest.get("numerics")
    now = cpu_numerics()
    changed = [k for k in (*PINNED, "threads") if before is not None and before.get(k) != now.get(k)]
    if changed:
        settings = ", ".join(f"{k}={before.get(k)}" for k in changed)
        raise GenbenchError(f"{root} was started under other CPU numerics settings ({settings}; now "
                            f"{', '.join(f'{k}={now.get(k)}' for k in changed)}): its models would not be "
                            "reproducible together. Resume under the recorded settings, or build into another folder")
    return manifest


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _new_manifest(recipe: Recipe, fingerprint: str, pool: Pool, device: str) -> dict[str, Any]:
    return {
        "format_version": 1, "name": recipe.name, "version": recipe.version, "description": recipe.description,
        "recipe": recipe.text, "recipe_fingerprint": fingerprint,
        "recipe_effective": {k: getattr(recipe, k) for k in ("seed", "dataset", "family", "arch", "train", "twins")},
        "dataset": recipe.dataset, "num_classes": pool.num_classes, "data_kind": pool.kind,
        "in_shape": pool.in_shape, "train_pool_size": len(pool.y_train), "test_size": len(pool.y_test),
        "grid": recipe.grid, "twins": recipe.twins, "genbench_version": __version__,
        "torch_version": torch.__version__, "device": device, "numerics": cpu_numerics(), "created": _now(),
        "files": {},
    } | ({"training": recipe.training, "training_of": recipe.grid_name} if recipe.training else {})


def _write_model(root: Path, t: Trained, pool: Pool, device: str, dataset_name: str) -> dict[str, Any]:
    """Save one trained model's checkpoints and measure its metrics with the one-model code path."""
    spec = t.spec
    arch = full_arch(spec, pool)
    meta = {"family": spec.family, "arch": arch, "model_id": spec.model_id,
            "genbench_version": __version__}
    ckpt, init_ckpt = f"checkpoints/{spec.model_id}.safetensors", f"checkpoints/{spec.model_id}.init.safetensors"
    sha = save_checkpoint(root / ckpt, t.state, meta)
    init_sha = save_checkpoint(root / init_ckpt, t.init_state, meta)
    model = init_model(spec, pool)
    model.load_state_dict(t.state)
    model.to(device)
    idx, labels = train_subset(pool, train_size=spec.train["train_size"], label_noise=spec.train["label_noise"],
                               data_seed=spec.data_seed)
    train_acc, train_loss = evaluate_model(model, pool.x_train[idx], labels)
    test_acc, test_loss = evaluate_model(model, pool.x_test, pool.y_test)
    hp = {f"hp.{k}": v for k, v in spec.hp.items()}
    hp["hp.train_size"] = len(idx)
    return {
        "model_id": spec.model_id, **hp, "family": spec.family, "arch": json.dumps(arch),
        "dataset": dataset_name, "train_indices_seed": spec.data_seed,
        "init_seed": spec.init_seed, "run_seed": spec.run_seed,
        "train_acc": train_acc, "test_acc": test_acc, "train_loss": train_loss, "test_loss": test_loss,
        "gap": train_acc - test_acc, "epochs": t.epochs, "steps": t.steps, "converged": t.converged,
        "twin_of": spec.twin_of, "perturbation": spec.perturbation,
        "checkpoint": ckpt, "checkpoint_sha256": sha, "init_checkpoint": init_ckpt, "init_sha256": init_sha,
        "train_seconds": t.seconds,
    }

