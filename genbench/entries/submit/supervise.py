"""The parent's side of `genbench submit`: start the worker (in the bubblewrap sandbox, or unsandboxed when the user
asked for it), show its output, send it the harness's calls one at a time and read their outcomes on its result
channel, and end it (with everything it started) on a timeout, a hang at import or in a measure call, too much
memory, or a message out of place; say why it ended early.

The clocks are the parent's own, kept by a watcher thread while the harness runs here: the worker's start-up
(Python, torch, genbench: trusted code) has START_S, the import of measure.py its own budget, and each call its
per-model budget plus a grace, counted from the moment it was asked for. Nothing the worker prints can stop a
clock; a forged result is only a value. The seconds a call took, checked against its budget, are the parent's too:
from the request sent to the result read (the worker's own timing runs in the submission's process, which can
rewrite it).

The worker's output (the submission's to print) reaches the user bounded and sanitised: the first SHOWN_HEAD lines
and the last SHOWN_TAIL, each cut to SHOWN_CHARS with control characters escaped, and a count of what was not shown;
all of it, up to LOG_LIMIT bytes, goes to a log file under $GENBENCH_HOME/logs that the output names."""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...paths import genbench_home
from ...text import plain_text
from .events import MAX_LINE, Protocol, ProtocolError, send
from .sandbox import JOB_DIR, MemoryLimit, bwrap_argv, check_submission_size, scratch_dir, scrubbed_env

WORKER_MODULE = "genbench.entries.submit.worker"
LINE_LIMIT = 1 << 16  # bytes of worker output read as one line at most
HANG_GRACE_S = 10.0  # a single measure call may run budget_s + max(HANG_GRACE_S, budget_s) before it counts as hung
IMPORT_GRACE_S = 60.0  # importing measure.py may take the per-model budget plus this
START_S = 600.0  # starting Python, torch and genbench in the worker, before measure.py is imported
POLL_S = 0.05
SHOWN_HEAD, SHOWN_TAIL = 40, 20  # lines of the worker's output shown first and last
SHOWN_CHARS = 300  # characters of one line of output shown
LOG_LIMIT = 4 << 20  # bytes of the worker's output kept in its log file


BUDGET_FIX = "call ctx.check_time() in the measure's long loops, or pass a larger --budget-s"


class WorkerGone(Exception):
    """The worker was ended before it answered (its reason: a hang, a crash, the memory cap, a broken protocol)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class WorkerRun:
    """What came back from the worker: the channel's messages (checked), when each call was asked for (the parent's
    clock) with its budget and stage, why the run ended early (None: not ended early), and how long it took."""

    protocol: Protocol
    asked_at: list[float] = field(default_factory=list)
    answered_at: list[float] = field(default_factory=list)  # when each call's result was read (the parent's clock)
    budgets: list[float | None] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    reason: str | None = None
    started: float = 0.0
    seconds: float = 0.0
    importing_at: float | None = None  # when the worker said it starts importing measure.py
    ready_at: float | None = None  # when the measure's metadata arrived


class OutputLog:
    """The worker's output as the user gets it: the head and the tail shown (sanitised, lines cut), a count of the
    rest, and everything up to LOG_LIMIT bytes in a log file (made at the first line of output)."""

    def __init__(self, path: Path, echo: Callable[[str, str], None]):
        self.path, self.echo = path, echo
        self.lines = self.bytes = self.logged = 0
        self.tail: collections.deque = collections.deque(maxlen=SHOWN_TAIL)
        self.file: Any = None

    def _say(self, text: str, kind: str) -> None:
        try:
            self.echo(text, kind)
        except Exception:  # a broken console must not stop the reading, or the worker would block on a full pipe
            pass

    def _write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError:  # a full disk ends the log, never the reading
            self.file.close()
            self.file = None

    def add(self, raw: bytes) -> str:
        """One line (or a LINE_LIMIT piece of a longer one) of output; the line as shown (sanitised, cut)."""
        if self.lines == 0:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.file = open(self.path, "wb")
            except OSError:
                self.file = None
            where = (f"all of it (up to {LOG_LIMIT >> 20} MB) in {self.path}" if self.file
                     else "no log file (cannot write one)")
            self._say(f"the submission's output: the first {SHOWN_HEAD} and last {SHOWN_TAIL} lines shown; {where}",
                      "stage")
        self.lines, self.bytes = self.lines + 1, self.bytes + len(raw)
        if self.file is not None and self.logged < LOG_LIMIT:
            piece = raw[:LOG_LIMIT - self.logged]
            self._write(piece)
            self.logged += len(piece)
        line = plain_text(raw.decode("utf-8", "replace").rstrip("\n"), limit=SHOWN_CHARS)
        if self.lines <= SHOWN_HEAD:
            self._say(line, "output")
        else:
            self.tail.append(line)
        return line

    def close(self) -> None:
        """Show the tail and say what was not shown (and not logged)."""
        hidden = self.lines - SHOWN_HEAD - len(self.tail)
        if hidden > 0:
            self._say(f"... {hidden} lines of output not shown ({self.bytes / 2**20:.1f} MB in all); see {self.path}",
                      "stage")
        for line in self.tail:
            self._say(line, "output")
        if self.file is not None and self.bytes > self.logged:
            self._write(f"\n[genbench: {self.bytes - self.logged} more bytes of output not logged]\n".encode())
        if self.file is not None:
            self.file.close()


def _log_path(entry: str) -> Path:
    """Where a run's output is logged: $GENBENCH_HOME/logs/submit-ENTRY-TIME-PID.log."""
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in entry)[:80]
    return genbench_home() / "logs" / f"submit-{name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"


