"""Start-up time of the `genbench` command relative to a bare Python interpreter.

Times, each in a fresh process: `python -c pass` (the interpreter alone, the unit), `genbench --help`, and
`genbench leaderboard --format markdown` on the shipped records (leaderboard/results), with
`python -c "import torch"` for context (what every command cost before the imports were made lazy). Each
round runs all of them once, in turn, so a load change on a shared machine hits every command of a round alike;
each ratio is the median of the per-round ratios to `python -c pass`. Print the machine's load (`uptime`) with
the numbers: on a busy machine every command is slower, the ratios less so.
Usage: python benchmarks/cli_startup.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def genbench_command() -> list[str]:
    """The installed `genbench` script beside this interpreter, else `python -m genbench`."""
    script = Path(sys.executable).parent / "genbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "genbench"]


def seconds(cmd: list[str]) -> float:
    """Wall-clock seconds of one run of `cmd` (its output discarded; a failure stops the benchmark)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    gb = genbench_command()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "genbench --help": [*gb, "--help"],
        "genbench leaderboard --format markdown": [*gb, "leaderboard", "--results", str(REPO / "leaderboard" / "results"),
                                                   "--format", "markdown"],
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
    }
    for cmd in commands.values():  # warm the file cache (and .pyc files) before timing
        seconds(cmd)
    times = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, cmd in commands.items():
            times[name].append(seconds(cmd))
    base = np.array(times["python -c pass"])
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"{args.rounds} rounds, each command once per round in turn; load average (1, 5, 15 min) "
          + (", ".join(f"{x:.2f}" for x in load) if load else "unknown") + f" on {os.cpu_count()} cores; "
          f"genbench = {' '.join(gb)}")
    for name, t in times.items():
        ratio = np.median(np.array(t) / base)
        print(f"  {name:40s} {np.median(t) * 1e3:8.0f} ms   {ratio:6.1f}x python -c pass")


if __name__ == "__main__":
    main()
