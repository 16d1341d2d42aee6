"""`submit()`: check a submission and its settings, and make one record per zoo here, in the parent: the
conformance suite, the scoring and the audit run in the parent's harness, which asks the sandboxed worker for each
measure call as it goes (executor.py), and every way the submitted code can go wrong (crash, hang, memory, NaN, a
broken protocol) becomes a failure record. `run_submission()` makes the records without writing them (what `genbench
verify` compares); `summarize()`: a record's headline numbers."""
from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...defaults import AUTO_AUDIT, BUDGET_S, N_BOOT
from ...device import resolve_device
from ...errors import GenbenchError, check_n_boot, is_positive
from ...text import excerpt, plain_text
from ...leaderboard.columns import HEADLINE
from ...record import (Record, as_submission, audit_options, command_line, declare_measure, with_failure,
                       write_record_safely)
from ...measures import Measure, list_measures
from ...zoo.roles import audit_zoo_of, resolve_audit_zoo
from ...zoo.storage import Zoo, load_zoo
from ..run import failure_record, run_entry
from ..trainings import default_trainings
from .guard import memory_note
from .executor import SandboxExecutor, standin_measure
from .job import JobFolder
from .metadata import (MEASURE_FILE, SUBMISSION_FILE, Submission, is_entry_name, is_known_zoo, load_submission,
                       trusted_submissions_dir)
from .sandbox import SUBMISSIONS_DIR, bwrap_version, memory_limit, sandbox_problem, scratch_dir
from .supervise import Worker, WorkerGone
from .zoos import choose_zoos, get_command

CHECK_MODELS = 2  # models the conformance suite runs on
STARTUP_S = 600.0  # the overall limit's allowance for starting the worker and loading its zoos
SANDBOXED, UNSANDBOXED = "bubblewrap", "none (--unsandboxed)"  # a record's provenance.sandbox


def submit_command(sub: Submission, zoo: Zoo, *, audit_zoo: str | None, n_boot: int = N_BOOT,
                   budget_s: float | None = BUDGET_S, unsandboxed: bool = False) -> str:
    """The command that (re)produces the record of `sub` on `zoo` with these settings (`audit_zoo` resolved: a
    zoo's name or None; a partial zoo: with --allow-partial), as stored in its provenance."""
    return command_line(f"genbench submit {sub.fields()['path']} --zoo {zoo.name}",
                        *audit_options(audit_zoo, audit_zoo_of(zoo)),
                        ("--n-boot", n_boot, N_BOOT),
                        ("--budget-s", budget_s if budget_s is not None else BUDGET_S, BUDGET_S),
                        ("--allow-partial", not zoo.complete, False), ("--unsandboxed", unsandboxed, False))


def _default_timeout(zoos: list[Zoo], audit: Zoo | None, budget_s: float | None) -> float:
    """A generous overall limit: start-up, then every model's budget twice over (every training it is scored on,
    checks and audit included)."""
    n = sum(len(z) * default_trainings(z) for z in zoos) + CHECK_MODELS + 1 + (2 * len(audit) if audit is not None
                                                                                else 0)
    return STARTUP_S + 2.0 * (budget_s if budget_s is not None else BUDGET_S) * n


def _dedupe(message: str) -> str:
    """'m1: E; m2: E' (the same error on every model checked) as 'E (on all 2 models checked)'."""
    parts = message.split("; ")
    errors = {p.partition(": ")[2] for p in parts}
    if len(parts) > 1 and len(errors) == 1 and all(": " in p for p in parts):
        return f"{errors.pop()} (on all {len(parts)} models checked)"
    return message


def check_settings(*, budget_s: Any, memory_gb: Any, timeout_s: Any, n_boot: Any) -> None:
    """Refuse settings that cannot work before anything runs (a negative timeout once replaced a good record by a
    failure)."""
    if not is_positive(memory_gb):
        raise GenbenchError(f"the memory cap must be a positive number of GB, got {memory_gb!r}")
    if budget_s is not None and not is_positive(budget_s):
        raise GenbenchError(f"the per-model budget must be a positive number of seconds, got {budget_s!r}")
    if timeout_s is not None and not is_positive(timeout_s):
        raise GenbenchError(f"the overall time limit must be a positive number of seconds, got {timeout_s!r}")
    check_n_boot("the number of bootstrap resamples", n_boot)


