"""Device choice: cuda when present, the CPU otherwise; a clear error for a device that is not there."""
from __future__ import annotations

import torch

from .errors import GenbenchError


def resolve_device(device: str | None = None) -> str:
    """Return the device to run on: `device` if usable, else cuda when available, else cpu."""
    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise GenbenchError(f"device takes a name (cpu, cuda or cuda:N; None: cuda when present), got "
                            f"{type(device).__name__} {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GenbenchError(f"device {device!r} was requested but no CUDA GPU is available here; "
                            "leave --device out (or pass --device cpu) to run on the CPU")
    try:
        torch.device(device)
    except RuntimeError:
        raise GenbenchError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    return device
