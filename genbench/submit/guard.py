"""The worker's guards around submitted code: a cap on the memory it may allocate and a refusal (counted) of
every read of a zoo's test set while it runs."""
from __future__ import annotations

import functools
import resource
import sys
from pathlib import Path
from typing import Any

from .events import emit

_MEMORY_MARKS = ("MemoryError", "can't allocate memory", "DefaultCPUAllocator", "out of memory",
                 "Cannot allocate memory")


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


class GuardTestData:
    """While a submitted measure runs, any read of a zoo's test set is refused and counted."""

    def __init__(self) -> None:
        self.active = 0
        self.reads: list[str] = []

    def refuse(self, what: str) -> None:
        """Count a read of `what` made from inside the measure and refuse it."""
        if self.active:
            self.reads.append(what)
            raise PermissionError(f"measures may not read test data ({what})")

    def install(self) -> None:
        """Guard Zoo.test_data, the test tensors of every dataset pool, and Python-level opens of a zoo's
        embedded dataset file, in this process."""
        from ..zoo.data import Pool
        from ..zoo.storage import DATASET, Zoo
        guard = self

        def audit(event: str, args: tuple[Any, ...]) -> None:
            if guard.active and event == "open" and args and Path(str(args[0])).name == DATASET:
                guard.refuse(f"open({DATASET}), the zoo's file holding its test set")

        sys.addaudithook(audit)
        plain_test_data = Zoo.test_data

        def test_data(zoo: Any, model_id: str) -> Any:
            guard.refuse("Zoo.test_data")
            return plain_test_data(zoo, model_id)

        Zoo.test_data = test_data  # type: ignore[method-assign]
        for name in ("x_test", "y_test"):
            slot = f"_guarded_{name}"

            def get(pool: Any, _slot: str = slot, _name: str = name) -> Any:
                guard.refuse(f"Pool.{_name}")
                return pool.__dict__[_slot] if _slot in pool.__dict__ else pool.__dict__[_name]

            def put(pool: Any, value: Any, _slot: str = slot) -> None:
                pool.__dict__[_slot] = value

            setattr(Pool, name, property(get, put))

    def wrap(self, fn: Any) -> Any:
        """The measure function, announcing each call to the parent and guarded while it runs."""
        @functools.wraps(fn)
        def guarded(ctx: Any) -> Any:
            emit(call="start")
            self.active += 1
            try:
                return fn(ctx)
            finally:
                self.active -= 1
                emit(call="end")
        return guarded


def memory_note(message: str, limit_bytes: int) -> str:
    """Prefix an error message with the memory cap when it is an out-of-memory error."""
    if any(mark in message for mark in _MEMORY_MARKS):
        return f"exceeded the memory cap of {limit_bytes / 2**30:g} GB: {message}"
    return message