def require_sandbox(unsandboxed: bool) -> None:
    """Refuse to run submitted code where bubblewrap cannot sandbox it, unless the user said --unsandboxed."""
    if unsandboxed:
        return
    problem = sandbox_problem()
    if problem is not None:
        raise GenbenchError(f"cannot sandbox the submission: {problem}. genbench runs submitted code in a bubblewrap "
                            "sandbox; pass --unsandboxed to run it without one at your own risk (the code then sees "
                            "everything you can, and its records say so)")


def submit(path: str | Path, zoos: list[str] | None = None, *, results_root: str | Path | None = None,
           budget_s: float | None = BUDGET_S, memory_gb: float = 4, timeout_s: float | None = None,
           audit_zoo: str | None = AUTO_AUDIT, device: str | None = None, n_boot: int = N_BOOT,
           echo: Callable[[str, str], None] | None = None, allow_partial: bool = False,
           unsandboxed: bool = False) -> list[Path]:
    """Validate a submission folder, compute its entry's values in the sandbox on each zoo, and write one result
    record per zoo (ok, or failed with the reason) into `results_root` (default: the user's results folder,
    $GENBENCH_HOME/results, never the repository's); return the record paths. `echo(text, kind)` receives
    progress ("stage") and the worker's own output ("output"). A partial zoo is refused before the worker starts,
    unless `allow_partial` (then its record is marked partial and not ranked). Where bubblewrap cannot run, the
    submission is refused unless `unsandboxed`."""
    check_settings(budget_s=budget_s, memory_gb=memory_gb, timeout_s=timeout_s, n_boot=n_boot)
    sub = load_submission(path)
    # an unknown or unbuilt zoo is refused before anything runs; the zoos of submission.yaml (or, when it names
    # none, the official zoos built here, else the demo zoo: zoos.choose_zoos) only by their names
    choice = choose_zoos(sub, zoos)
    loaded = ([load_zoo(z) for z in choice.names] if zoos else
              [known_zoo(z, "from submission.yaml" if choice.source == "submission.yaml" else
                         "the demo zoo, as no official zoo is built here") for z in choice.names])
    for z in loaded:
        z.require_complete(allow_partial=allow_partial)  # so is a partial one, unless allowed
    if sub.entry in list_measures():
        raise GenbenchError(f"{sub.folder / SUBMISSION_FILE}: field 'entry': {sub.entry!r} is already a registered "
                            "(built-in or installed) measure; give the submitted measure a name of its own")
    check_entry_is_free(sub, results_root)
    require_sandbox(unsandboxed)
    say = (lambda text: echo(text, "stage")) if echo is not None else None  # noqa: E731
    written: list[Path] = []

    def keep(rec: dict[str, Any]) -> None:  # a zoo's record as it is finished: a later zoo's crash or Ctrl-C keeps it
        written.append(write_record_safely(rec, results_root, say))
        if say is not None:
            say(f"[{Record(rec).zoo_name}] record written: {written[-1]}")

    records = run_submission(sub, loaded, budget_s=budget_s, memory_gb=memory_gb, timeout_s=timeout_s,
                             audit_zoo=audit_zoo, device=device, n_boot=n_boot, echo=echo,
                             allow_partial=allow_partial, unsandboxed=unsandboxed, keep=keep)
    return written + [write_record_safely(rec, results_root, say) for rec in records[len(written):]]


def known_zoo(name: str, source: str = "from submission.yaml") -> Zoo:
    """A zoo named in submission.yaml (one of `known_zoos`), opened only by its name among the zoos built here: never
    a folder of the current directory, a path or a Hub repository the submission names."""
    from ...paths import zoos_dir
    from ...zoo.storage import MANIFEST
    folder = zoos_dir() / name
    if not is_known_zoo(name) or not (folder / MANIFEST).is_file():
        raise GenbenchError(f"zoo {name!r} ({source}) is not built here: get it with `{get_command(name)}`, or "
                            "name the zoo to score on with --zoo")
    return Zoo(folder)


