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
