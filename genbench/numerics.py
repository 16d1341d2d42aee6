"""CPU floating-point settings pinned so that a zoo build (and a measure's values) are bit-identical on any x86-64
machine with AVX2, not only on one with the builder's CPU.

PyTorch picks its kernels by the CPU it finds (ATen's AVX-512 or AVX2 set; MKL's and oneDNN's code paths per
microarchitecture), and each choice sums in a different order: built with this machine's defaults and with AVX2 kernels,
the same 24 models differ in every checkpoint (benchmarks/reproducibility.py). Pinning the kernel sets to AVX2 makes
the CPU's own choice irrelevant; builds, records and their verification also run with a fixed thread count
(build_threads, pinned_threads). The variables only take effect before torch runs its first operation, so genbench
sets them when it is imported; a value the user set wins, and GENBENCH_NATIVE_NUMERICS=1 keeps the machine's
defaults. At the same moment it sets OpenMP's passive wait policy when other processes hold the cores it needs, or
on request (share_cores_when_waiting), which changes no sum but keeps waiting threads off cores another process
needs."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PINNED = {
    "ATEN_CPU_CAPABILITY": "avx2",   # ATen's vectorised kernels (default: the best the CPU has, e.g. avx512)
    "MKL_CBWR": "AVX2,STRICT",       # MKL's conditional numerical reproducibility: one code path, thread-count free
    "ONEDNN_MAX_CPU_ISA": "AVX2",    # oneDNN (convolutions): no AVX-512 / AMX kernels
}


def build_threads() -> int:
    """Torch threads a zoo build trains with: fixed (GENBENCH_BUILD_THREADS, default 2), because ATen's parallel
    reductions split by thread count and a build with another count differs in some checkpoints."""
    raw = os.environ.get("GENBENCH_BUILD_THREADS", "2")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from .errors import GenbenchError
        raise GenbenchError(f"GENBENCH_BUILD_THREADS must be a whole number >= 1, got {raw!r}")
    return n


@contextmanager
def pinned_threads() -> Iterator[None]:
    """Torch's and the BLAS libraries' threads fixed at build_threads() for the block (a decorator too): builds,
    records and their verification, so a record made on a 2-core machine is re-made with the same float sums on
    a 16-core one (a regression on 20 correlated signature columns turned a different thread count's rounding into
    differences of 2e-5 in its CMI)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(build_threads())
    try:
        with threadpool_limits(limits=build_threads()):
            yield
    finally:
        torch.set_num_threads(before)


def pin_cpu_numerics() -> None:
    """Set the PINNED variables the user has not set (nothing with GENBENCH_NATIVE_NUMERICS=1), and OpenMP's
    passive wait policy on a busy machine or when asked (share_cores_when_waiting)."""
    share_cores_when_waiting()
    if os.environ.get("GENBENCH_NATIVE_NUMERICS"):
        return
    for k, v in PINNED.items():
        os.environ.setdefault(k, v)


WAIT_POLICIES = ("auto", "passive", "active")  # GENBENCH_OMP_WAIT_POLICY: what share_cores_when_waiting does


def others_running(*, samples: int = 9, spacing_s: float = 0.002, stat: str = "/proc/stat") -> int | None:
    """How many threads other than this one are running or ready to run, the median of `samples` reads of Linux's
    procs_running (an instant count, so one read can catch a short-lived process); None where it cannot be read."""
    import statistics
    import time

    counts = []
    for i in range(samples):
        try:
            with open(stat) as f:
                line = next((ln for ln in f if ln.startswith("procs_running ")), None)
        except OSError:
            return None
        if line is None:
            return None
        counts.append(int(line.split()[1]) - 1)  # this thread, reading, is one of them
        if i + 1 < samples:
            time.sleep(spacing_s)
    return int(statistics.median(counts))


def cores_taken(others: int | None) -> bool:
    """Whether the other running threads leave this process fewer free cores than the threads it computes with."""
    if others is None:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    from .errors import GenbenchError
    try:
        threads = build_threads()
    except GenbenchError:  # a bad GENBENCH_BUILD_THREADS is reported where a build reads it, not at import
        return False
    return cores - others < threads


def share_cores_when_waiting(others: Callable[[], int | None] = others_running) -> None:
    """Set OpenMP's passive wait policy (OMP_WAIT_POLICY=PASSIVE: torch's OpenMP threads that wait at a barrier
    sleep instead of spinning) when GENBENCH_OMP_WAIT_POLICY says so: `passive` always, `active` never (OpenMP's own
    default), `auto` (the default) when, at import, other running threads leave fewer free cores than genbench's
    threads (`others`: how it counts them). Beside another busy torch job a build + evaluate ran 1.3x slower than
    idle under PASSIVE instead of 7.3x (benchmarks/contention.py), but on an idle machine PASSIVE made the margin
    and sharpness measures 2.1x slower (a sleeping thread wakes late for their many small parallel loops): hence the
    choice at start. The sums, and so the bits, are the same under both. A policy of the user's own wins."""
    if "OMP_WAIT_POLICY" in os.environ:
        return
    choice = os.environ.get("GENBENCH_OMP_WAIT_POLICY", "auto").strip().lower() or "auto"
    if choice not in WAIT_POLICIES:
        import warnings
        warnings.warn(f"GENBENCH_OMP_WAIT_POLICY={choice!r} is not one of {WAIT_POLICIES}; using 'auto'",
                      stacklevel=2)
        choice = "auto"
    if choice == "passive" or (choice == "auto" and cores_taken(others())):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def cpu_numerics() -> dict[str, Any]:
    """What a build ran under, for its manifest: the variables, the ATen kernel set in use and the thread count."""
    import torch
    return {**{k: os.environ.get(k) for k in PINNED}, "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads()}
