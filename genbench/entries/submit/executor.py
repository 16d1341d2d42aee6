"""The sandbox executor: the harness's measure calls (the conformance suite, `evaluate`, the audit's rescaling
control) made by the sandboxed worker, one at a time as the harness asks, and each raw outcome turned into the
entry the harness would have made itself (the same validation, the same wording of every failure)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...defaults import training_of
from ...harness.evaluate import load_for_call, no_training_data, validate_value
from ...harness.executor import Entries, Executor
from ...measures.registry import Measure
from ...zoo.storage import Zoo
from .job import JobFolder
from .supervise import BUDGET_FIX, Worker


def entry_of(m: Measure, out: dict[str, Any], budget_s: float | None) -> dict[str, Any]:
    """The harness's entry (value, error, seconds, cache) for one raw outcome of the worker."""
    seconds = float(out["seconds"])
    if "raised" in out:
        return {"value": None, "error": f"{out['raised'][0]}: {out['raised'][1]}", "seconds": seconds, "cache": True}
    if "budget" in out:
        return {"value": None, "error": f"over budget: {out['budget']}", "seconds": seconds, "cache": False}
    if "invalid" in out:  # the worker's validate_value refused the value as returned (a string, None, ...)
        return {"value": None, "error": out["invalid"], "seconds": seconds, "cache": True}
    value, error = validate_value(m, np.asarray(out["value"], dtype=np.float64).reshape(out["shape"]))
    if error is None and budget_s is not None and seconds > budget_s:
        return {"value": None, "error": f"over budget: took {seconds:.1f} s, budget {budget_s:g} s: {BUDGET_FIX}",
                "seconds": seconds, "cache": False}
    return {"value": value, "error": error, "seconds": seconds, "cache": True}


class SandboxExecutor(Executor):
    """Calls of the submitted measure `m` answered by `worker`, the models exported into `job` as they are asked
    for. `phase` (set by the caller: 'check' or 'score') names each call's stage for the user and the failure
    reasons; scoring a zoo's values moves it to the audit, whose single calls are its rescaling control."""

    name = "sandbox"

    def __init__(self, worker: Worker, job: JobFolder, m: Measure, *, check_models: int):
        self.worker, self.job, self.m, self.check_models = worker, job, m, check_models
        self.phase = "check"
        self.grid: str | None = None  # the grid scored: its other trainings are scored too, before the audit

    def _stage(self, zoo: Zoo, single: bool) -> str:
        if self.phase == "check":
            what = f"running the conformance suite on {self.check_models} models"
        elif self.phase == "score":
            what = f"evaluating {self.m.name} on {len(zoo)} models"
        elif single:
            what = "running the fragility audit's rescaling control"
        else:
            what = f"evaluating {self.m.name} for the fragility audit ({len(zoo)} models)"
        return f"{what} on {zoo.name}"

    def run(self, zoo: Zoo, model_id: str, measures: list[Measure], *, device: str, seed: int,
            budget_s: float | None, alpha: float | None = None, single: bool = True) -> Entries:
        (m,) = measures
        if (why := no_training_data(m, zoo)) is not None:  # as the harness refuses it
            return {m.name: {"value": None, "error": why, "seconds": 0.0, "cache": False}}
        problem = load_for_call(zoo, model_id, alpha=alpha)  # what the harness says of a model it cannot load
        where = None if problem else self.job.model(zoo, model_id)
        if problem or where is None:
            error = problem or f"could not export model {model_id!r} for the sandbox"
            return {m.name: {"value": None, "error": error, "seconds": 0.0, "cache": False}}
        out = self.worker.call({"model": where, "alpha": alpha, "budget_s": budget_s, "seed": seed},
                               budget_s=budget_s, stage=self._stage(zoo, single))
        return {m.name: entry_of(m, out, budget_s)}

    def evaluate(self, zoo: Zoo, ids: list[str], measures: list[Measure], cache: Any, *, device: str, seed: int,
                 budget_s: float | None, progress: bool = True):
        if self.phase == "audit" and training_of(zoo.name)[0] == self.grid:
            self.phase = "score"  # another training of the grid scored (entries/trainings.py), not the audit yet
        for mid in ids:
            yield mid, self.run(zoo, mid, measures, device=device, seed=seed, budget_s=budget_s, single=False), \
                [m.name for m in measures]
        if self.phase == "score":
            self.phase, self.grid = "audit", training_of(zoo.name)[0]


def standin_measure(name: str, meta: dict[str, Any], source_hash: str) -> Measure:
    """The submitted measure as the parent's harness sees it: the metadata it declared in the worker and the
    parent's hash of measure.py; its function never runs here (the sandbox executor makes every call)."""
    def in_the_sandbox(ctx: Any) -> Any:
        raise RuntimeError(f"{name} runs only in the sandbox: pass its SandboxExecutor to the harness")

    in_the_sandbox.__doc__ = meta["doc"]
    return Measure(name=name, fn=in_the_sandbox, kind=meta["kind"], needs=tuple(meta["needs"]),
                   citation=meta["citation"], version=meta["version"], higher_means=meta["higher_means"],
                   invariances=tuple(meta["invariances"]), transform=meta["transform"], doc=meta["doc"],
                   source_hash=source_hash)