def _pump(stream: Any, tail: collections.deque, log: OutputLog) -> None:
    """Read the worker's output line by line (never parsed: it is the submission's to print), keep its last lines
    (sanitised) for a crash's reason, and pass it to the log, which shows it bounded."""
    try:
        for raw in iter(lambda: stream.readline(LINE_LIMIT), b""):
            tail.append(log.add(raw))
    finally:
        log.close()
        stream.close()


def _read_channel(fd: int, run: WorkerRun, lock: threading.Condition, problem: list[str]) -> None:
    """Feed the channel's lines to the protocol, waking whoever waits for a result; stop at the first bad one."""
    with os.fdopen(fd, "rb") as f:
        while True:
            line = f.readline(MAX_LINE + 1)
            if not line:
                return
            with lock:
                try:
                    kind = run.protocol.feed(line)
                except ProtocolError as e:
                    problem.append(str(e))
                    return
                finally:
                    lock.notify_all()
                now = time.monotonic()
                if kind == "task":
                    run.answered_at.append(now)
                if kind == "ready":
                    run.ready_at = now
                elif kind == "importing":
                    run.importing_at = now


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def _tree(root: int) -> list[int]:
    """`root` and all its descendants (in a PID namespace, orphans of the sandbox stay below its init)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and len(fields) > 2:
                children[int(fields[1])].append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    return total


def _memory_files_bytes(pids: list[int]) -> int:
    """Bytes held in memory as files by the sandbox's processes, which resident memory does not count: what its
    writable tmpfs (/tmp and /dev/shm, seen through the first of `pids` in a mount namespace of its own) hold, and
    every memfd its processes have open."""
    total, seen = 0, set()
    try:
        own = os.readlink("/proc/self/ns/mnt")
    except OSError:
        own = None
    for pid in pids:
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == own:
                continue
            for mount in ("tmp", "dev/shm"):
                st = os.statvfs(f"/proc/{pid}/root/{mount}")
                total += (st.f_blocks - st.f_bfree) * st.f_frsize
            break
        except OSError:
            continue
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    continue
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def _kill(proc: subprocess.Popen, memory: MemoryLimit) -> None:
    """Kill the worker and everything it started: its process group, its process tree, its cgroup."""
    pids = _tree(proc.pid)
    for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), *(lambda p=p: os.kill(p, signal.SIGKILL) for p in pids)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    memory.kill_all()


def _crash_reason(code: int, stage: str, tail: collections.deque, memory: MemoryLimit, oom: bool,
                  sandboxed: bool) -> str:
    """Why the worker ended without finishing: its exit status or signal, the stage, and its last output (already
    sanitised by _pump)."""
    lines = [ln for ln in tail if ln.strip()][-8:]
    shown = ("; last output: " + " | ".join(lines)[-800:]) if lines else ""
    gb = f"{memory.limit_bytes / 2**30:g} GB"
    if oom:
        return (f"exceeded the memory cap of {gb}: the kernel killed the worker while {stage} for going over the "
                f"sandbox's memory limit ({memory.describe()}){shown}")
    sig = -code if code < 0 else code - 128 if sandboxed and 128 < code < 160 else None
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL:
            return (f"crashed while {stage}: the worker was killed by SIGKILL (most often the system's "
                    f"out-of-memory killer; the memory cap was {gb}){shown}")
        return f"crashed while {stage}: the worker died of {name}{shown}"
    return f"crashed while {stage}: the worker exited with status {code} without writing a result{shown}"


class Worker:
    """The running worker of one submission: `ready()` waits for measure.py's metadata, `call()` asks for one
    measure call and waits for its outcome, `close()` ends the run. A watcher thread keeps the clocks and the
    memory cap and ends the worker (with everything it started) when one runs out; the waiting call then raises
    WorkerGone with the reason."""

    def __init__(self, job_file: Path, *, entry: str, sandboxed: bool, submission: Path, budget_s: float | None,
                 memory: MemoryLimit, timeout_s: float, device: str, echo: Callable[[str, str], None]):
        self.entry, self.sandboxed, self.memory, self.timeout_s, self.echo = entry, sandboxed, memory, timeout_s, echo
        self.import_s = (budget_s or 0.0) + IMPORT_GRACE_S
        self.run = WorkerRun(Protocol())
        self.lock, self.problem = threading.Condition(), []
        self.tail: collections.deque = collections.deque(maxlen=30)
        self.stage_now: str | None = None  # the stage the user was last told
        self.closing = False
        check_submission_size(submission)
        self.log = OutputLog(_log_path(entry), echo)
        self.home = str(scratch_dir("home"))
        self._start(job_file, submission, device)

    def _start(self, job_file: Path, submission: Path, device: str) -> None:
        read_fd, write_fd = os.pipe()  # the result channel
        ask_fd, self.ask_fd = os.pipe()  # the request channel
        python = [sys.executable, "-u", "-m", WORKER_MODULE]
        if self.sandboxed:
            argv = bwrap_argv(job_dir=job_file.parent, submission=submission, tmp_bytes=self.memory.limit_bytes,
                              cuda=device.startswith("cuda"))
            argv = [*argv, *python, f"{JOB_DIR}/{job_file.name}", str(ask_fd), str(write_fd)]
            env = scrubbed_env("/tmp")
        else:
            argv = [*python, str(job_file), str(ask_fd), str(write_fd)]
            env = scrubbed_env(self.home)
        self.run.started = time.monotonic()
        try:
            self.proc = subprocess.Popen(self.memory.wrap(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, env=env, cwd=self.home,
                                         pass_fds=(write_fd, ask_fd), start_new_session=True)
        finally:
            os.close(write_fd)
            os.close(ask_fd)
        self.threads = [threading.Thread(target=_pump, args=(self.proc.stdout, self.tail, self.log), daemon=True),
                        threading.Thread(target=_read_channel, args=(read_fd, self.run, self.lock, self.problem),
                                         daemon=True),
                        threading.Thread(target=self._watch, daemon=True)]
        for t in self.threads:
            t.start()

    def stage(self) -> str:
        """What the worker is doing now, as the user is told."""
        p = self.run.protocol
        if not p.importing:
            return "starting the worker"
        if p.meta is None:
            return "importing measure.py"
        stages = self.run.stages  # one per call asked for: the pending call's, else the last one's
        return stages[min(len(p.results), len(stages) - 1)] if stages else "waiting for the harness"

    def _tell_stage(self) -> None:
        """Tell the user the stage when it changed since they were last told (called by whichever thread saw it
        change first: a call's own thread, so that its stage is said before what the caller says after it)."""
        with self.lock:
            current = self.stage()
            if current == self.stage_now:
                return
            self.stage_now = current
        self.echo(current, "stage")

    def ready(self) -> dict[str, Any] | None:
        """The measure's metadata once measure.py is imported; None when the import failed (protocol.failed says
        why). WorkerGone when the worker was ended first."""
        with self.lock:
            while self.run.reason is None and self.run.protocol.meta is None and self.run.protocol.failed is None:
                self.lock.wait(POLL_S)
            if self.run.protocol.meta is None and self.run.protocol.failed is None:
                raise WorkerGone(self.run.reason or "the worker ended")
            return self.run.protocol.meta

    def call(self, request: dict[str, Any], *, budget_s: float | None, stage: str) -> dict[str, Any]:
        """Ask for one measure call and wait for its raw outcome (checked by the protocol), its seconds measured
        here: from the request sent to the result read."""
        with self.lock:
            if self.run.reason is not None:
                raise WorkerGone(self.run.reason)
            k = self.run.protocol.ask()
            self.run.asked_at.append(time.monotonic())
            self.run.budgets.append(budget_s)
            self.run.stages.append(stage)
        self._tell_stage()
        try:
            send(self.ask_fd, task=k, **request)
        except OSError:
            pass  # the worker is gone: the watcher says why
        with self.lock:
            while self.run.reason is None and len(self.run.protocol.results) <= k:
                self.lock.wait(POLL_S)
            if len(self.run.protocol.results) <= k:
                raise WorkerGone(self.run.reason or "the worker ended")
            return {**self.run.protocol.results[k], "seconds": self.run.answered_at[k] - self.run.asked_at[k]}

    def close(self) -> float:
        """End the run: ask the worker to finish, then end it and everything it started; the run's seconds (once
        closed, closing again only says them)."""
        with self.lock:
            if self.closing:
                return self.run.seconds
            self.closing = True
            if self.run.reason is None and self.run.protocol.meta is not None:
                self.run.protocol.end()
                try:
                    send(self.ask_fd, end=True)
                except OSError:
                    pass
        try:
            if self.proc.poll() is None and self.run.protocol.meta is not None and self.run.reason is None:
                self.proc.wait(timeout=10)  # it is exiting by itself
        except subprocess.TimeoutExpired:
            pass
        finally:  # Ctrl-C or any error here must not leave the worker, or anything it started, running
            self._end()
        return self.run.seconds

    def _end(self) -> None:
        _kill(self.proc, self.memory)
        self.proc.wait()
        try:
            os.close(self.ask_fd)
        except OSError:
            pass
        for t in self.threads[:2]:
            t.join(timeout=5)
        import shutil
        shutil.rmtree(self.home, ignore_errors=True)
        self.run.seconds = time.monotonic() - self.run.started
        with self.lock:
            self.lock.notify_all()

    def _give_up(self, reason: str) -> None:
        """End the worker now, saying why."""
        with self.lock:
            if self.run.reason is None:
                self.run.reason = reason
            self.lock.notify_all()
        _kill(self.proc, self.memory)

    def _watch(self) -> None:
        """The clocks and the memory cap, checked every POLL_S until the run ends."""
        polls = 0
        while True:
            time.sleep(POLL_S)
            polls += 1
            now = time.monotonic()
            with self.lock:
                p = self.run.protocol
                if self.run.reason is not None or p.done or p.failed is not None or self.closing:
                    return
                n = len(p.results)
                pending = n < p.asked
                since = self.run.asked_at[n] if pending else None
                budget = self.run.budgets[n] if pending else None
                importing_at = self.run.importing_at
            self._tell_stage()
            current = self.stage_now
            if self.problem:
                self._give_up(f"broke the result protocol while {current}: {self.problem[0]}; only genbench's worker "
                              "writes to the result channel, so the submission tampered with it")
                return
            if self.proc.poll() is not None:
                self.threads[1].join(timeout=5)  # the last messages may still be in the pipe
                with self.lock:
                    p = self.run.protocol
                    answered = p.failed is not None or p.done or self.closing
                if self.problem:
                    continue  # reported on the next turn
                if not answered:
                    oom = self.memory.oom_kills() > 0
                    self._give_up(_crash_reason(self.proc.returncode, self.stage(), self.tail, self.memory, oom,
                                                self.sandboxed))
                return
            killed = None
            if now - self.run.started > self.timeout_s:
                killed = (f"timed out: the submission ran past its wall-clock limit of {self.timeout_s:g} s while "
                          f"{current}; the worker was killed")
            elif importing_at is None and now - self.run.started > START_S:
                killed = f"timed out while starting the worker (more than {START_S:g} s); the worker was killed"
            elif importing_at is not None and p.meta is None and now - importing_at > self.import_s:
                killed = (f"hung at import: importing measure.py took more than {self.import_s:g} s (the per-model "
                          f"budget plus {IMPORT_GRACE_S:g} s); the worker was killed")
            elif since is not None and budget is not None:
                hang_s = budget + max(HANG_GRACE_S, budget)
                if now - since > hang_s:
                    killed = (f"hung: one call of {self.entry} ran for more than {hang_s:g} s (its per-model budget "
                              f"is {budget:g} s) while {current}; the worker was killed: {BUDGET_FIX}")
            if killed is None and self.memory.kind == "rlimit" and polls % 5 == 0:  # a cgroup's limit is the kernel's
                pids = _tree(self.proc.pid)
                rss, files = _rss_bytes(pids), _memory_files_bytes(pids) if self.sandboxed else 0
                if rss + files > self.memory.limit_bytes:
                    killed = (f"exceeded the memory cap of {self.memory.limit_bytes / 2**30:g} GB (resident "
                              f"{rss / 2**30:.2f} GB, files in memory {files / 2**30:.2f} GB) while {current}; the "
                              "worker was killed")
            if killed:
                self._give_up(killed)
                return