def check_entry_is_free(sub: Submission, results_root: str | Path | None = None) -> None:
    """Refuse a submission whose entry (the registered measure's name, how every view names it) is already held by
    the record of another submission folder, in the shipped records or the user's results folder: both folders are
    named. The folder's own earlier records are not in the way."""
    from ...paths import results_dir, shipped_results_dir
    folders = [f for f in (shipped_results_dir(), Path(results_root) if results_root is not None else results_dir())
               if f is not None and f.is_dir()]
    for folder in folders:
        for path in sorted(folder.glob("*/*.json")):
            if "." in path.stem or path.stem == sub.name and folder != shipped_results_dir():
                continue  # a built-in's or a baseline's record (a dotted name, which no folder has), or its own
            try:
                r = Record.read(path)
            except GenbenchError:
                continue  # not a readable record: the leaderboard says so
            if path.stem == sub.name:
                check_not_a_shipped_folder(sub, r, path)
                continue
            if r.measure == sub.entry and r.name != sub.name:
                raise GenbenchError(
                    f"{sub.folder / SUBMISSION_FILE}: field 'entry': {sub.entry!r} is already the entry of "
                    f"submission {plain_text(r.name, limit=100)!r} (its record {folder}/{plain_text(r.zoo_name)}/"
                    f"{plain_text(r.name)}.json); one entry, one folder: give the measure in {sub.folder} a name of "
                    f"its own, or submit it from submissions/{plain_text(r.name, limit=100)}"
                    + ("" if r.ok else f" (that record is a failure record: `genbench leaderboard failed --remove "
                                       f"--results {folder}` deletes it)"))


def check_not_a_shipped_folder(sub: Submission, shipped: Record, path: Path) -> None:
    """Refuse a folder named like a shipped submission's (`shipped`, read from `path`) whose entry is another: its
    records would hide the shipped ones in the leaderboard, and `leaderboard add` would overwrite them."""
    if shipped.measure != sub.entry:
        raise GenbenchError(
            f"{sub.folder}: the folder name {sub.name!r} is that of the shipped submission of entry "
            f"{plain_text(shipped.measure, limit=100)!r} ({path}), and records are named after their folder: this "
            f"entry {sub.entry!r} would hide that one; rename the folder {sub.folder} (a name no shipped submission "
            "has) and submit it from there")


def dropped_line(rec: Record) -> str | None:
    """'1 of 24 models dropped: non-finite value (nan) on w16_...' for a record scored without some models (None when
    none was dropped): which models, and why, as the record's per-model errors say (escaped, each cut short)."""
    values = rec.values or {}
    ids, errors = values.get("model_id"), values.get("error")
    if not isinstance(ids, list) or not rec.fit.dropped:
        return None
    errors = errors if isinstance(errors, list) and len(errors) == len(ids) else [None] * len(ids)
    value = values.get("value")
    value = value if isinstance(value, list) and len(value) == len(ids) else [None] * len(ids)
    why: dict[str, list[str]] = {}
    for mid, err, v in zip(ids, errors, value):
        if err is not None:
            why.setdefault(plain_text(err, limit=80), []).append(plain_text(mid, limit=60))
        elif v is None or (isinstance(v, float) and not math.isfinite(v)):
            why.setdefault("no finite value", []).append(plain_text(mid, limit=60))
    parts = [f"{reason} on {', '.join(models[:3])}{f' and {len(models) - 3} more' if len(models) > 3 else ''}"
             for reason, models in why.items()]
    return f"{rec.fit.dropped} of {len(ids)} models dropped: " + ("; ".join(parts[:3]) or "no reason recorded")


