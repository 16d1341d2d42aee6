"""The compute kernels of a piece of torch work, recorded and run again alone: the ceiling of batching it.

`Kernels` records every matrix product and convolution (forward and backward) a block calls, with the shapes,
strides and arguments it calls them with, and the seconds they took there (`seconds`: timed in place, on the
activations the pass had just written, the time they would still take if everything around them were free);
`replayer` runs them again on fresh tensors (one step, all at once); `kernel_seconds` times each distinct call once
per repeat and sums over how often it was made (a whole search: thousands of calls, too many to hold fresh tensors
for at once). Replayed alone, a call reads inputs in another state of the caches than in the pass: fresh tensors
come from memory, a call repeated on the same tensors finds them in cache (0.7x its time in place for a search's
16 MB activations); for a training step the two measured within 15% of each other, either way. Used by
train_anatomy.py and catalogue.py.
"""
from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

KERNELS = {torch.ops.aten.bmm, torch.ops.aten.baddbmm, torch.ops.aten.mm, torch.ops.aten.addmm,
           torch.ops.aten.convolution, torch.ops.aten.convolution_backward}  # every overload (out= included)


def _meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ("T", tuple(a.shape), a.stride(), a.dtype)
    return tuple(_meta(x) for x in a) if isinstance(a, (list, tuple)) else a


class Kernels(TorchDispatchMode):
    """Every compute kernel called in the block (this thread): the op, and its arguments with tensors as
    (shape, stride, dtype); `seconds`: the time they took, summed (the CPU runs each op to its end before
    returning; on CUDA only the launches would be timed)."""

    def __init__(self):
        super().__init__()
        self.calls: list = []
        self.seconds = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket not in KERNELS:
            return func(*args, **(kwargs or {}))
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds += time.perf_counter() - start
        self.calls.append((func, tuple(_meta(a) for a in args),
                           tuple(sorted((k, _meta(v)) for k, v in (kwargs or {}).items()))))
        return out


def _fresh(a: Any) -> Any:
    if isinstance(a, tuple) and a and a[0] == "T":
        _, shape, stride, dtype = a
        return torch.empty_strided(shape, stride, dtype=dtype).normal_()
    return list(_fresh(x) for x in a) if isinstance(a, tuple) else a


def replayer(calls: list) -> Callable[[], None]:
    """A function that runs the recorded kernels again on fresh tensors of the same layout."""
    ready = [(f, [_fresh(a) for a in args], {k: _fresh(v) for k, v in kw}) for f, args, kw in calls]

    def run() -> None:
        for f, args, kw in ready:
            f(*args, **kw)
    return run


def kernel_seconds(calls: list, repeats: int = 5) -> float:
    """Seconds the recorded kernels take alone: each distinct call timed (median of `repeats`, after a warm-up)
    times how often it was made."""
    total = 0.0
    for call, count in Counter(calls).items():
        run = replayer([call])
        run()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        total += statistics.median(times) * count
    return total
