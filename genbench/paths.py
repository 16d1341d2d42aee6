"""Where genbench keeps what it builds: $GENBENCH_HOME (default ~/.cache/genbench)."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from .defaults import SHIPPED_RESULTS
from .errors import GenbenchError

PACKAGE = Path(__file__).resolve().parent  # the genbench package; its parent is the checkout, when run from one
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
PLAIN_NAME_RULE = "letters, digits, '.', '_' and '-', not starting with a dot, at most 200 characters"


def is_plain_name(value: Any) -> bool:
    """Whether `value` is a plain file name: a string of letters, digits, '.', '_' and '-' that does not start with
    a dot (so never '', '.', '..', a hidden file, or anything with a path separator)."""
    return isinstance(value, str) and _PLAIN_NAME.fullmatch(value) is not None


def plain_name(value: Any, *, what: str, source: str) -> str:
    """`value` when it is a plain file name (`is_plain_name`); otherwise a GenbenchError naming the value, what it
    is and where it came from. Every name read from a file (a zoo's manifest, a record) passes here before it
    becomes part of a path."""
    if not is_plain_name(value):
        raise GenbenchError(f"{what} {value!r} (from {source}) is not a plain file name ({PLAIN_NAME_RULE}); "
                            "genbench refuses to use it in a path")
    return value


def genbench_home() -> Path:
    """Root of the local cache; zoos built locally live in its zoos/ folder."""
    return Path(os.environ.get("GENBENCH_HOME", Path.home() / ".cache" / "genbench")).expanduser()


def zoos_dir() -> Path:
    """Folder holding locally built zoos, one sub-folder per zoo name."""
    return genbench_home() / "zoos"


def values_cache_dir() -> Path:
    """Folder of cached measure values, keyed by measure, version, source hash and checkpoint sha256."""
    return genbench_home() / "cache" / "values"


def values_dir() -> Path:
    """Folder of evaluated value tables, one parquet file per zoo."""
    return genbench_home() / "values"


def values_path(zoo_name: str, *, source: str = "the zoo's manifest (zoo.json)") -> Path:
    """Default place of a zoo's value table: $GENBENCH_HOME/values/<zoo>.parquet; a zoo name that is not a plain file
    name (`plain_name`) is refused."""
    return values_dir() / f"{plain_name(zoo_name, what='zoo name', source=source)}.parquet"


def results_dir() -> Path:
    """The user's own result records, <zoo>/<entry>.json (`genbench submit`, `genbench leaderboard run`): local and
    unverified until `genbench leaderboard add` verifies them into the shipped folder."""
    return genbench_home() / "results"


def shipped_results_dir() -> Path | None:
    """The repository's folder of verified result records, when genbench runs from a checkout (leaderboard/results
    beside the package); None for an installed package, which ships no records."""
    root = PACKAGE.parent
    folder = root / SHIPPED_RESULTS
    return folder if folder.is_dir() and (root / "pyproject.toml").is_file() else None


def check_file_out(flag: str, path: Path | None, example: str) -> None:
    """Refuse, before any work, a file a command will write (`flag` names the option) where a folder stands, or in a
    folder that cannot be written (check_writable)."""
    if path is None:
        return
    path = Path(path).expanduser()
    if path.is_dir():
        raise GenbenchError(f"{flag} {path} is a folder; name a file to write, e.g. {path / example}")
    check_writable(path.parent)


def check_writable(*folders: Path | None) -> None:
    """Refuse, in one line and before any work, a folder a command will write to that cannot be written: the first
    part of its path that exists is a file, or a folder that is not writable. `folders` (None: $GENBENCH_HOME) are
    not created here, so a command never computes for an hour and then fails to save, and a refusal leaves nothing."""
    for folder in folders or (None,):
        path = Path(folder).expanduser() if folder is not None else genbench_home()
        what = "GENBENCH_HOME" if folder is None else "the folder"
        fix = ("set GENBENCH_HOME to a folder you can write to" if folder is None
               else "name a folder you can write to")
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        if existing is None:
            continue
        if not existing.is_dir():
            raise GenbenchError(f"{what} {path} cannot be written: {existing} is a file, not a folder; {fix}")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise GenbenchError(f"{what} {path} cannot be written: {existing} is not writable; {fix}")
        try:  # os.access says yes to root everywhere, and knows nothing of /proc-like or full file systems
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as e:
            raise GenbenchError(f"{what} {path} cannot be written: {existing} does not take a new file "
                                f"({e.strerror or e}); {fix}") from None
