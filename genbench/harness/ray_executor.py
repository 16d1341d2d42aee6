"""The Ray executor: the per-model tasks of `evaluate` (and the per-group tasks of `build_zoo`) as Ray remote
functions, one GPU each on cuda, every task's failure kept to its own models. Ray is imported lazily."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..errors import GenbenchError
from ..measures.registry import Measure
from ..zoo.storage import TABLE, Zoo
from .cache import ValueCache

INSTALL_HINT = "the Ray executor needs Ray: install it with `pip install 'genbench[ray]'` (or `pip install ray`)"


def import_ray() -> Any:
    """The ray module, or a GenbenchError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise GenbenchError(INSTALL_HINT) from None
    return ray


def connect(address: str | None = None) -> Any:
    """Ray, initialised: the running session if any, else the cluster at `address` (or $RAY_ADDRESS, or a
    new local instance)."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except Exception as e:  # unreachable cluster, bad address: one readable line
            where = f"the Ray cluster at {address!r}" if address else "Ray"
            raise GenbenchError(f"could not start or connect to {where}: {type(e).__name__}: {e}. Start a cluster "
                                "with `ray start --head` and pass its address, or leave --address out to run a "
                                "local Ray instance") from e
    return ray


def worker_device(device: str) -> str:
    """The device inside a task: Ray hands each GPU task its own device as cuda:0."""
    return "cuda" if device.startswith("cuda") else device


@contextmanager
def measures_by_value(measures: Sequence[Measure]) -> Iterator[None]:
    """Ship measures defined outside genbench (a test file, a notebook, a submission) by value: Ray's
    cloudpickle would otherwise name their module, which the workers may not be able to import."""
    ray = import_ray()
    modules = {m.fn.__module__ for m in measures} - {"__main__"}
    already = set(ray.cloudpickle.list_registry_pickle_by_value())
    modules = {name for name in modules if not name.startswith("genbench.") and name in sys.modules} - already
    for name in modules:
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])
    try:
        yield
    finally:
        for name in modules:
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[name])


def task_threads(ray: Any) -> int:
    """Torch threads (and Ray CPUs) per task: this process's count, so that reductions split the same way
    and values match the local executor bit for bit, but never more than the largest node has."""
    node_cpus = [n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive", True)]
    return max(1, min(torch.get_num_threads(), int(max(node_cpus, default=1))))


def _with_threads(fn: Callable[..., Any], threads: int, *args: Any) -> Any:
    """Run fn(*args) in a worker with `threads` torch threads (Ray starts workers with one)."""
    torch.set_num_threads(threads)
    return fn(*args)


def submit(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *, device: str, address: str | None,
           shared: Sequence[Any] = ()) -> dict[Any, int]:
    """Start fn(*shared, *call) for every call as a Ray task (one GPU each on cuda, no retries: a crash is
    reported, not repeated); `shared` objects go to the object store once. Returns {task ref: call index}."""
    ray = connect(address)
    threads = task_threads(ray)
    remote = ray.remote(_with_threads).options(num_cpus=threads, num_gpus=1 if device.startswith("cuda") else 0,
                                               max_retries=0)
    refs_shared = [ray.put(obj) for obj in shared]
    return {remote.remote(fn, threads, *refs_shared, *call): i for i, call in enumerate(calls)}


def as_completed(pending: dict[Any, int], *, desc: str, unit: str, progress: bool) -> Iterator[tuple[int, Any]]:
    """(call index, result or the task's exception) as tasks finish, with a progress bar."""
    ray = import_ray()
    with tqdm(total=len(pending), desc=desc, unit=unit, disable=not progress) as bar:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as e:  # the task raised, or its worker died: that task's failure only
                result = e
            bar.update(1)
            yield i, result


def task_error(e: BaseException) -> str:
    """One line for a failed task: the exception type and the last line of its message."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"Ray task failed: {type(e).__name__}: {lines[-1] if lines else ''}"


def zoo_ref(zoo: Zoo) -> tuple[str, str | None, str | None, str | None]:
    """What a worker needs to open the same zoo: folder, Hub commit and repo, and the table's hash (so a
    worker never reuses a zoo whose table has changed since)."""
    return str(Path(zoo.root).resolve()), zoo.revision, zoo.repo_id, zoo.manifest["files"].get(TABLE)


@lru_cache(maxsize=4)
def open_zoo(root: str, revision: str | None, repo_id: str | None, table_sha256: str | None) -> Zoo:
    """The zoo inside a worker, opened once per process: the same folder (a shared filesystem), or for a
    Hub zoo whose folder this node lacks, the same commit downloaded here."""
    if repo_id is not None and not Path(root).is_dir():
        from ..hub import download_zoo
        return download_zoo(repo_id, revision=revision)
    return Zoo(root, revision=revision, repo_id=repo_id)


def _evaluate_task(measures: list[Measure], ref: tuple[str, str | None, str | None, str | None], model_id: str,
                   cache_root: str | None, device: str, seed: int,
                   budget_s: float | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """One model on a Ray worker: exactly the local executor's per-model task."""
    from .evaluate import evaluate_cached

    zoo = open_zoo(*ref)
    return evaluate_cached(zoo, model_id, measures, ValueCache(cache_root), device=worker_device(device), seed=seed,
                           budget_s=budget_s)


def evaluate_on_ray(zoo: Zoo, ids: list[str], measures: list[Measure], cache: ValueCache, *, device: str, seed: int,
                    budget_s: float | None, address: str | None = None,
                    progress: bool = True) -> Iterator[tuple[str, dict[str, dict[str, Any]], list[str]]]:
    """(model id, entries, names computed now) per model, as the Ray tasks finish; a failed task gives
    each of its measures an error entry for that model."""
    cache_root = None if cache.root is None else str(Path(cache.root).resolve())
    calls = [(zoo_ref(zoo), mid, cache_root, device, seed, budget_s) for mid in ids]
    with measures_by_value(measures):
        pending = submit(_evaluate_task, calls, device=device, address=address, shared=[measures])
    for i, result in as_completed(pending, desc=f"evaluate {zoo.name} (ray)", unit="model", progress=progress):
        if isinstance(result, BaseException):
            yield ids[i], {m.name: {"value": None, "error": task_error(result), "seconds": 0.0} for m in measures}, []
        else:
            yield ids[i], *result


def _build_task(pool: Any, root: str, group: list[Any], device: str, dataset_name: str,
                done: set[str]) -> list[dict[str, Any]]:
    """One stackable group trained and written on a Ray worker: exactly the local executor's unit of work."""
    from ..zoo.build import build_group

    return build_group(Path(root), group, pool, worker_device(device), dataset_name, done)


def build_on_ray(root: Path, groups: list[list[Any]], pool: Any, device: str, dataset_name: str, done: set[str], *,
                 address: str | None = None, desc: str = "building", progress: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Each group's table rows as its Ray task finishes; failed groups are reported together at the end
    (the others are kept, so a re-run trains only what failed)."""
    calls = [(str(Path(root).resolve()), g, device, dataset_name, done & {s.model_id for s in g}) for g in groups]
    pending = submit(_build_task, calls, device=device, address=address, shared=[pool])
    failures = []
    for i, result in as_completed(pending, desc=f"{desc} (ray)", unit="group", progress=progress):
        if isinstance(result, BaseException):
            failures.append(f"group of {groups[i][0].model_id} ({len(groups[i])} models): {task_error(result)}")
        else:
            yield result
    if failures:
        raise GenbenchError(f"{len(failures)} of {len(groups)} training task(s) failed; the other models are "
                            "saved, so running the build again retries only these:\n" + "\n".join(failures))
