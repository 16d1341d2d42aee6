"""Where the harness's measure calls run: the conformance suite, `evaluate` and the audit's rescaling control ask an
executor for the outcome of each call on demand, one model (optionally rescaled around a ReLU) at a time. The
local executor runs them in this process, the Ray executor as tasks on a cluster, and `genbench submit`'s sandbox
executor (genbench/entries/submit/executor.py) in the sandboxed worker; the harness validates every outcome."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tqdm.auto import tqdm

from ..errors import GenbenchError, did_you_mean
from ..measures.registry import Measure
from ..zoo.storage import Zoo
from .cache import ValueCache
from .evaluate import evaluate_cached, evaluate_chunk_cached, evaluate_group, evaluate_on_ray, evaluate_one

EXECUTORS = ("local", "ray")
Entries = dict[str, dict[str, Any]]  # measure name -> {"value", "error", "seconds", "cache"}
GROUP_MODELS = 32  # consecutive models loaded together, so that batched measures stack those of one shape


class Executor:
    """The local executor: every call in this process; `evaluate` loads GROUP_MODELS consecutive models at a time
    and runs the batched implementation of a measure that has one on those of one shape (batch=False: one model
    at a time, each measure's per-model path only, as a subclass that runs calls elsewhere does)."""

    name = "local"
    batch = True

    def __init__(self, batch: bool = True):
        self.batch = batch

    def run(self, zoo: Zoo, model_id: str, measures: list[Measure], *, device: str, seed: int,
            budget_s: float | None, alpha: float | None = None) -> Entries:
        """The entries of `measures` on one model (rescaled by `alpha` around a ReLU when given)."""
        return evaluate_one(zoo, model_id, measures, device=device, seed=seed, budget_s=budget_s, alpha=alpha)

    def evaluate(self, zoo: Zoo, ids: list[str], measures: list[Measure], cache: ValueCache, *, device: str,
                 seed: int, budget_s: float | None, progress: bool = True
                 ) -> Iterator[tuple[str, Entries, list[str]]]:
        """(model id, entries, the names computed now) per model: cached entries read, the others run."""
        # leave=None: the bar stays on screen unless it runs inside another's (leaderboard run's over its entries)
        bar = tqdm(total=len(ids), desc=f"evaluate {zoo.name}", unit="model", disable=not progress, leave=None)
        grouped = self.batch and type(self).run is Executor.run and any(m.batched for m in measures)
        with bar:
            if not grouped:
                for mid in ids:
                    yield mid, *evaluate_cached(zoo, mid, measures, cache, device=device, seed=seed,
                                                budget_s=budget_s, run=self.run)
                    bar.update()
                return
            def compute(todo: dict[str, list[Measure]]) -> dict[str, Entries]:
                return evaluate_group(zoo, todo, device=device, seed=seed, budget_s=budget_s)

            for a in range(0, len(ids), GROUP_MODELS):
                for row in evaluate_chunk_cached(zoo, ids[a:a + GROUP_MODELS], measures, cache, compute, seed=seed):
                    yield row
                    bar.update()


class RayExecutor(Executor):
    """The per-model tasks of `evaluate` as Ray tasks on the cluster at `address` (default: a running one, else a
    local one); single calls run here."""

    name = "ray"

    def __init__(self, address: str | None = None):
        super().__init__(batch=False)
        self.address = address

    def evaluate(self, zoo: Zoo, ids: list[str], measures: list[Measure], cache: ValueCache, *, device: str,
                 seed: int, budget_s: float | None, progress: bool = True
                 ) -> Iterator[tuple[str, Entries, list[str]]]:
        return evaluate_on_ray(zoo, ids, measures, cache, device=device, seed=seed, budget_s=budget_s,
                               address=self.address, progress=progress)


def resolve_executor(executor: str | Executor | None, address: str | None = None) -> Executor:
    """An executor from its name ('local', 'ray') or itself; `address` only with Ray."""
    if isinstance(executor, Executor):
        if address is not None:
            raise GenbenchError("address= is the Ray cluster's address; pass executor='ray' with it")
        return executor
    executor = executor or "local"
    if executor not in EXECUTORS:
        raise did_you_mean(executor, EXECUTORS, what="executor")
    if address is not None and executor != "ray":
        raise GenbenchError(f"address= is the Ray cluster's address; pass executor='ray' with it (got {executor!r})")
    return RayExecutor(address) if executor == "ray" else Executor()
