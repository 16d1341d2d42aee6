"""Publish a folder of leaderboard result records as a Hub dataset repo."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import GenbenchError
from ..version import __version__
from ..zoo.hub import Pushed, parse_repo, upload_files


def push_results(folder: str | Path, repo: str, *, private: bool = False, api: Any = None) -> Pushed:
    """Publish a folder of leaderboard result records (JSON files, sub-folders kept) as a Hub dataset repo."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise GenbenchError(f"{root} is not a folder of result records (e.g. leaderboard/results)")
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json")
                   if not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise GenbenchError(f"{root} holds no result records (*.json); run `genbench submit` first")
    for rel in files:
        try:
            record = json.loads((root / rel).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise GenbenchError(f"result record {root / rel} is not valid JSON ({e}); fix or remove it") from None
        if not isinstance(record, dict):
            raise GenbenchError(f"result record {root / rel} holds a {type(record).__name__}, not a JSON object")
    return upload_files(root, parse_repo(repo), files, private=private, api=api, replace="*.json",
                        message=f"genbench {__version__}: {len(files)} result record(s)")
