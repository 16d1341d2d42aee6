"""glibc malloc settings for genbench's own processes: keep freed memory for reuse.

Each batch of a measure or of training frees and re-allocates the same activation-sized blocks. By
default glibc hands large freed blocks back to the OS and the next batch page-faults them in again; on
the 2-core VM this project is measured on, that made the margin pass 20-40% slower and its timings far
noisier (benchmarks/margins.py prints both settings). The `genbench` command applies this at start-up;
set GENBENCH_SYSTEM_MALLOC=1, or any MALLOC_* / GLIBC_TUNABLES variable of your own, to keep the defaults.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD = 1 << 30   # keep up to 1 GiB of free memory at the top of the heap (never above the peak)
MMAP_THRESHOLD = 32 << 20  # blocks below 32 MiB (glibc's largest allowed value) come from the heap


def keep_freed_memory() -> bool:
    """Raise glibc's trim and mmap thresholds so freed blocks are reused; True when applied."""
    if not sys.platform.startswith("linux") or os.environ.get("GENBENCH_SYSTEM_MALLOC"):
        return False
    if "GLIBC_TUNABLES" in os.environ or any(k.startswith("MALLOC_") for k in os.environ):
        return False  # the user tuned malloc already
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (e.g. musl)
        return False
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
