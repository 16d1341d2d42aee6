"""Result records made: run_entry() evaluates, scores and audits one measure on a zoo into a record (scores
with intervals, audit verdicts, per-model values, provenance); failure_record() says why an entry could not be
scored. The format itself, and reading and writing records, live in schema.py."""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..defaults import AUDIT_ZOO, BUDGET_S, DEFAULT_ZOO, N_BOOT, SEED
from ..errors import GenbenchError
from ..fileio import json_safe
from ..measures import Measure, get_measure
from ..numerics import pinned_threads
from ..scoring.demogen import demogen_tables
from ..scoring.scores import Scores
from ..scoring.spec import MeasureScores
from ..version import __version__
from ..zoo.storage import Zoo, load_zoo
from .schema import SCHEMA, Record, read_record, write_record

if TYPE_CHECKING:
    import pandas as pd

# read_record and write_record are schema.py's; they are named here too for the callers that make records
__all__ = ["ablation_tables", "failure_record", "git_commit", "read_record", "run_entry", "write_record"]
MAX_FAILED_SHARE = 0.05  # an entry whose measure fails on more of a zoo's models gets a failure record


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The commit of the genbench checkout (None outside a git work tree)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _zoo_info(zoo: Zoo) -> dict[str, Any]:
    """The record's zoo block; on a partial zoo only, also `complete: false` and the counts (so that records on
    complete zoos read exactly as before)."""
    info = {"name": zoo.name, "version": zoo.version, "table_sha256": zoo.table_sha256,
            "revision": getattr(zoo, "revision", None)}
    if getattr(zoo, "repo_id", None):  # a Hub zoo: where `genbench verify` downloads it again
        info["repo"] = zoo.repo_id
    if not zoo.complete:
        info.update(complete=False, models=len(zoo), expected_models=zoo.expected_models)
    return info


def _provenance(m: Measure | None, *, device: str, seconds: float, command: str) -> dict[str, Any]:
    import torch
    return {"genbench_version": __version__, "git_commit": git_commit(),
            "measure_version": m.version if m else None, "measure_source_hash": m.source_hash if m else None,
            "device": device, "seconds": round(seconds, 3),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command,
            "python": platform.python_version(), "torch": torch.__version__}


def _base(name: str, m: Measure | None, measure: str, zoo: Zoo, submission: dict | None) -> dict[str, Any]:
    return {"schema": SCHEMA, "name": name, "measure": measure, "kind": m.kind if m else None,
            "citation": m.citation if m else None, "higher_means": m.higher_means if m else None,
            "builtin": submission is None, "submission": submission, "zoo": _zoo_info(zoo)}


def failure_record(name: str, measure: str, zoo: str | Zoo, reason: str, *, submission: dict | None = None,
                   command: str = "", device: str = "cpu", seconds: float = 0.0) -> dict[str, Any]:
    """A record saying that an entry could not be scored on a zoo, and why."""
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    try:
        m: Measure | None = get_measure(measure)
    except GenbenchError:
        m = None
    rec = _base(name, m, measure, zoo, submission)
    rec.update(status="failed", failure=reason, scores=None, audit=None, values=None,
               provenance=_provenance(m, device=device, seconds=seconds, command=command))
    return json_safe(rec)


def _heldout(s: MeasureScores) -> dict[str, Any]:
    """The held-out predictions of every shuffle ([R][n], None where a model has no value) and shuffle 0's."""
    if s.heldout is None:
        return {"prediction": None, "heldout": None}
    rows = [[v if np.isfinite(v) else None for v in row.tolist()] for row in np.asarray(s.heldout, float)]
    return {"prediction": rows[0], "heldout": rows}


def _values_block(values: pd.DataFrame, m: Measure, zoo: Zoo, s: MeasureScores) -> dict[str, Any]:
    """Per-model values: the measure (scalar or signature rows), its failure, the gap and the held-out predictions."""
    from ..scoring.scores import measure_matrix
    ids = values["model_id"].astype(str).tolist()
    x = measure_matrix(values, m.name)
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float)
    err = values.get(f"{m.name}:error")
    return {"model_id": ids, "gap": gap.tolist(),
            "value": (x[:, 0] if m.kind == "scalar" else x).tolist(),
            "error": None if err is None else [None if e is None or e != e else str(e) for e in err],
            **_heldout(s)}


