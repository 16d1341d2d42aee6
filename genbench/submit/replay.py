"""The sandbox's values, replayed to the parent's own harness.

The parent runs the genuine conformance suite, evaluation, scoring and audit (check_measure, run_entry) with a
stand-in for the submitted measure: a `Measure` with the metadata the measure declared whose function never runs
submitted code. Called on a model, it looks up the outcome the sandboxed worker sent for a model with exactly
these weights (the parent loads and rescales every model itself; calls on the same weights are answered in the
order the worker made them) and reproduces it: the value as returned (which the harness then validates: finite,
of the right shape), the exception raised, or an over-budget error."""
from __future__ import annotations

import collections
import hashlib
from typing import Any

import numpy as np
import torch

from ..harness.evaluate import _validate
from ..measures.context import BudgetExceeded
from ..measures.registry import Measure
from ..measures.weights import rescale_relu_pair
from .job import Task


class SandboxError(Exception):
    """No outcome from the sandbox for a call the parent's harness made."""


_CLASSES: dict[tuple[str, bool], type] = {}


def _named(name: str, exception: bool) -> type:
    """A class called `name`: an exception type (to re-raise as the worker saw it) or a plain type (a value that
    is not a number), so that the harness words the failure exactly as it would have in the worker."""
    key = (name, exception)
    if key not in _CLASSES:
        _CLASSES[key] = type(name, (Exception,) if exception else (), {"__module__": "sandbox"})
    return _CLASSES[key]


def fingerprint(model: torch.nn.Module) -> str:
    """sha256 of a model's state (names, dtypes, shapes and bytes of every parameter and buffer)."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Replay:
    """The worker's outcomes by the weights they were computed on, each key's in the worker's order."""

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks
        self.queues: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.added = 0

    def _key(self, task: Task) -> str | None:
        """The fingerprint of the weights the task's call sees, loaded and rescaled here as the harness does."""
        try:
            model = task.zoo.load_model(task.model_id, device="cpu")
        except Exception:  # the harness reports the model as not loadable
            return None
        if task.alpha is not None:
            try:
                model = rescale_relu_pair(model, task.alpha)
            except ValueError:
                return None
        return fingerprint(model)

    def sync(self, results: list[dict[str, Any]]) -> None:
        """Take in the results not seen yet (`results` may grow meanwhile: the worker's channel is read beside)."""
        new = list(results[self.added:len(self.tasks)])
        for task, outcome in zip(self.tasks[self.added:], new):
            if not outcome.get("skipped"):
                key = self._key(task)
                if key is not None:
                    self.queues[key].append(outcome)
        self.added += len(new)

    def take(self, model: torch.nn.Module) -> dict[str, Any]:
        """The next outcome for these weights (the last one again once they are used up)."""
        q = self.queues.get(fingerprint(model))
        if not q:
            raise SandboxError("no value was computed in the sandbox for this model")
        return q.popleft() if len(q) > 1 else q[0]

    def measure(self, name: str, meta: dict[str, Any], source_hash: str) -> Measure:
        """The stand-in measure: the declared metadata, the parent's hash of measure.py, and a function that
        replays the worker's outcomes."""
        m: list[Measure] = []

        def replayed(ctx: Any) -> Any:
            out = self.take(ctx.model)
            if "raised" in out:
                raise _named(out["raised"][0], True)(out["raised"][1])
            if "budget" in out:
                raise BudgetExceeded(out["budget"])
            if "nonnumeric" in out:
                return _named(out["nonnumeric"], False)()
            arr = np.asarray(out["value"], dtype=np.float64).reshape(out["shape"])
            if ctx.budget_s is not None and out["seconds"] > ctx.budget_s and _validate(m[0], arr)[1] is None:
                raise BudgetExceeded(f"took {out['seconds']:.1f} s, budget {ctx.budget_s:g} s")
            return arr

        replayed.__doc__ = meta["doc"]
        m.append(Measure(name=name, fn=replayed, kind=meta["kind"], needs=tuple(meta["needs"]),
                         citation=meta["citation"], version=meta["version"], higher_means=meta["higher_means"],
                         invariances=tuple(meta["invariances"]), transform=meta["transform"], doc=meta["doc"],
                         source_hash=source_hash))
        return m[0]
