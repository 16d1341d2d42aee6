"""Records made: run_entry() evaluates, scores and audits one measure on a zoo into its record (scores with
intervals, audit verdicts, per-model values, provenance); run_baselines() makes the baseline rows' records;
failure_record() says why an entry could not be scored. The record's fields are written by genbench.record."""
from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..defaults import AUTO_AUDIT, BUDGET_S, N_BOOT, SEED
from ..errors import GenbenchError, check_n_boot
from ..measures import Measure, get_measure, list_measures
from ..numerics import pinned_threads
from ..record import (audit_options, baseline_record, command_line, failed_record, provenance, read_record,
                      scored_record, values_block, write_record)
from ..scoring.spec import MeasureScores
from ..zoo.roles import audit_zoo_of, resolve_audit_zoo
from ..zoo.storage import Zoo, load_zoo
from .trainings import default_trainings, provisional_note, trainings_block, training_zoos

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["failure_record", "read_record", "run_baselines", "run_entry", "write_record"]
MAX_FAILED_SHARE = 0.05  # an entry whose measure fails on more of a zoo's models gets a failure record
NO_AUDIT = "no fragility audit on"  # how a scores note says that the audit could not run


def failure_record(name: str, measure: str, zoo: str | Zoo, reason: str, *, submission: dict | None = None,
                   command: str = "", device: str = "cpu", seconds: float = 0.0) -> dict[str, Any]:
    """A record saying that an entry could not be scored on a zoo, and why."""
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    try:
        m: Measure | None = get_measure(measure)
    except GenbenchError:
        m = None
    return failed_record(name, m, measure, zoo, reason, submission=submission,
                         prov=provenance(m, device=device, seconds=seconds, command=command))


def _values(values: pd.DataFrame, m: Measure, zoo: Zoo, s: MeasureScores) -> dict[str, Any]:
    """Per-model values: the measure (scalar or signature rows), its failure, the gap and the held-out predictions."""
    from ..scoring.scores import measure_matrix
    ids = values["model_id"].astype(str).tolist()
    x = measure_matrix(values, m.name)
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float)
    err = values.get(f"{m.name}:error")
    return values_block(ids, gap.tolist(), (x[:, 0] if m.kind == "scalar" else x).tolist(),
                        None if err is None else [None if e is None or e != e else str(e) for e in err], s.heldout)