@pinned_threads()
def run_entry(measure: str, zoo: str | Zoo, *, name: str | None = None, submission: dict | None = None,
              audit_zoo: str | None = AUDIT_ZOO, device: str | None = None, budget_s: float | None = BUDGET_S,
              n_boot: int = N_BOOT, seed: int = SEED, command: str = "", progress: bool = False,
              cache: bool = True, allow_partial: bool = False) -> dict[str, Any]:
    """Evaluate, score and audit one registered measure on a zoo; return its result record. A partial zoo is
    refused before anything runs, unless `allow_partial` (then the record's zoo block says it is partial)."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    from ..scoring import audit, score
    from ..scoring.scores import measure_matrix
    m = get_measure(measure)
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    device = resolve_device(device)
    name = name or m.name
    command = command or (f"genbench leaderboard run {m.name} --zoo {zoo.name}"
                          + ("" if zoo.complete else " --allow-partial"))
    start = time.perf_counter()
    values = evaluate([m], zoo, device=device, seed=seed, budget_s=budget_s, progress=progress, cache=cache)
    values = values.sort_values("model_id", kind="stable").reset_index(drop=True)
    s = score(values, zoo, measures=[m.name], n_boot=n_boot, seed=seed, allow_partial=allow_partial)[m.name]
    ok = np.isfinite(measure_matrix(values, m.name)).all(1)
    if (~ok).mean() > MAX_FAILED_SHARE:
        errors = values.get(f"{m.name}:error")
        first = next((e for e in errors if isinstance(e, str)), "no value") if errors is not None else "no value"
        how_many = "every model" if not ok.any() else f"{int((~ok).sum())} of {len(ok)} models"
        return failure_record(name, m.name, zoo, f"the measure failed on {how_many} (scores on the rest would not "
                              f"be comparable; at most {MAX_FAILED_SHARE:.0%} may fail); first error: {first}",
                              submission=submission, command=command, device=device,
                              seconds=time.perf_counter() - start)
    report, audit_note = None, None
    if audit_zoo:
        try:
            report = audit(m, audit_zoo, device=device, seed=seed, n_boot=n_boot, progress=progress,
                           cache=cache).to_dict()
        except GenbenchError as e:
            audit_note = f"no fragility audit on {audit_zoo}: {e}"
    rec = _base(name, m, m.name, zoo, submission)
    scores = s.to_dict()
    scores.pop("predictions", None)
    if audit_note:
        scores["notes"] = scores.get("notes", []) + [audit_note]
    rec.update(status="ok", failure=None, scores=scores, audit=report,
               values=_values_block(values, m, zoo, s),
               provenance=_provenance(m, device=device, seconds=time.perf_counter() - start, command=command))
    rec["provenance"]["seed"], rec["provenance"]["n_boot"] = seed, n_boot
    rec["provenance"]["audit_zoo"] = audit_zoo  # as requested, so verify repeats the same attempt
    return json_safe(rec)


def builtin_scalars() -> list[str]:
    """The built-in scalar measures (the catalogue shipped in genbench.measures, not plug-ins or submissions)."""
    from ..measures import list_measures
    return [n for n in list_measures() if get_measure(n).kind == "scalar"
            and get_measure(n).fn.__module__.startswith("genbench.measures.")]


def baselines_source_hash() -> str:
    """sha256 of the module that defines the baselines (a record cites it, as a measure's record cites its own)."""
    import hashlib
    import inspect

    from ..scoring import baselines
    return hashlib.sha256(inspect.getsource(baselines).encode()).hexdigest()


@pinned_threads()
def run_baselines(zoo: str | Zoo, *, only: Iterable[str] | None = None, device: str | None = None,
                  budget_s: float | None = BUDGET_S, n_boot: int = N_BOOT, seed: int = SEED, command: str = "",
                  progress: bool = False, cache: bool = True, allow_partial: bool = False) -> list[dict[str, Any]]:
    """The records of the baseline rows on a zoo (every baseline, or those named in `only`): the zoo's
    hyperparameters, every built-in scalar measure at once (evaluated first, from the value cache when it has
    them), the final training loss and accuracy. A baseline that cannot be made gets a failure record."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    from ..scoring.baselines import BASELINE_NAMES, BASELINES, score_baselines
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    wanted = tuple(only or BASELINE_NAMES)
    unknown = [b for b in wanted if b not in BASELINE_NAMES]
    if unknown:
        raise GenbenchError(f"unknown baseline(s) {unknown}; the baselines are {list(BASELINE_NAMES)}")
    device = resolve_device(device)
    start = time.perf_counter()
    values, inputs = None, []
    if "baseline.all_measures" in wanted:
        inputs = builtin_scalars()
        values = evaluate(inputs, zoo, device=device, seed=seed, budget_s=budget_s, progress=progress, cache=cache)
    scores, notes = score_baselines(zoo, values, measures=inputs, seed=seed, n_boot=n_boot, only=wanted)
    seconds = time.perf_counter() - start
    ids = sorted(zoo.table["model_id"].astype(str))
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float).tolist()
    citation = {b.name: b.citation for b in BASELINES}
    out = []
    for name in wanted:
        cmd = command or f"genbench leaderboard baselines --zoo {zoo.name}"
        rec = {"schema": SCHEMA, "name": name, "measure": name, "kind": "baseline", "citation": citation[name],
               "higher_means": None, "builtin": True, "baseline": True, "submission": None, "zoo": _zoo_info(zoo)}
        prov = _provenance(None, device=device, seconds=seconds, command=cmd)
        prov.update(measure_source_hash=baselines_source_hash(), seed=seed, n_boot=n_boot, audit_zoo=None,
                    inputs=inputs if name == "baseline.all_measures" else None)
        if name not in scores.items:
            reason = next((n for n in notes if name in n), f"{name} could not be made")
            rec.update(status="failed", failure=reason, scores=None, audit=None, values=None, provenance=prov)
        else:
            s = scores.items[name]
            rec.update(status="ok", failure=None, scores=s.to_dict(), audit=None,
                       values={"model_id": ids, "gap": gap, "value": None, "error": None, **_heldout(s)},
                       provenance=prov)
        out.append(json_safe(rec))
    return out


def ablation_tables(records: Iterable[Mapping[str, Any]], zoo: str = DEFAULT_ZOO
                    ) -> dict[str, pd.DataFrame] | None:
    """The DEMOGEN Tables 1 and 4 from the built-in records of `zoo`, when they hold every margin entry."""
    ok = [r for r in map(Record.of, records) if r.zoo_name == zoo and r.ok and r.builtin]
    return demogen_tables(Scores(zoo, "gap", {r.measure: r.measure_scores() for r in ok}))
