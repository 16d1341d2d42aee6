"""The conformance suite a measure must pass (like scikit-learn's estimator checks): it runs, is
deterministic under a seed, finite, of a stable shape, within budget, and keeps its declared invariances.
Test data is not this suite's business: a measure's context holds no test split, and a submitted measure runs
in the sandbox (genbench/entries/submit/sandbox.py), where the test split and the table of gaps are not there to read
(tests/test_sandbox.py plants measures that try)."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..defaults import CHECK_ZOO, SEED
from ..device import resolve_device
from ..errors import GenbenchError, check_seconds
from ..measures.registry import Measure, resolve_measures
from ..zoo import build_zoo, load_zoo, local_zoos
from .evaluate import evaluate_group, shape_key
from .executor import Executor

RESCALE_ALPHA = 3.0
RTOL_DETERMINISM = 1e-6
RTOL_INVARIANCE = 1e-3
RTOL_BATCHED = 1e-5


@dataclass
class CheckResult:
    """One check: its name, whether it passed, and what was seen."""

    name: str
    passed: bool
    message: str = ""


@dataclass
class CheckReport:
    """All checks of one measure; `passed` only when every check passed."""

    measure: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def __bool__(self) -> bool:  # `if check_measure(...):` means it passed
        return self.passed

    def add(self, name: str, passed: bool, message: str = "") -> None:
        self.results.append(CheckResult(name, bool(passed), message))

    def __str__(self) -> str:
        lines = [f"{self.measure}: {'PASSED' if self.passed else 'FAILED'}"]
        lines += [f"  [{'ok' if r.passed else 'FAIL'}] {r.name}" + (f": {r.message}" if r.message else "")
                  for r in self.results]
        return "\n".join(lines)


def _close(a: Any, b: Any, rtol: float) -> bool:
    return a is not None and b is not None and np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12)


def check_measure(measure: str | Measure | Callable[..., Any], zoo: Any = None, *, models: int = 2, seed: int = SEED,
                  budget_s: float = 60.0, device: str | None = None, executor: Executor | None = None) -> CheckReport:
    """Run the conformance suite for one registered measure on `models` (a count, at least 2) models of a small zoo,
    of as many different architectures as it has (a value's shape must not depend on one), each call made by
    `executor` (default: here)."""
    found = resolve_measures(measure)
    if len(found) != 1:
        raise GenbenchError(f"check_measure checks one measure; {measure!r} names {len(found)}: "
                            f"{', '.join(m.name for m in found[:10])}")
    m = found[0]
    if isinstance(models, bool) or not isinstance(models, int) or models < 2:
        raise GenbenchError(f"models is how many models the suite runs on, an integer of at least 2, got {models!r}")
    check_seconds("budget_s", budget_s)
    if zoo is None:
        zoo = load_zoo(CHECK_ZOO) if CHECK_ZOO in local_zoos() else build_zoo(CHECK_ZOO, progress=False)
    elif not hasattr(zoo, "model_ids"):
        zoo = load_zoo(zoo)
    device = resolve_device(device)
    ids = varied_ids(zoo, models)
    if len(ids) < 2:
        raise GenbenchError(f"the conformance suite needs a zoo with at least 2 models; {zoo.name!r} has {len(ids)}")
    report = CheckReport(m.name)
    run = executor or Executor()

    def call(mid: str, alpha: float | None = None) -> dict[str, Any]:
        return run.run(zoo, mid, [m], device=device, seed=seed, budget_s=budget_s, alpha=alpha)[m.name]

    runs = [call(mid) for mid in ids]
    again = call(ids[0])
    errors = [f"{mid}: {r['error']}" for mid, r in zip(ids, runs) if r["error"]]
    report.add("runs, finite, right kind of output", not errors, "; ".join(errors))
    if errors:
        return report
    report.add("deterministic under a fixed seed", _close(runs[0]["value"], again["value"], RTOL_DETERMINISM),
               "" if _close(runs[0]["value"], again["value"], RTOL_DETERMINISM)
               else f"{runs[0]['value']} then {again['value']}")
    shapes = {np.asarray(r["value"]).shape for r in runs}
    report.add("stable shape across models", len(shapes) == 1, f"shapes {sorted(shapes)}")
    slowest = max(r["seconds"] for r in runs)
    report.add("within budget", slowest <= budget_s, f"slowest model {slowest:.2f} s of {budget_s:g} s")
    if m.batched is not None:
        stacked = stackable_ids(zoo, len(ids))
        per_model = {mid: r for mid, r in zip(ids, runs)}
        report.add(*batched_agrees(m, zoo, stacked, [per_model.get(mid) or call(mid) for mid in stacked],
                                   device=device, seed=seed, budget_s=budget_s))
    if "relu_rescale" in m.invariances:
        scaled = call(ids[0], RESCALE_ALPHA)
        ok = scaled["error"] is None and _close(runs[0]["value"], scaled["value"], RTOL_INVARIANCE)
        report.add(f"invariant to rescaling a ReLU layer pair by {RESCALE_ALPHA:g} and 1/{RESCALE_ALPHA:g}", ok,
                   "" if ok else f"{runs[0]['value']} became {scaled['value'] if scaled['error'] is None else scaled['error']}")
    return report


def varied_ids(zoo: Any, n: int) -> list[str]:
    """`n` models of the zoo as unlike each other as its architectures allow: the first model, then each time the
    one whose architecture differs from the chosen ones' in the most settings (the first such in table order). Two
    seeds of one network would never show a value whose shape depends on the width or the batchnorm."""
    ids = [str(i) for i in zoo.table["model_id"]]
    if "arch" not in zoo.table.columns:
        return ids[:n]
    archs = []
    for text in zoo.table["arch"].astype(str):
        try:
            a = json.loads(text)
        except ValueError:
            a = {"arch": text}
        archs.append({k: json.dumps(v, sort_keys=True) for k, v in a.items()} if isinstance(a, dict) else {"": text})
    chosen = [0]
    while len(chosen) < min(n, len(ids)):
        left = [i for i in range(len(ids)) if i not in chosen]
        far = [sum(min(archs[i].get(k) != archs[c].get(k) for c in chosen) for k in archs[i]) for i in left]
        chosen.append(left[far.index(max(far))])
    return [ids[i] for i in chosen]


def stackable_ids(zoo: Any, n: int, scan: int = 16) -> list[str]:
    """At least 2 (and up to n) models of one shape among the zoo's first `scan`, for the batched check; [] if none."""
    by_shape: dict[Any, list[str]] = {}
    for mid in zoo.model_ids[:scan]:
        by_shape.setdefault(shape_key(zoo.load_model(mid)), []).append(mid)
    group = next((g for g in by_shape.values() if len(g) >= 2), [])
    return group[:max(2, n)]


def batched_agrees(m: Measure, zoo: Any, ids: list[str], runs: list[dict[str, Any]], *, device: str, seed: int,
                   budget_s: float) -> tuple[str, bool, str]:
    """The check that a measure's batched implementation, run on the models of `ids` (of one shape) as one stack,
    gives each model the value of its per-model call (`runs`), within RTOL_BATCHED."""
    name = f"batched implementation gives the per-model values (rtol {RTOL_BATCHED:g})"
    if not ids:
        return name, False, f"no two of the first models of {zoo.name!r} have one shape: nothing could be stacked"
    entries = evaluate_group(zoo, {mid: [m] for mid in ids}, device=device, seed=seed, budget_s=budget_s)
    bad = [f"{mid}: {r['value']} per model, {entries[mid][m.name]['value']} batched "
           f"({entries[mid][m.name]['error'] or 'no error'})"
           for mid, r in zip(ids, runs) if not _close(r["value"], entries[mid][m.name]["value"], RTOL_BATCHED)]
    return name, not bad, "; ".join(bad) or f"{len(ids)} models stacked"
