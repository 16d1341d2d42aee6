"""The child process of `genbench submit`: caps its own memory, imports the submitted measure.py, runs the
conformance suite and the scoring on each zoo, and writes one JSON record per zoo where the parent said.
Usage: python -m genbench.leaderboard.worker JOB.json (the parent writes JOB.json; see submission.submit)."""
from __future__ import annotations

import dataclasses
import functools
import json
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .submission import EVENT, import_measure_file

_MEMORY_MARKS = ("MemoryError", "can't allocate memory", "DefaultCPUAllocator", "out of memory",
                 "Cannot allocate memory")


def emit(**event: Any) -> None:
    """Tell the parent about progress (a stage) or a measure call starting or ending."""
    sys.stdout.write(EVENT + json.dumps(event) + "\n")
    sys.stdout.flush()


def address_space() -> int:
    """This process's mapped address space in bytes (VmSize), or 0 where /proc cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def cap_memory(limit_bytes: int) -> None:
    """Let the address space grow by at most `limit_bytes` from now on, so that an allocation larger than the
    cap fails at once with MemoryError. What genbench, torch and their thread pools already map (several GB
    of mostly unused address space) is not counted; the parent also watches resident memory against the cap."""
    import torch
    torch.ones(256, 256) @ torch.ones(256, 256)  # start torch's thread pool (and its malloc arenas) first
    limit = address_space() + limit_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # hard limit too: the measure cannot lift it


class GuardTestData:
    """While a submitted measure runs, any read of a zoo's test set is refused and counted."""

    def __init__(self) -> None:
        self.active = 0
        self.reads: list[str] = []

    def refuse(self, what: str) -> None:
        """Count a read of `what` made from inside the measure and refuse it."""
        if self.active:
            self.reads.append(what)
            raise PermissionError(f"measures may not read test data ({what})")

    def install(self) -> None:
        """Guard Zoo.test_data, the test tensors of every dataset pool, and Python-level opens of a zoo's
        embedded dataset file, in this process."""
        from ..zoo.data import Pool
        from ..zoo.storage import DATASET, Zoo
        guard = self

        def audit(event: str, args: tuple[Any, ...]) -> None:
            if guard.active and event == "open" and args and Path(str(args[0])).name == DATASET:
                guard.refuse(f"open({DATASET}), the zoo's file holding its test set")

        sys.addaudithook(audit)
        plain_test_data = Zoo.test_data

        def test_data(zoo: Any, model_id: str) -> Any:
            guard.refuse("Zoo.test_data")
            return plain_test_data(zoo, model_id)

        Zoo.test_data = test_data  # type: ignore[method-assign]
        for name in ("x_test", "y_test"):
            slot = f"_guarded_{name}"

            def get(pool: Any, _slot: str = slot, _name: str = name) -> Any:
                guard.refuse(f"Pool.{_name}")
                return pool.__dict__[_slot] if _slot in pool.__dict__ else pool.__dict__[_name]

            def put(pool: Any, value: Any, _slot: str = slot) -> None:
                pool.__dict__[_slot] = value

            setattr(Pool, name, property(get, put))

    def wrap(self, fn: Any) -> Any:
        """The measure function, announcing each call to the parent and guarded while it runs."""
        @functools.wraps(fn)
        def guarded(ctx: Any) -> Any:
            emit(call="start")
            self.active += 1
            try:
                return fn(ctx)
            finally:
                self.active -= 1
                emit(call="end")
        return guarded


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


def memory_note(message: str, limit_bytes: int) -> str:
    """Prefix an error message with the memory cap when it is an out-of-memory error."""
    if any(mark in message for mark in _MEMORY_MARKS):
        return f"exceeded the memory cap of {limit_bytes / 2**30:g} GB: {message}"
    return message


def run(job: dict[str, Any]) -> int:
    """Do the job; every failure of the submitted code becomes a failure record. Returns the exit status."""
    emit(stage="importing genbench")
    from ..device import resolve_device
    from ..fileio import write_json_atomic
    from ..measures import check_measure, get_measure, list_measures
    from ..measures.registry import _MEASURES
    from ..scoring import audit, score  # noqa: F401 - imported before the memory cap, like everything of genbench
    from ..zoo.storage import load_zoo
    from .records import failure_record, run_entry

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
    measure_path = folder / "measure.py"
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
    m = get_measure(entry)
    _MEASURES[entry] = dataclasses.replace(m, fn=guard.wrap(m.fn))
    write_json_atomic(out / "meta.json", {"kind": m.kind, "citation": m.citation, "version": m.version,
                                          "higher_means": m.higher_means, "source_hash": m.source_hash,
                                          "device": device})

    emit(stage=f"running the conformance suite on {min(job['check_models'], len(zoos[0]))} models", zoo=zoos[0].name)
    try:
        report = check_measure(entry, zoos[0], models=job["check_models"], budget_s=job["budget_s"] or 300.0,
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
                            cache=False)  # every value computed here, under the guard and the cap
        except Exception as e:
            rec = failure_record(name, entry, z, memory_note(f"scoring failed: {type(e).__name__}: {e}", limit),
                                 submission=fields, command=job["commands"][i], device=device,
                                 seconds=time.perf_counter() - start)
        if len(guard.reads) > reads_before:
            rec = failure_record(name, entry, z, f"read test data: the measure tried to read the test set "
                                 f"{len(guard.reads) - reads_before} time(s) on {z.name}; measures may only see the "
                                 "training data", submission=fields, command=job["commands"][i], device=device,
                                 seconds=time.perf_counter() - start)
        elif rec.get("status") == "failed" and rec.get("failure"):
            rec["failure"] = memory_note(rec["failure"], limit)
        rec["builtin"] = False
        write(i, rec)
        status = rec["status"] if rec["status"] != "failed" else f"failed: {rec['failure']}"
        emit(note=f"done ({status})", zoo=z.name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Read the job file the parent wrote and run it."""
    argv = sys.argv[1:] if argv is None else argv
    return run(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    sys.exit(main())
