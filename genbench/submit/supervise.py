"""The parent's side of `genbench submit`: start the worker in its own process group, read its output and
events, kill it (and whatever it started) on a timeout, a hung measure call or too much memory, and say why
it ended without a record."""
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

from .events import EVENT, read_event

WORKER_MODULE = "genbench.submit.worker"
LINE_LIMIT = 1 << 16  # bytes of worker output read as one line at most
HANG_GRACE_S = 10.0  # a single measure call may run budget_s + max(HANG_GRACE_S, budget_s) before it counts as hung


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
            ev = read_event(line)
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


def run_worker(job_file: Path, *, entry: str, budget_s: float | None, memory_gb: float, timeout_s: float,
               echo: Callable[[str, str], None]) -> tuple[str, float]:
    """Run the worker on `job_file` under the limits, passing its progress and output to `echo(text, kind)`;
    return why it ended without writing a record (if it did not) and the seconds it ran."""
    hang_s = None if budget_s is None else budget_s + max(HANG_GRACE_S, budget_s)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-u", "-m", WORKER_MODULE, str(job_file)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    child = _Child()
    pump = threading.Thread(target=_pump, args=(proc.stdout, child, echo), daemon=True)
    pump.start()
    try:
        killed = _watch(proc, child, start=start, timeout_s=timeout_s, hang_s=hang_s, budget_s=budget_s,
                        memory_gb=memory_gb, entry=entry)
    finally:  # Ctrl-C or any error here must not leave the worker, or anything it started, running
        _kill_group(proc)
        proc.wait()
        pump.join(timeout=5)
    seconds = time.monotonic() - start
    return killed or _crash_reason(proc.returncode, child, memory_gb), seconds