@pinned_threads()
def run_entry(measure: str, zoo: str | Zoo, *, name: str | None = None, submission: dict | None = None,
              audit_zoo: str | None = AUTO_AUDIT, device: str | None = None, budget_s: float | None = BUDGET_S,
              n_boot: int = N_BOOT, seed: int = SEED, command: str = "", progress: bool = False,
              cache: bool = True, allow_partial: bool = False, executor: Any = "local",
              trainings: int | None = None) -> dict[str, Any]:
    """Evaluate, score and audit one registered measure on a zoo; return its result record. A partial zoo is
    refused before anything runs, unless `allow_partial` (then the record's zoo block says it is partial).
    `executor` makes the measure calls (harness/executor.py; a submission's: its sandbox). `trainings`: on how many
    trainings of the zoo's grid it is scored (None: entries/trainings.default_trainings; more than one: the record
    holds each training's scores, their combination and the verdicts over them)."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    from ..scoring import audit, score
    from ..scoring.scores import measure_matrix
    check_n_boot("n_boot", n_boot)  # before the evaluation, not after it
    m = get_measure(measure)
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    audit_zoo = resolve_audit_zoo(audit_zoo, zoo)  # AUTO_AUDIT: the audit zoo of the zoo's family (one rule)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    zoos = training_zoos(zoo, default_trainings(zoo) if trainings is None else trainings)
    device = resolve_device(device)
    name = name or m.name
    command = command or command_line(f"genbench leaderboard run {m.name} --zoo {zoo.name}",
                                      *audit_options(audit_zoo, audit_zoo_of(zoo)), ("--n-boot", n_boot, N_BOOT),
                                      ("--allow-partial", not zoo.complete, False),
                                      ("--trainings", len(zoos), 1))
    start = time.perf_counter()
    per: list[MeasureScores] = []
    per_values: list[Any] = []
    for z in zoos:
        v = evaluate([m], z, device=device, seed=seed, budget_s=budget_s, progress=progress, cache=cache,
                     executor=executor)
        v = v.sort_values("model_id", kind="stable").reset_index(drop=True)
        ok = np.isfinite(measure_matrix(v, m.name)).all(1)
        if (~ok).mean() > MAX_FAILED_SHARE:
            errors = v.get(f"{m.name}:error")
            first = next((e for e in errors if isinstance(e, str)), "no value") if errors is not None else "no value"
            how_many = "every model" if not ok.any() else f"{int((~ok).sum())} of {len(ok)} models"
            where = "" if z is zoo else f" of {z.name}"
            return failure_record(name, m.name, zoo, f"the measure failed on {how_many}{where} (scores on the rest "
                                  f"would not be comparable; at most {MAX_FAILED_SHARE:.0%} may fail); first error: "
                                  f"{first}", submission=submission, command=command, device=device,
                                  seconds=time.perf_counter() - start)
        per.append(score(v, z, measures=[m.name], n_boot=n_boot, seed=seed, allow_partial=allow_partial,
                         resample_table=None if z is zoo else zoo.table_sha256)[m.name])
        per_values.append(_values(v, m, z, per[-1])["value"])
        if z is zoo:
            values = v
    s = per[0]
    block, verdicts = trainings_block(zoos, per, seed=seed, n_boot=n_boot, values=per_values)
    report, audit_note = None, None
    if audit_zoo:
        try:
            report = audit(m, audit_zoo, device=device, seed=seed, n_boot=n_boot, progress=progress,
                           cache=cache, executor=executor).to_dict()
        except GenbenchError as e:
            audit_note = f"{NO_AUDIT} {audit_zoo}: {e}"
    scores = s.to_dict()
    scores.pop("predictions", None)
    scores["verdicts"] = verdicts
    late = provisional_note(zoo.name, len(zoos), command=command)
    scores["notes"] = scores.get("notes", []) + [n for n in (audit_note, late) if n]
    # the audit zoo as requested, so that verify repeats the same attempt
    prov = provenance(m, device=device, seconds=time.perf_counter() - start, command=command, seed=seed,
                      n_boot=n_boot, audit_zoo=audit_zoo)
    rec = scored_record(name, m, zoo, scores=scores, audit=report, values=_values(values, m, zoo, s), prov=prov,
                        submission=submission)
    if len(zoos) > 1:
        rec["trainings"] = block
    return rec


def builtin_scalars() -> list[str]:
    """The built-in scalar measures (the catalogue shipped in genbench.measures, not plug-ins or submissions)."""
    return [n for n in list_measures() if get_measure(n).kind == "scalar"
            and get_measure(n).fn.__module__.startswith("genbench.measures.")]


def baselines_source_hash() -> str:
    """sha256 of the modules that define the baselines (a record cites it, as a measure's record cites its own)."""
    from ..scoring import baselines, weight_stats
    return hashlib.sha256("".join(inspect.getsource(m) for m in (baselines, weight_stats)).encode()).hexdigest()


@pinned_threads()
def run_baselines(zoo: str | Zoo, *, only: Iterable[str] | None = None, device: str | None = None,
                  budget_s: float | None = BUDGET_S, n_boot: int = N_BOOT, seed: int = SEED, command: str = "",
                  progress: bool = False, cache: bool = True, allow_partial: bool = False,
                  trainings: int | None = None) -> list[dict[str, Any]]:
    """The records of the baseline rows on a zoo (every baseline, or those named in `only`): the zoo's
    hyperparameters, every built-in scalar measure at once (evaluated first, from the value cache when it has
    them), statistics of the final weights (read from the zoo's checkpoints), the final training loss and accuracy.
    A baseline that cannot be made gets a failure record. `trainings`: as run_entry's."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    from ..scoring.baselines import BASELINE_NAMES, BASELINES, score_baselines
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    zoos = training_zoos(zoo, default_trainings(zoo) if trainings is None else trainings)
    wanted = tuple(only or BASELINE_NAMES)
    unknown = [b for b in wanted if b not in BASELINE_NAMES]
    if unknown:
        raise GenbenchError(f"unknown baseline(s) {unknown}; the baselines are {list(BASELINE_NAMES)}")
    device = resolve_device(device)
    start = time.perf_counter()
    inputs = builtin_scalars() if "baseline.all_measures" in wanted else []
    per = []
    for z in zoos:
        values = None if not inputs else evaluate(inputs, z, device=device, seed=seed, budget_s=budget_s,
                                                  progress=progress, cache=cache)
        per.append(score_baselines(z, values, measures=inputs, seed=seed, n_boot=n_boot, only=wanted,
                                   resample_table=None if z is zoo else zoo.table_sha256))
    scores, notes = per[0]
    seconds = time.perf_counter() - start
    ids = sorted(zoo.table["model_id"].astype(str))
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float).tolist()
    citation = {b.name: b.citation for b in BASELINES}
    source_hash = baselines_source_hash()
    out = []
    for name in wanted:
        cmd = command or command_line(f"genbench leaderboard baselines --zoo {zoo.name}", ("--n-boot", n_boot, N_BOOT),
                                      ("--allow-partial", not zoo.complete, False),
                                      ("--trainings", len(zoos), 1))
        prov = provenance(None, device=device, seconds=seconds, command=cmd, measure_source_hash=source_hash,
                          seed=seed, n_boot=n_boot, audit_zoo=None,
                          inputs=inputs if name == "baseline.all_measures" else None)
        s = scores.items.get(name)
        if s is None:
            reason = next((n for n in notes if name in n), f"{name} could not be made")
            out.append(baseline_record(name, citation[name], zoo, scores=None, failure=reason, values=None,
                                       prov=prov))
            continue
        d = s.to_dict()
        late = provisional_note(zoo.name, len(zoos), command=f"genbench leaderboard baselines --zoo {zoo.name}")
        d["notes"] = d.get("notes", []) + ([late] if late else [])
        rec = baseline_record(name, citation[name], zoo, scores=d, failure=None,
                              values=values_block(ids, gap, None, None, s.heldout), prov=prov)
        every = [p[0].items.get(name) for p in per]
        if len(zoos) > 1 and all(e is not None for e in every):
            rec["trainings"] = trainings_block(zoos, every, seed=seed, n_boot=n_boot)[0]
        out.append(rec)
    return out
