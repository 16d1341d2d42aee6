"""The parent's side of `genbench submit`: start the worker (in the bubblewrap sandbox, or unsandboxed when the user
asked for it), show its output, read its result channel, and end it (with everything it started) on a timeout,
a hang at import or in a measure call, too much memory, or a message out of place; say why it ended early.

The clocks are the parent's own: the worker's start-up (Python, torch, genbench: trusted code) has START_S, the
import of measure.py its own budget, and each task its per-model budget plus a grace, counted from the arrival
of the previous result. Nothing the worker prints can stop a clock; a forged result is only a value."""
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

from .events import MAX_LINE, Protocol, ProtocolError
from .job import Task
from .sandbox import JOB_DIR, MemoryLimit, bwrap_argv, scratch_dir, scrubbed_env

WORKER_MODULE = "genbench.submit.worker"
LINE_LIMIT = 1 << 16  # bytes of worker output read as one line at most
HANG_GRACE_S = 10.0  # a single measure call may run budget_s + max(HANG_GRACE_S, budget_s) before it counts as hung
IMPORT_GRACE_S = 60.0  # importing measure.py may take the per-model budget plus this
START_S = 600.0  # starting Python, torch and genbench in the worker, before measure.py is imported
POLL_S = 0.05


@dataclass
class WorkerRun:
    """What came back from the worker: the channel's messages (checked), when each result arrived (the parent's
    clock), why the run ended early (None: it finished, or the parent stopped it), and how long it took."""

    protocol: Protocol
    arrivals: list[float] = field(default_factory=list)
    reason: str | None = None
    stopped: bool = False
    started: float = 0.0
    seconds: float = 0.0
    importing_at: float | None = None  # when the worker said it starts importing measure.py
    ready_at: float | None = None  # when the measure's metadata arrived (the first task's clock starts)


def _pump(stream: Any, tail: collections.deque, echo: Callable[[str, str], None]) -> None:
    """Show the worker's output line by line (never parsed: it is the submission's to print) and keep its tail."""
    for raw in iter(lambda: stream.readline(LINE_LIMIT), b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        try:
            echo(line, "output")
        except Exception:  # a broken console must not stop the reading, or the worker would block on a full pipe
            pass
    stream.close()


def _read_channel(fd: int, run: WorkerRun, lock: threading.Lock, problem: list[str]) -> None:
    """Feed the channel's lines to the protocol, noting when each result arrived; stop at the first bad one."""
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
                now = time.monotonic()
                if kind == "task":
                    run.arrivals.append(now)
                elif kind == "ready":
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
    """Why the worker ended without finishing: its exit status or signal, the stage, and its last output."""
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


def run_worker(job_file: Path, *, tasks: list[Task], entry: str, sandboxed: bool, submission: Path,
               budget_s: float | None, memory: MemoryLimit, timeout_s: float, device: str,
               echo: Callable[[str, str], None], on_result: Callable[[WorkerRun], bool] | None = None) -> WorkerRun:
    """Run the worker on `job_file` under the limits, passing its output and the run's stages to
    `echo(text, kind)`; `on_result(run)` hears of each result and may stop the run (return True)."""
    run = WorkerRun(Protocol(len(tasks)))
    lock, problem = threading.Lock(), []
    tail: collections.deque = collections.deque(maxlen=30)
    read_fd, write_fd = os.pipe()
    home = str(scratch_dir("home"))
    python = [sys.executable, "-u", "-m", WORKER_MODULE]
    if sandboxed:
        argv = bwrap_argv(job_dir=job_file.parent, submission=submission, tmp_bytes=memory.limit_bytes,
                          cuda=device.startswith("cuda"))
        argv = [*argv, *python, f"{JOB_DIR}/{job_file.name}", str(write_fd)]
        env = scrubbed_env("/tmp")
    else:
        argv = [*python, str(job_file), str(write_fd)]
        env = scrubbed_env(home)
    import_s = (budget_s or 0.0) + IMPORT_GRACE_S
    run.started = start = time.monotonic()
    try:
        proc = subprocess.Popen(memory.wrap(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, cwd=home, pass_fds=(write_fd,),
                                start_new_session=True)
    finally:
        os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(proc.stdout, tail, echo), daemon=True)
    reader = threading.Thread(target=_read_channel, args=(read_fd, run, lock, problem), daemon=True)
    pump.start()
    reader.start()
    cap, polls, seen, shown_stage = memory.limit_bytes, 0, 0, None

    def stage() -> str:
        p = run.protocol
        if not p.importing:
            return "starting the worker"
        if p.meta is None:
            return "importing measure.py"
        n = len(p.results)
        return tasks[n].where if n < len(tasks) else "finishing"

    try:
        while True:
            time.sleep(POLL_S)
            polls += 1
            now = time.monotonic()
            with lock:
                p = run.protocol
                finished = p.done or p.failed is not None
                n = len(p.results)
                current = stage()
                last = run.arrivals[-1] if run.arrivals else run.ready_at
                importing_at = run.importing_at
            if current != shown_stage and not finished:
                shown_stage = current
                echo(current, "stage")
            if problem:
                run.reason = (f"broke the result protocol while {current}: {problem[0]}; only genbench's worker "
                              "writes to the result channel, so the submission tampered with it")
                break
            if finished:
                break
            if n > seen:
                seen = n
                if on_result is not None and on_result(run):
                    run.stopped = True
                    break
            if proc.poll() is not None:
                reader.join(timeout=5)  # the last messages may still be in the pipe
                with lock:
                    finished = run.protocol.done or run.protocol.failed is not None
                if not finished and not problem:
                    oom = memory.oom_kills() > 0
                    run.reason = _crash_reason(proc.returncode, stage(), tail, memory, oom, sandboxed)
                elif problem:
                    continue  # reported on the next turn
                break
            killed = None
            if now - start > timeout_s:
                killed = (f"timed out: the submission ran past its wall-clock limit of {timeout_s:g} s while "
                          f"{current}; the worker was killed")
            elif importing_at is None and now - start > START_S:
                killed = f"timed out while starting the worker (more than {START_S:g} s); the worker was killed"
            elif importing_at is not None and p.meta is None and now - importing_at > import_s:
                killed = (f"hung at import: importing measure.py took more than {import_s:g} s (the per-model budget "
                          f"plus {IMPORT_GRACE_S:g} s); the worker was killed")
            elif last is not None and n < len(tasks) and tasks[n].budget_s is not None:
                b = tasks[n].budget_s
                hang_s = b + max(HANG_GRACE_S, b)
                if now - last > hang_s:
                    killed = (f"hung: one call of {entry} ran for more than {hang_s:g} s (its per-model budget is "
                              f"{b:g} s) while {current}; the worker was killed")
            if killed is None and memory.kind == "rlimit" and polls % 5 == 0:  # a cgroup's limit is the kernel's
                rss = _rss_bytes(_tree(proc.pid))
                if rss > cap:
                    killed = (f"exceeded the memory cap of {cap / 2**30:g} GB (resident {rss / 2**30:.2f} GB) while "
                              f"{current}; the worker was killed")
            if killed:
                run.reason = killed
                break
    finally:  # Ctrl-C or any error here must not leave the worker, or anything it started, running
        if proc.poll() is None and run.protocol.done:
            try:
                proc.wait(timeout=10)  # it is exiting by itself
            except subprocess.TimeoutExpired:
                pass
        _kill(proc, memory)
        proc.wait()
        pump.join(timeout=5)
        reader.join(timeout=5)
        import shutil
        shutil.rmtree(home, ignore_errors=True)
    run.seconds = time.monotonic() - start
    return run
