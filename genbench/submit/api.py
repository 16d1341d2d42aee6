"""`submit()`: check a submission and its settings, run its entry in the worker, and write one record per zoo,
turning every way the submitted code can go wrong (crash, hang, memory, NaN, test-data reads) into a failure
record; `summarize()`: a record's headline numbers."""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..defaults import AUDIT_ZOO, BUDGET_S, N_BOOT
from ..device import resolve_device
from ..errors import GenbenchError
from ..leaderboard.records import failure_record
from ..leaderboard.schema import HEADLINE, Record, write_record
from ..measures import list_measures
from ..zoo.storage import Zoo, load_zoo
from .metadata import SUBMISSION_FILE, Submission, load_submission
from .supervise import run_worker

CHECK_MODELS = 2  # models the conformance suite runs on, in the worker
STARTUP_S = 600.0  # the overall limit's allowance for starting the worker and loading its zoos


def submit_command(sub: Submission, zoo: str, *, partial: bool = False) -> str:
    """The command that (re)produces the record of `sub` on `zoo` (a partial zoo: with --allow-partial), as stored
    in its provenance."""
    folder = sub.fields()["path"]
    return f"genbench submit {folder} --zoo {zoo}" + (" --allow-partial" if partial else "")


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object written by the worker, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _matches(rec: dict[str, Any], sub: Submission, zoo: Zoo) -> bool:
    """Whether a record from the worker is the one asked for: this entry, this zoo, this zoo's table (its fields
    as the worker wrote them: a missing status is no 'ok')."""
    r = Record(rec)
    return (r.written_name == sub.name and r.measure == sub.entry and r.written_status in ("ok", "failed")
            and r.written_zoo_name == zoo.name and r.table_sha256 == zoo.table_sha256)


def _default_timeout(zoos: list[Zoo], audit_zoo: str | None, budget_s: float | None) -> float:
    """A generous overall limit: start-up, then every model's budget twice over (checks and audit included)."""
    n = sum(len(z) for z in zoos) + CHECK_MODELS + 1
    if audit_zoo:
        try:
            n += 2 * len(load_zoo(audit_zoo))
        except GenbenchError:
            pass
    return STARTUP_S + 2.0 * (budget_s if budget_s is not None else BUDGET_S) * n


def submit(path: str | Path, zoos: list[str] | None = None, *, results_root: str | Path | None = None,
           budget_s: float | None = BUDGET_S, memory_gb: float = 4, timeout_s: float | None = None,
           audit_zoo: str | None = AUDIT_ZOO, device: str | None = None, n_boot: int = N_BOOT,
           echo: Callable[[str, str], None] | None = None, allow_partial: bool = False) -> list[Path]:
    """Validate a submission folder, run its entry in a child process on each zoo, and write one result
    record per zoo (ok, or failed with the reason) into `results_root` (default: the user's results folder,
    $GENBENCH_HOME/results, never the repository's); return the record paths. `echo(text, kind)` receives
    progress ("stage") and the child's own output ("output"). A partial zoo is refused before the child starts,
    unless `allow_partial` (then its record is marked partial and not ranked)."""
    echo = echo or (lambda text, kind: None)
    sub = load_submission(path)
    zoo_names = list(dict.fromkeys(zoos)) if zoos else list(sub.zoos)
    loaded = [load_zoo(z) for z in zoo_names]  # an unknown or unbuilt zoo is refused before anything runs
    for z in loaded:
        z.require_complete(allow_partial=allow_partial)  # so is a partial one, unless allowed
    if sub.entry in list_measures():
        raise GenbenchError(f"{sub.folder / SUBMISSION_FILE}: field 'entry': {sub.entry!r} is already a registered "
                            "(built-in or installed) measure; give the submitted measure a name of its own")
    if memory_gb is None or not memory_gb > 0:
        raise GenbenchError(f"the memory cap must be a positive number of GB, got {memory_gb!r}")
    if budget_s is not None and not budget_s > 0:
        raise GenbenchError(f"the per-model budget must be a positive number of seconds, got {budget_s!r}")
    if not n_boot >= 1:
        raise GenbenchError(f"the number of bootstrap resamples must be at least 1, got {n_boot!r}")
    device = resolve_device(device)  # a missing GPU is refused here, not recorded as the submission's failure
    if timeout_s is None:
        timeout_s = _default_timeout(loaded, audit_zoo, budget_s)
    fields = sub.fields()
    commands = [submit_command(sub, z.name, partial=not z.complete) for z in loaded]

    work = Path(tempfile.mkdtemp(prefix="genbench-submit-"))
    try:
        job = {"folder": str(sub.folder.resolve()), "name": sub.name, "entry": sub.entry, "submission": fields,
               "zoos": [str(z.root.resolve()) for z in loaded], "commands": commands, "budget_s": budget_s,
               "audit_zoo": audit_zoo, "device": device, "n_boot": n_boot, "check_models": CHECK_MODELS,
               "allow_partial": allow_partial,
               "memory_bytes": int(memory_gb * 2**30), "out": str(work)}
        (work / "job.json").write_text(json.dumps(job))
        reason, seconds = run_worker(work / "job.json", entry=sub.entry, budget_s=budget_s, memory_gb=memory_gb,
                                     timeout_s=timeout_s, echo=echo)
        meta = _read_json(work / "meta.json") or {}
        paths = []
        for i, z in enumerate(loaded):
            rec = _read_json(work / f"record-{i}.json")
            if rec is not None and not _matches(rec, sub, z):
                r = Record(rec)
                reason_i = (f"the worker wrote a record for {r.written_name!r}/{r.measure!r} on "
                            f"{r.written_zoo_name!r}, not for {sub.name!r}/{sub.entry!r} on "
                            f"{z.name!r}: the submission tampered with its results")
                rec = None
            else:
                reason_i = reason
            if rec is None:
                rec = failure_record(sub.name, sub.entry, z, reason_i, submission=fields, command=commands[i],
                                     device=meta.get("device", device or "cpu"), seconds=seconds)
                r = Record(rec)
                rec.update(builtin=False, kind=meta.get("kind", r.kind), citation=meta.get("citation", r.citation),
                           higher_means=meta.get("higher_means", r.higher_means))
                rec["provenance"]["measure_version"] = meta.get("version")
                rec["provenance"]["measure_source_hash"] = meta.get("source_hash", sub.source_sha256)
            paths.append(write_record(rec, results_root))
        return paths
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(record: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers of a record: per HEADLINE score (adj R^2, k-fold R^2, tau) its value and 95% interval
    (NaN where missing), and the audit verdict."""
    r = Record.of(record)

    def num(x: float | None) -> float:
        return float("nan") if x is None else x

    out: dict[str, Any] = {key: (num(r.score(key)), *map(num, r.interval(key))) for key in HEADLINE}
    notes = [n for n in r.notes if "audit" in n]
    out["verdict"] = r.verdict or (notes[0] if notes else "not audited")
    return out
