"""An imported zoo is written into a hidden folder beside its destination and renamed into place only when complete,
so a failed import leaves nothing behind and a zoo folder is never half-written."""
from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import GenbenchError


def check_destination(root: Path) -> None:
    """Refuse to import over anything that already exists (a zoo is never overwritten or merged)."""
    if root.exists():
        raise GenbenchError(f"{root} already exists; pass another folder with --out (or another --name), or delete "
                            "it to import again")


@contextmanager
def staged_folder(root: Path) -> Iterator[Path]:
    """A fresh hidden folder beside `root` to write into; renamed to `root` when the block ends without error,
    deleted otherwise."""
    check_destination(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.parent / f".{root.name}.importing-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        check_destination(root)  # another process may have made it meanwhile
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
