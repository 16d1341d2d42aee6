"""The worker's own cap on the memory the submitted code may allocate (a first line inside the sandbox, whose
memory limit covers all its processes), and the wording of out-of-memory failures."""
from __future__ import annotations

import resource

_MEMORY_MARKS = ("MemoryError", "can't allocate memory", "DefaultCPUAllocator", "out of memory",
                 "Cannot allocate memory", "No space left on device")


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


def memory_note(message: str, limit_bytes: int) -> str:
    """Prefix an error message with the memory cap when it is an out-of-memory error."""
    if any(mark in message for mark in _MEMORY_MARKS):
        return f"exceeded the memory cap of {limit_bytes / 2**30:g} GB: {message}"
    return message
