"""On-disk cache of measure values: one small JSON file per (measure, version, source hash, seed,
checkpoint sha256), written atomically, so an interrupted evaluation resumes and a re-run is free."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..fileio import write_json_atomic
from ..measures.registry import Measure


class ValueCache:
    """Values of measures on checkpoints, addressed by content (no model ids, no zoo names)."""

    def __init__(self, root: str | Path | None):
        self.root = None if root is None else Path(root)

    def _path(self, m: Measure, checkpoint_sha: str, seed: int) -> Path:
        assert self.root is not None
        key = f"v{m.version}-{m.source_hash[:16]}-seed{seed}"
        return self.root / m.name / key / checkpoint_sha[:2] / f"{checkpoint_sha}.json"

    def get(self, m: Measure, checkpoint_sha: str, seed: int) -> dict[str, Any] | None:
        """The cached entry {"value", "error", "seconds"}, or None (also for a damaged file)."""
        if self.root is None:
            return None
        p = self._path(m, checkpoint_sha, seed)
        try:
            return json.loads(p.read_text()) if p.is_file() else None
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, m: Measure, checkpoint_sha: str, seed: int, entry: dict[str, Any]) -> None:
        if self.root is not None:
            write_json_atomic(self._path(m, checkpoint_sha, seed), entry)
