"""A submission folder (measure.py + submission.yaml): read and check its metadata, then score it with
`submit`, which runs the submitted code in a child process under a time limit and a memory cap and turns
every way it can go wrong (crash, hang, memory, NaN, test-data reads) into a failure record."""
from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import GenbenchError, did_you_mean

SUBMISSION_FILE = "submission.yaml"
MEASURE_FILE = "measure.py"
DEFAULT_ZOOS = ("mnist1d-demogen",)
REQUIRED = ("title", "authors", "contact", "paper_url", "licence", "entry")
OPTIONAL = ("zoos",)
LINE_LIMIT = 1 << 16  # bytes of worker output read as one line at most
EVENT = "@@genbench "  # prefix of the worker's progress lines on its stdout
HANG_GRACE_S = 10.0  # a single measure call may run budget_s + max(HANG_GRACE_S, budget_s) before it counts as hung
CHECK_MODELS = 2
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URL = re.compile(r"^https?://[^\s/$.?#][^\s]*$", re.IGNORECASE)
_SPDX = re.compile(r"^\(?[A-Za-z0-9.+-]+\)?( (AND|OR|WITH) \(?[A-Za-z0-9.+-]+\)?)*$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_MEASURE = re.compile(r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Submission:
    """A checked submission folder: its name (the folder's), its metadata, and where its code lives."""

    name: str
    folder: Path
    title: str
    authors: tuple[str, ...]
    contact: str
    paper_url: str | None
    licence: str
    entry: str
    zoos: tuple[str, ...] = field(default=DEFAULT_ZOOS)

    @property
    def measure_file(self) -> Path:
        """The submission's measure.py."""
        return self.folder / MEASURE_FILE

    @property
    def source_sha256(self) -> str:
        """sha256 of measure.py's text (what the registry hashes for a measure defined in it)."""
        return hashlib.sha256(self.measure_file.read_text(encoding="utf-8").encode()).hexdigest()

    def fields(self) -> dict[str, Any]:
        """The metadata stored in each result record (`path` lets `genbench verify` import measure.py again)."""
        try:
            path = self.folder.resolve().relative_to(Path.cwd().resolve())
        except ValueError:
            path = self.folder.resolve()
        return {"title": self.title, "authors": list(self.authors), "contact": self.contact,
                "paper_url": self.paper_url, "licence": self.licence, "entry": self.entry,
                "zoos": list(self.zoos), "path": path.as_posix()}


def _fail(file: Path, key: str, expected: str, found: Any) -> GenbenchError:
    """The error for one bad field: the file, the field, what was expected and what was found."""
    return GenbenchError(f"{file}: field {key!r}: expected {expected}, found {found!r}")


def _nonempty_str(file: Path, key: str, value: Any, expected: str) -> str:
    """`value` stripped, when it is a non-empty string; else the field's error."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(file, key, expected, value)
    return value.strip()


def load_submission(path: str | Path) -> Submission:
    """Read and check `submissions/NAME/submission.yaml` (or the folder holding it); every problem is a
    GenbenchError naming the file, the field, what was expected and what was found."""
    p = Path(path)
    folder = p.parent if p.name == SUBMISSION_FILE else p
    file = folder / SUBMISSION_FILE
    if p.is_file() and p.name != SUBMISSION_FILE:
        raise GenbenchError(f"{p} is a file; pass the submission's folder ({p.parent})")
    if not folder.is_dir():
        raise GenbenchError(f"submission folder {folder} does not exist; copy submissions/_template to start one")
    if not _NAME.match(folder.resolve().name):
        raise GenbenchError(f"submission folder name {folder.resolve().name!r} must use only letters, digits, '_' "
                            "and '-' (it becomes the entry's name on the leaderboard)")
    if not file.is_file():
        raise GenbenchError(f"{folder} has no {SUBMISSION_FILE}; copy submissions/_template/{SUBMISSION_FILE} "
                            "and fill it in")
    if not (folder / MEASURE_FILE).is_file():
        raise GenbenchError(f"{folder} has no {MEASURE_FILE}; it must define and register the measure(s) "
                            "(see submissions/_template/measure.py)")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise GenbenchError(f"{file}: not valid YAML{at}: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GenbenchError(f"{file}: cannot be read: {e}") from None
    if data is None:
        raise GenbenchError(f"{file} is empty; copy submissions/_template/{SUBMISSION_FILE} and fill in "
                            f"{', '.join(REQUIRED)}")
    if not isinstance(data, dict):
        raise GenbenchError(f"{file}: expected a mapping of fields ({', '.join(REQUIRED)}), "
                            f"found {type(data).__name__} {data!r}")
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            err = did_you_mean(str(key), REQUIRED + OPTIONAL, what=f"field in {file}:")
            raise GenbenchError(f"{err} The fields are {', '.join(REQUIRED + OPTIONAL)}.")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise GenbenchError(f"{file}: missing field(s) {', '.join(repr(k) for k in missing)}; "
                            f"a submission needs {', '.join(REQUIRED)} (paper_url may be null)")

    title = _nonempty_str(file, "title", data["title"], "a non-empty string")
    authors = data["authors"]
    if (not isinstance(authors, list) or not authors
            or not all(isinstance(a, str) and a.strip() for a in authors)):
        raise _fail(file, "authors", "a non-empty list of names (strings), e.g. [\"Ada Lovelace\"]", authors)
    contact = _nonempty_str(file, "contact", data["contact"], "an e-mail address")
    if not _EMAIL.match(contact):
        raise _fail(file, "contact", "an e-mail address such as name@example.org", contact)
    paper_url = data["paper_url"]
    if paper_url is not None and (not isinstance(paper_url, str) or not _URL.match(paper_url.strip())):
        raise _fail(file, "paper_url", "an http(s) URL, or null when there is no paper", paper_url)
    licence = _nonempty_str(file, "licence", data["licence"], "an SPDX licence identifier such as MIT or Apache-2.0")
    if not _SPDX.match(licence):
        raise _fail(file, "licence", "an SPDX licence identifier such as MIT or Apache-2.0", licence)
    entry = _nonempty_str(file, "entry", data["entry"], "the name of a measure that measure.py registers")
    if not _MEASURE.match(entry):
        raise _fail(file, "entry", "a measure name of the form 'family.variant' registered by measure.py", entry)
    zoos = data.get("zoos", list(DEFAULT_ZOOS))
    if (not isinstance(zoos, list) or not zoos
            or not all(isinstance(z, str) and z.strip() for z in zoos)):
        raise _fail(file, "zoos", "a non-empty list of zoo names (or leave the field out for "
                                  f"{list(DEFAULT_ZOOS)})", zoos)
    return Submission(name=folder.resolve().name, folder=folder, title=title,
                      authors=tuple(a.strip() for a in authors), contact=contact,
                      paper_url=None if paper_url is None else paper_url.strip(), licence=licence, entry=entry,
                      zoos=tuple(dict.fromkeys(z.strip() for z in zoos)))


# ---------------------------------------------------------------- running a submission in a child process


def submit_command(sub: Submission, zoo: str) -> str:
    """The command that (re)produces the record of `sub` on `zoo`, as stored in its provenance."""
    folder = sub.fields()["path"]
    return f"genbench submit {folder} --zoo {zoo}"


@dataclass
class _Child:
    """What the parent sees of the running worker: its output tail, stage, and the current measure call."""

    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=30))
    stage: str = "starting the worker"
    call_started: float | None = None


def _pump(stream: Any, child: _Child, echo: Callable[[str, str], None]) -> None:
    """Read the worker's output line by line: events update `child`, other lines are kept and echoed."""
    def show(text: str, kind: str) -> None:
        try:
            echo(text, kind)
        except Exception:  # a broken console must not stop the reading, or the worker would block on a full pipe
            pass

    for raw in iter(lambda: stream.readline(LINE_LIMIT), b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        k = line.find(EVENT)
        if k > 0:  # output without a newline (a progress bar's \r, print(end="")) glued to an event
            child.tail.append(line[:k])
            show(line[:k], "output")
            line = line[k:]
        if k >= 0:
            try:
                ev = json.loads(line[len(EVENT):])
            except json.JSONDecodeError:
                ev = None
            ev = ev if isinstance(ev, dict) else {}
            if "call" in ev:
                child.call_started = time.monotonic() if ev["call"] == "start" else None
            text = ev.get("stage", ev.get("note"))
            if text is not None:
                where = f" on {ev['zoo']}" if ev.get("zoo") else ""
                if "stage" in ev:  # an activity (what a crash happened during); a note only reports
                    child.stage = f"{text}{where}"
                show(f"[{ev['zoo']}] {text}" if ev.get("zoo") else str(text), "stage")
            continue
        child.tail.append(line)
        show(line, "output")
    stream.close()


def _rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (Linux /proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _group_rss_bytes(pgid: int) -> int | None:
    """Resident memory of every process in process group `pgid` (the worker and whatever it started)."""
    total, seen = 0, False
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            if int(fields[2]) != pgid:  # fields after the name: state, ppid, pgrp, ...
                continue
        except (OSError, ValueError, IndexError):
            continue
        rss = _rss_bytes(int(entry.name))
        if rss is not None:
            total, seen = total + rss, True
    return total if seen else None


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and everything it started (its own process group), also after the worker exited."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            proc.kill()


def _crash_reason(code: int, child: _Child, memory_gb: float) -> str:
    """Why the worker ended without a record: its exit status or signal, the stage, and its last output."""
    tail = [ln for ln in child.tail if ln.strip()][-8:]
    shown = ("; last output: " + " | ".join(tail)[-800:]) if tail else ""
    if code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL:
            return (f"crashed while {child.stage}: the worker was killed by SIGKILL (most often the system's "
                    f"out-of-memory killer; the memory cap was {memory_gb:g} GB){shown}")
        return f"crashed while {child.stage}: the worker died of {name}{shown}"
    return f"crashed while {child.stage}: the worker exited with status {code} without writing a result{shown}"


def _watch(proc: subprocess.Popen, child: _Child, *, start: float, timeout_s: float, hang_s: float | None,
           budget_s: float | None, memory_gb: float, entry: str) -> str | None:
    """Wait for the worker; kill its process group on a timeout, a hung measure call or too much memory,
    and return why (None when it ended by itself)."""
    cap, polls = memory_gb * 2**30, 0
    while proc.poll() is None:
        time.sleep(0.05)
        now, killed, polls = time.monotonic(), None, polls + 1
        if now - start > timeout_s:
            killed = (f"timed out: the submission ran past its wall-clock limit of {timeout_s:g} s while "
                      f"{child.stage}; the worker was killed")
        elif hang_s is not None and child.call_started is not None and now - child.call_started > hang_s:
            killed = (f"hung: one call of {entry} ran for more than {hang_s:g} s (its per-model budget is "
                      f"{budget_s:g} s) while {child.stage}; the worker was killed")
        elif (rss := (_group_rss_bytes(proc.pid) if polls % 5 == 0 else _rss_bytes(proc.pid))) is not None \
                and rss > cap:
            killed = (f"exceeded the memory cap of {memory_gb:g} GB (resident {rss / 2**30:.2f} GB) while "
                      f"{child.stage}; the worker was killed")
        if killed:
            _kill_group(proc)
            return killed
    return None


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object written by the worker, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _matches(rec: dict[str, Any], sub: Submission, zoo: Any) -> bool:
    """Whether a record from the worker is the one asked for: this entry, this zoo, this zoo's table."""
    z = rec.get("zoo") if isinstance(rec.get("zoo"), dict) else {}
    table = zoo.table_sha256
    return (rec.get("name") == sub.name and rec.get("measure") == sub.entry and rec.get("status") in ("ok", "failed")
            and z.get("name") == zoo.name and z.get("table_sha256") == table)


def _default_timeout(zoos: list[Any], audit_zoo: str | None, budget_s: float | None) -> float:
    """A generous overall limit: start-up, then every model's budget twice over (checks and audit included)."""
    from ..zoo.storage import load_zoo
    n = sum(len(z) for z in zoos) + CHECK_MODELS + 1
    if audit_zoo:
        try:
            n += 2 * len(load_zoo(audit_zoo))
        except GenbenchError:
            pass
    return 600.0 + 2.0 * (budget_s if budget_s is not None else 300.0) * n


def submit(path: str | Path, zoos: list[str] | None = None, *, results_root: str | Path = "leaderboard/results",
           budget_s: float | None = 300, memory_gb: float = 4, timeout_s: float | None = None,
           audit_zoo: str | None = "mnist1d-fragility", device: str | None = None, n_boot: int = 1000,
           echo: Callable[[str, str], None] | None = None) -> list[Path]:
    """Validate a submission folder, run its entry in a child process on each zoo, and write one result
    record per zoo (ok, or failed with the reason); return the record paths. `echo(text, kind)` receives
    progress ("stage") and the child's own output ("output")."""
    from ..measures import list_measures
    from ..zoo.storage import load_zoo
    from .records import failure_record, write_record

    echo = echo or (lambda text, kind: None)
    sub = load_submission(path)
    zoo_names = list(dict.fromkeys(zoos)) if zoos else list(sub.zoos)
    loaded = [load_zoo(z) for z in zoo_names]  # an unknown or unbuilt zoo is refused before anything runs
    if sub.entry in list_measures():
        raise GenbenchError(f"{sub.folder / SUBMISSION_FILE}: field 'entry': {sub.entry!r} is already a registered "
                            "(built-in or installed) measure; give the submitted measure a name of its own")
    if memory_gb is None or not memory_gb > 0:
        raise GenbenchError(f"the memory cap must be a positive number of GB, got {memory_gb!r}")
    if budget_s is not None and not budget_s > 0:
        raise GenbenchError(f"the per-model budget must be a positive number of seconds, got {budget_s!r}")
    if not n_boot >= 1:
        raise GenbenchError(f"the number of bootstrap resamples must be at least 1, got {n_boot!r}")
    from ..device import resolve_device
    device = resolve_device(device)  # a missing GPU is refused here, not recorded as the submission's failure
    if timeout_s is None:
        timeout_s = _default_timeout(loaded, audit_zoo, budget_s)
    hang_s = None if budget_s is None else budget_s + max(HANG_GRACE_S, budget_s)
    fields = sub.fields()
    commands = [submit_command(sub, z.name) for z in loaded]

    work = Path(tempfile.mkdtemp(prefix="genbench-submit-"))
    try:
        job = {"folder": str(sub.folder.resolve()), "name": sub.name, "entry": sub.entry, "submission": fields,
               "zoos": [str(z.root.resolve()) for z in loaded], "commands": commands, "budget_s": budget_s,
               "audit_zoo": audit_zoo, "device": device, "n_boot": n_boot, "check_models": CHECK_MODELS,
               "memory_bytes": int(memory_gb * 2**30), "out": str(work)}
        (work / "job.json").write_text(json.dumps(job))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-u", "-m", "genbench.leaderboard.worker", str(work / "job.json")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        child = _Child()
        pump = threading.Thread(target=_pump, args=(proc.stdout, child, echo), daemon=True)
        pump.start()
        try:
            killed = _watch(proc, child, start=start, timeout_s=timeout_s, hang_s=hang_s, budget_s=budget_s,
                            memory_gb=memory_gb, entry=sub.entry)
        finally:  # Ctrl-C or any error here must not leave the worker, or anything it started, running
            _kill_group(proc)
            proc.wait()
            pump.join(timeout=5)
        seconds = time.monotonic() - start
        meta = _read_json(work / "meta.json") or {}
        reason = killed or _crash_reason(proc.returncode, child, memory_gb)
        paths = []
        for i, z in enumerate(loaded):
            rec = _read_json(work / f"record-{i}.json")
            if rec is not None and not _matches(rec, sub, z):
                reason_i = (f"the worker wrote a record for {rec.get('name')!r}/{rec.get('measure')!r} on "
                            f"{(rec.get('zoo') or {}).get('name')!r}, not for {sub.name!r}/{sub.entry!r} on "
                            f"{z.name!r}: the submission tampered with its results")
                rec = None
            else:
                reason_i = reason
            if rec is None:
                rec = failure_record(sub.name, sub.entry, z, reason_i, submission=fields, command=commands[i],
                                     device=meta.get("device", device or "cpu"), seconds=seconds)
                rec["builtin"] = False
                for key in ("kind", "citation", "higher_means"):
                    rec[key] = meta.get(key, rec.get(key))
                rec["provenance"]["measure_version"] = meta.get("version")
                rec["provenance"]["measure_source_hash"] = meta.get("source_hash", sub.source_sha256)
            paths.append(write_record(rec, results_root))
        return paths
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a record: adj R^2, k-fold R^2 (with intervals), tau and the audit verdict."""
    scores = record.get("scores") or {}
    values, intervals = scores.get("values") or {}, scores.get("intervals") or {}

    def num(x: Any) -> float:
        return float("nan") if x is None else float(x)

    out: dict[str, Any] = {}
    for key in ("adj_r2", "kfold_r2", "tau"):
        lo, hi = (intervals.get(key) or [None, None])[:2]
        out[key] = (num(values.get(key)), num(lo), num(hi))
    audit = record.get("audit")
    notes = [n for n in scores.get("notes", []) if "audit" in n]
    out["verdict"] = (audit or {}).get("verdict") or (notes[0] if notes else "not audited")
    return out


def import_measure_file(path: Path) -> str:
    """Import measure.py under a module name unique to its path; return that name."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    mod_name = f"genbench_submission_{path.parent.name.replace('-', '_')}_{digest}"
    if mod_name in sys.modules:  # already imported (and its measures registered) in this process
        return mod_name
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)  # a failed import must not look imported next time
        raise
    return mod_name
