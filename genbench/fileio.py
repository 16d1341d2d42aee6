"""Atomic writes and content hashes: nothing half-written is ever read, every file can be checked."""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_capped(path: str | Path, limit: int, *, what: str = "file", dir_fd: int | None = None,
                shown: str | Path | None = None) -> bytes:
    """The bytes of a file someone else wrote (a submission's, a record), read only when it is a regular file (not a
    symbolic link, a pipe or a device) of at most `limit` bytes; else a GenbenchError saying which, never quoting
    the file. `dir_fd`: read `path` relative to this open folder; `shown`: the path the messages name."""
    from .errors import GenbenchError
    name = path if shown is None else shown
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise GenbenchError(f"{what} {name} is a symbolic link; genbench reads no file through a link: put the "
                                "file itself there") from None
        raise GenbenchError(f"cannot read {what} {name}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a folder, pipe or device (fdopen refuses a folder with its own error)
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise GenbenchError(f"{what} {name} is {kind}; genbench reads only regular files there")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1) if st.st_size <= limit else b""
        if st.st_size > limit or len(data) > limit:
            raise GenbenchError(f"{what} {name} is larger than {limit:,} bytes ({max(st.st_size, len(data)):,}); "
                                "genbench reads at most that much of it")
    return data


def _proc_umask() -> int | None:
    """The process's umask as Linux says it (/proc), read without changing it; None where it does not."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


_UMASK_AT_IMPORT = _proc_umask()
if _UMASK_AT_IMPORT is None:  # where /proc does not say it: set and put back once, here (it races with threads)
    _UMASK_AT_IMPORT = os.umask(0o022)
    os.umask(_UMASK_AT_IMPORT)


def _umask() -> int:
    """The umask now where /proc says it, else the one read at import."""
    now = _proc_umask()
    return _UMASK_AT_IMPORT if now is None else now


def _no_space(e: BaseException) -> bool:
    """Whether a write failed for want of space (an OSError, or a library's own error quoting os error 28)."""
    return (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)) or \
        "No space left on device" in str(e) or "Disk quota exceeded" in str(e)


def atomic_write(path: str | Path, write: Callable[[Path], None], *, mode: int | None = None) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it into place. The file gets `mode`, by
    default the one a plain write would give it (an existing file's own, else 0666 less the umask: a shared zoo or
    results folder stays readable), not mkstemp's or safetensors' 0600, which it keeps while it is written; a write
    that finds no space left is one GenbenchError naming the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)  # after the write: a umask without the owner's write bit must not stop it
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if _no_space(e):
            from .errors import GenbenchError
            raise GenbenchError(f"no space left on the device to write {path}: free some space (or write to another "
                                "folder: --out, GENBENCH_HOME) and run the same command again; what was finished is "
                                "kept") from None
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text))


def json_safe(x: Any) -> Any:
    """A strict-JSON copy: NaN/inf as None, numpy arrays and scalars and tuples as plain values."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json_atomic(path: str | Path, obj: Any) -> Path:
    """Write `obj` as indented JSON to `path` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
