"""Throughput of a build and an evaluation when the machine is shared: the same small job idle and beside one
competing busy process (`--hog python`: a pure-Python loop holding one core; `--hog torch`, the default: another
torch job, small matrix products on torch's default threads under OpenMP's default policy, as a second build or a
test run would be), under each GENBENCH_OMP_WAIT_POLICY (genbench/numerics.py): `active` (OpenMP's own default:
waiting threads spin, then sleep), `passive` (OMP_WAIT_POLICY=PASSIVE: they sleep at once) and `auto`, genbench's
default, which picks passive only when, as genbench is imported, other processes hold the cores it needs. Each job
is a fresh `genbench` process (the policy is read when torch loads its OpenMP runtime): a build of the first
`--models` models of mnist1d-demogen at `--epochs` epochs, then `genbench evaluate` of three built-ins on it (a
margin and a sharpness search among them: their many small parallel loops are what passive slows on an idle
machine). Rounds alternate the order of the settings; each printed figure is the median over rounds, and the
slowdown is contended / idle within a round. With two cores and one of them taken, a job that shares fairly runs
about 2x slower; spinning threads that wait for a core they do not get make it much slower.
Usage: python benchmarks/contention.py [--models 16] [--epochs 10] [--rounds 2] [--hog torch|python]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOGS = {"python": "while True: pass",
        "torch": "import torch\na = torch.randn(192, 192)\nwhile True:\n    a = torch.tanh(a @ a)"}
POLICIES = ("active", "passive", "auto")  # GENBENCH_OMP_WAIT_POLICY; auto is genbench's default


def job(models: int, epochs: int, policy: str, home: Path) -> float:
    """Seconds of one build + evaluate in fresh processes under GENBENCH_OMP_WAIT_POLICY=`policy`."""
    env = {**os.environ, "GENBENCH_HOME": str(home), "GENBENCH_OMP_WAIT_POLICY": policy}
    env.pop("OMP_WAIT_POLICY", None)  # else it wins over genbench's choice
    out = home / "zoo"
    shutil.rmtree(out, ignore_errors=True)
    genbench = [sys.executable, "-m", "genbench"]
    start = time.perf_counter()
    for cmd in ([*genbench, "zoo", "build", "mnist1d-demogen", "--limit", str(models), "--set",
                 f"train.epochs={epochs}", "--out", str(out)],
                [*genbench, "evaluate", "norm.path", "margin.qrt_log", "sharpness.orig", "--zoo", str(out),
                 "--no-cache"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hog", choices=tuple(HOGS), default="torch", help="the competing busy process")
    args = parser.parse_args()
    hog_env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    times: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        job(args.models, 1, "passive", Path(tmp))  # warm-up: the dataset is generated and cached once
        for r in range(args.rounds):
            settings = [(name, busy) for name in POLICIES for busy in (False, True)]
            for name, busy in (settings if r % 2 == 0 else settings[::-1]):
                hog = subprocess.Popen([sys.executable, "-c", HOGS[args.hog]], env=hog_env) if busy else None
                try:
                    if hog is not None:
                        time.sleep(1.0)  # running before genbench is imported, as a job already there would be
                    times.setdefault((name, busy), []).append(job(args.models, args.epochs, name, Path(tmp)))
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
    print(f"build of {args.models} mnist1d-demogen models x {args.epochs} epochs + evaluate of 3 built-ins, "
          f"{os.cpu_count()} CPUs, medians of {args.rounds} rounds, competing process: {args.hog}")
    for name in POLICIES:
        idle, busy = times[(name, False)], times[(name, True)]
        slow = [b / i for i, b in zip(idle, busy)]
        print(f"  GENBENCH_OMP_WAIT_POLICY={name}: idle {statistics.median(idle):.1f} s, beside one busy process "
              f"{statistics.median(busy):.1f} s, slowdown {statistics.median(slow):.2f}x "
              f"(range {min(slow):.2f}-{max(slow):.2f}; a fair share of the cores is about 2x)")


if __name__ == "__main__":
    main()
