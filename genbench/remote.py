"""Ray plumbing shared by the executors of `build_zoo` and `evaluate`: connect, start tasks (one GPU each on
cuda), collect them as they finish, each failure kept to its own task. Ray is imported lazily; the tasks
themselves live next to the code they run (zoo/build.py, harness/evaluate.py)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from .errors import GenbenchError

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
    with tqdm(total=len(pending), desc=desc, unit=unit, disable=not progress, leave=None) as bar:  # as evaluate's
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