def run_submission(sub: Submission, loaded: list[Zoo], *, budget_s: float | None = BUDGET_S, memory_gb: float = 4,
                   timeout_s: float | None = None, audit_zoo: str | None = AUTO_AUDIT, device: str | None = None,
                   n_boot: int = N_BOOT, echo: Callable[[str, str], None] | None = None,
                   allow_partial: bool = False, unsandboxed: bool = False,
                   keep: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """The records of `sub` on the zoos `loaded` (not written): its values computed in the sandbox (or, when
    `unsandboxed`, in a plain child process), everything else here. Each zoo's scored record is passed to `keep` as
    it is finished, and kept when the worker ends on a later zoo: that zoo then gets the failure record, and the zoos
    after it none (a failure at import or in the conformance suite is every zoo's)."""
    echo = echo or (lambda text, kind: None)
    require_sandbox(unsandboxed)
    device = resolve_device(device)  # a missing GPU is refused here, not recorded as the submission's failure
    memory_bytes = int(memory_gb * 2**30)
    audit = None
    audited_on = resolve_audit_zoo(audit_zoo, loaded[0]) if audit_zoo else None  # the zoo the audit runs on
    if audited_on:
        try:
            audit = load_zoo(audited_on)
        except GenbenchError:
            audit = None  # run_entry notes that the audit could not run, as it does for built-in measures
    if timeout_s is None:
        timeout_s = _default_timeout(loaded, audit, budget_s)
    fields = sub.fields()
    commands = [submit_command(sub, z, audit_zoo=audited_on, n_boot=n_boot, budget_s=budget_s,
                               unsandboxed=unsandboxed) for z in loaded]
    sandbox = UNSANDBOXED if unsandboxed else SANDBOXED

    def failed(z: Zoo, command: str, reason: str, meta: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
        rec = failure_record(sub.name, sub.entry, z, memory_note(reason, memory_bytes), submission=fields,
                             command=command, device=device, seconds=seconds)
        if meta is not None:
            declare_measure(rec, kind=meta["kind"], citation=meta["citation"], higher_means=meta["higher_means"],
                            version=meta["version"])
        return _finish(rec, sub, sandbox=sandbox, device=device, budget_s=budget_s, seconds=seconds)

    def score_on(m: Measure, executor: SandboxExecutor, z: Zoo, command: str) -> dict[str, Any]:
        """The record of the submitted measure on one zoo: its values asked of the sandbox as the harness goes."""
        echo(f"[{z.name}] scoring" + (f", auditing on {resolve_audit_zoo(audit_zoo, z)}" if audit_zoo else ""), "stage")
        executor.phase = "score"
        try:
            rec = run_entry(m, z, name=sub.name, submission=fields, audit_zoo=audit_zoo, device="cpu",
                            budget_s=budget_s, n_boot=n_boot, command=command, cache=False,
                            allow_partial=allow_partial, executor=executor)
        except WorkerGone:
            raise
        except Exception as e:
            rec = failure_record(sub.name, sub.entry, z, f"scoring failed: {type(e).__name__}: {e}",
                                 submission=fields, command=command, device=device, seconds=0.0)
            declare_measure(rec, kind=m.kind, citation=m.citation, higher_means=m.higher_means, version=m.version)
        r = Record(rec)
        if r.status == "failed" and r.failure:
            with_failure(rec, memory_note(r.failure, memory_bytes))
        dropped = dropped_line(r) if r.ok else None
        echo(f"[{z.name}] done ({r.status if r.ok else 'failed: ' + str(r.failure)})"
             + (f"; {dropped}" if dropped else ""), "stage")
        return rec

    work = scratch_dir("submit")
    memory = memory_limit(memory_bytes)
    try:
        measure_file = (str(sub.measure_file.resolve()) if unsandboxed
                        else f"{SUBMISSIONS_DIR}/{sub.folder.resolve().name}/measure.py")
        job = JobFolder(work / "job", entry=sub.entry, measure_file=measure_file, device=device,
                        memory_bytes=memory_bytes, link=not unsandboxed)
        where = (f"sandbox: {bwrap_version()}, no network" if not unsandboxed
                 else "NO SANDBOX (--unsandboxed): the submitted code can read and write whatever you can")
        echo(f"{where}; memory: {memory.describe()}", "stage")
        worker = Worker(job.file, entry=sub.entry, sandboxed=not unsandboxed, submission=sub.folder.resolve(),
                        budget_s=budget_s, memory=memory, timeout_s=timeout_s, device=device, echo=echo)
        meta, reason, records, conformed = None, None, [], False  # records: those of the zoos finished, in order
        try:
            meta = worker.ready()
            if meta is None:
                reason = worker.run.protocol.failed or "the worker ended without importing measure.py"
            else:
                m = standin_measure(sub.entry, meta, sub.source_sha256)
                executor = SandboxExecutor(worker, job, m, check_models=CHECK_MODELS)
                reason = conformance(m, loaded[0], executor, budget_s=budget_s or BUDGET_S)
                conformed = reason is None
                if conformed:
                    echo(f"[{loaded[0].name}] conformance suite passed", "stage")
                    for z, command in zip(loaded, commands):
                        records.append(_finish(score_on(m, executor, z, command), sub, sandbox=sandbox, device=device,
                                               budget_s=budget_s, seconds=time.monotonic() - worker.run.started))
                        if keep is not None:
                            keep(records[-1])
        except WorkerGone as e:
            reason = e.reason
        finally:  # also on Ctrl-C: the worker and everything it started end with the run
            seconds = worker.close()
    finally:
        memory.close()
        shutil.rmtree(work, ignore_errors=True)
    if reason is None:
        return records
    if not conformed:  # the import or the conformance suite failed (or the worker ended in it): every zoo's
        return [failed(z, command, reason, meta, seconds) for z, command in zip(loaded, commands)]
    at = len(records)  # the zoo in progress when the worker ended; the zoos after it were not reached
    if at + 1 < len(loaded):
        echo(f"not scored: {', '.join(z.name for z in loaded[at + 1:])} (the run ended on {loaded[at].name}): "
             + ", ".join(f"`{c}`" for c in commands[at + 1:]) + " scores them", "stage")
    return [*records, failed(loaded[at], commands[at], reason, meta, seconds)]


def conformance(m: Measure, zoo: Zoo, executor: SandboxExecutor, *, budget_s: float) -> str | None:
    """The conformance suite on the submitted measure, its calls made in the sandbox: None when it passed, else
    why not."""
    from ...harness import check_measure
    try:
        report = check_measure(m, zoo, models=CHECK_MODELS, budget_s=budget_s, device="cpu", executor=executor)
    except WorkerGone:
        raise
    except Exception as e:
        return f"the conformance suite could not run: {type(e).__name__}: {e}"
    bad = [f"{r.name}: {_dedupe(r.message)}" if r.message else r.name for r in report.results if not r.passed]
    return "failed the conformance suite: " + "; ".join(bad) if bad else None


def rerun_record(rec: Record, zoo: Zoo, submissions: str | Path | None = None, device: str | None = None, *,
                 audit: bool = True, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """A submission's record made again on `zoo` (the record's, as `genbench verify` found it) as `genbench submit`
    made it, in the sandbox: the submission is the real folder (not a link) named after the record's entry inside
    the trusted `submissions` folder (default: the checkout's submissions/), never a path the record names; the
    audit zoo, budget and resamples are `settings` (verify.trusted_settings: the record's, bounded, by default);
    without `audit`, it is re-made without its audit (`genbench verify --scores-only`). A GenbenchError says why it
    cannot be re-made."""
    import os
    import stat

    from ..verify import trusted_settings
    rec = Record.of(rec)
    name = rec.written_name
    if not is_entry_name(name):
        raise GenbenchError(f"the record's entry name {excerpt(name)} is not a submission folder's name (letters, "
                            "digits, '_' and '-'); verify runs submissions only from the trusted submissions folder")
    root = Path(submissions) if submissions is not None else trusted_submissions_dir()
    if root is None:
        raise GenbenchError("genbench runs from an installed package, so there is no trusted submissions/ folder: "
                            "pass --submissions DIR, the folder that holds the submission as DIR/NAME")
    folder = root / name
    try:
        st = os.lstat(folder)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode) or folder.resolve().parent != root.resolve():
        link = st is not None and stat.S_ISLNK(st.st_mode)
        raise GenbenchError(f"no submission {name!r} in {root} " + ("(it is a symbolic link: verify re-runs a "
                            "submission only from a real folder)" if link else f"(a folder {name}/ with measure.py, "
                            "inside it)") + ": verify re-runs a submission only from the trusted submissions folder, "
                            "never from a path a record names; --submissions DIR names another trusted folder, the one "
                            f"that holds {name}/")
    sub = load_submission(folder)  # a linked submission.yaml or measure.py is refused there
    settings = settings if settings is not None else trusted_settings(rec)
    zoo.require_complete(allow_partial=settings["allow_partial"])
    return run_submission(sub, [zoo], budget_s=settings["budget_s"],
                          audit_zoo=settings["audit_zoo"] if audit else None, device=device,
                          n_boot=settings["n_boot"], allow_partial=settings["allow_partial"])[0]


def verify_submission(path: str | Path, *, submissions: str | Path | None = None, device: str | None = None,
                      rtol: float | None = None, atol: float | None = None) -> Any:
    """`genbench verify` for one record file of a submission: its measure re-run in the sandbox (rerun_record) and
    every field but the timings compared; a Verification."""
    from ..verify import ATOL, RTOL, verify_record
    return verify_record(path, rtol=RTOL if rtol is None else rtol, atol=ATOL if atol is None else atol,
                         device=device, submissions=submissions)


def _finish(rec: dict[str, Any], sub: Submission, *, sandbox: str, device: str, budget_s: float | None,
            seconds: float) -> dict[str, Any]:
    """What every record of a submission says beside its scores: not built in, the parent's hash of measure.py,
    the device the values were computed on, the run's wall-clock seconds, the sandbox and the budget."""
    return as_submission(rec, source_hash=sub.source_sha256, device=device, seconds=seconds, sandbox=sandbox,
                         budget_s=budget_s)


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
