"""Where genbench keeps what it builds: $GENBENCH_HOME (default ~/.cache/genbench)."""
from __future__ import annotations

import os
from pathlib import Path

from .defaults import SHIPPED_RESULTS


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


def results_dir() -> Path:
    """The user's own result records, <zoo>/<entry>.json (`genbench submit`, `genbench leaderboard run`): local and
    unverified until `genbench leaderboard add` verifies them into the shipped folder."""
    return genbench_home() / "results"


def shipped_results_dir() -> Path | None:
    """The repository's folder of verified result records, when genbench runs from a checkout (leaderboard/results
    beside the package); None for an installed package, which ships no records."""
    root = Path(__file__).resolve().parent.parent
    folder = root / SHIPPED_RESULTS
    return folder if folder.is_dir() and (root / "pyproject.toml").is_file() else None
