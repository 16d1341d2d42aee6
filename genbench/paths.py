"""Where genbench keeps what it builds: $GENBENCH_HOME (default ~/.cache/genbench)."""
from __future__ import annotations

import os
from pathlib import Path


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
