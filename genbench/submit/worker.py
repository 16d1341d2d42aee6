"""The child process of `genbench submit`: caps its own memory, imports the submitted measure.py, runs the
conformance suite and the scoring on each zoo, and writes one JSON record per zoo where the parent said.
Usage: python -m genbench.submit.worker JOB.json (the parent writes JOB.json; see api.submit)."""
from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ..defaults import BUDGET_S
from .events import emit
from .guard import GuardTestData, cap_memory, memory_note
from .metadata import MEASURE_FILE


def _where(exc: BaseException, path: Path) -> str:
    """' (measure.py line N)' for the deepest frame of the exception inside measure.py."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" ({path.name} line {frames[-1].lineno})" if frames else ""


def _dedupe(message: str) -> str:
    """'m1: E; m2: E' (the same error on every model checked) as 'E (on all 2 models checked)'."""
    parts = message.split("; ")
    errors = {p.partition(": ")[2] for p in parts}
    if len(parts) > 1 and len(errors) == 1 and all(": " in p for p in parts):
        return f"{errors.pop()} (on all {len(parts)} models checked)"
    return message


def run(job: dict[str, Any]) -> int:
    """Do the job; every failure of the submitted code becomes a failure record. Returns the exit status."""
    emit(stage="importing genbench")
    from ..device import resolve_device
    from ..fileio import write_json_atomic
    from ..harness import check_measure
    from ..leaderboard.records import failure_record, run_entry
    from ..leaderboard.schema import Record
    from ..measures import import_measure_file, list_measures
    from ..measures.registry import wrap_measure
    from ..scoring import audit, score  # noqa: F401 - imported before the memory cap, like everything of genbench
    from ..zoo.storage import load_zoo

    out = Path(job["out"])
    folder, entry, name, fields = Path(job["folder"]), job["entry"], job["name"], job["submission"]
    limit = int(job["memory_bytes"])
    device = resolve_device(job["device"])
    zoos = [load_zoo(z) for z in job["zoos"]]
    if not device.startswith("cuda"):  # CUDA reserves huge address ranges: there the parent's watch is the cap
        cap_memory(limit)
    start = time.perf_counter()

    def write(i: int, rec: dict[str, Any]) -> None:
        write_json_atomic(out / f"record-{i}.json", rec)

    def fail_all(reason: str) -> int:
        for i, z in enumerate(zoos):
            rec = failure_record(name, entry, z, reason, submission=fields, command=job["commands"][i],
                                 device=device, seconds=time.perf_counter() - start)
            rec["builtin"] = False
            write(i, rec)
        return 0

    guard = GuardTestData()
    guard.install()
    builtins = set(list_measures())
    measure_path = folder / MEASURE_FILE
    emit(stage="importing measure.py")
    raised: BaseException | None = None
    guard.active += 1  # code run at import is the submission's too
    try:
        import_measure_file(measure_path)
    except BaseException as e:  # SystemExit and KeyboardInterrupt at import are failures of the submission too
        raised = e
    finally:
        guard.active -= 1
    if guard.reads:  # also when the refusal made the import fail
        return fail_all(f"read test data at import: {', '.join(sorted(set(guard.reads)))}; measures may only "
                        "see the training data")
    if raised is not None:
        msg = memory_note(f"{type(raised).__name__}: {raised}", limit)
        return fail_all(f"measure.py raised at import{_where(raised, measure_path)}: {msg}")
    registered = sorted(n for n in list_measures() if n not in builtins)
    if entry not in registered:
        return fail_all(f"measure.py does not register {entry!r} (the entry named in submission.yaml); "
                        f"it registers {registered}")
    m = wrap_measure(entry, guard.wrap)
    write_json_atomic(out / "meta.json", {"kind": m.kind, "citation": m.citation, "version": m.version,
                                          "higher_means": m.higher_means, "source_hash": m.source_hash,
                                          "device": device})

    emit(stage=f"running the conformance suite on {min(job['check_models'], len(zoos[0]))} models", zoo=zoos[0].name)
    try:
        report = check_measure(entry, zoos[0], models=job["check_models"], budget_s=job["budget_s"] or BUDGET_S,
                               device=device)
    except Exception as e:
        return fail_all(memory_note(f"the conformance suite could not run: {type(e).__name__}: {e}", limit))
    if guard.reads:
        return fail_all(f"read test data: the measure tried to read the test set {len(guard.reads)} time(s) "
                        f"({', '.join(sorted(set(guard.reads)))}); measures may only see the training data")
    if not report.passed:
        bad = [f"{r.name}: {_dedupe(r.message)}" if r.message else r.name for r in report.results if not r.passed]
        return fail_all(memory_note("failed the conformance suite: " + "; ".join(bad), limit))
    emit(note="conformance suite passed", zoo=zoos[0].name)

    for i, z in enumerate(zoos):
        emit(stage=f"evaluating {entry} on {len(z)} models, scoring" + (f", auditing on {job['audit_zoo']}"
                                                                         if job["audit_zoo"] else ""), zoo=z.name)
        reads_before = len(guard.reads)
        try:
            rec = run_entry(entry, z, name=name, submission=fields, audit_zoo=job["audit_zoo"], device=device,
                            budget_s=job["budget_s"], n_boot=int(job["n_boot"]), command=job["commands"][i],
                            cache=False,  # every value computed here, under the guard and the cap
                            allow_partial=bool(job.get("allow_partial")))  # as the user allowed (the parent checked)
        except Exception as e:
            rec = failure_record(name, entry, z, memory_note(f"scoring failed: {type(e).__name__}: {e}", limit),
                                 submission=fields, command=job["commands"][i], device=device,
                                 seconds=time.perf_counter() - start)
        if len(guard.reads) > reads_before:
            rec = failure_record(name, entry, z, f"read test data: the measure tried to read the test set "
                                 f"{len(guard.reads) - reads_before} time(s) on {z.name}; measures may only see the "
                                 "training data", submission=fields, command=job["commands"][i], device=device,
                                 seconds=time.perf_counter() - start)
        else:
            r = Record(rec)
            if r.status == "failed" and r.failure:
                rec["failure"] = memory_note(r.failure, limit)
        rec["builtin"] = False
        write(i, rec)
        done = Record(rec)
        status = done.status if done.status != "failed" else f"failed: {done.failure}"
        emit(note=f"done ({status})", zoo=z.name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Read the job file the parent wrote and run it."""
    argv = sys.argv[1:] if argv is None else argv
    return run(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    sys.exit(main())
