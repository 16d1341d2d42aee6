"""Private scores (issue 43): a record's entry re-run on the private training of its zoo's grid (a submission in its
sandbox, exactly as `leaderboard add` re-runs it; a built-in here), scored, and kept in the record as a `private`
block of aggregate scores only: no per-model value, no model id, no table hash beyond a salted commitment.

    "private": {"zoo": "GRID-private", "commitment": sha256(salt + table hash), "status": "ok" | "failed",
                "scores": {"values": {...}, "intervals": {...}, "refused": {...}}, "n": models, "date": ...}

private_standing() sets a record's private k-fold R^2 beside its public one and flags an entry whose private score
falls below its public one by more than the training noise: what a measure that looks its answers up (or was tuned
on the public zoos) cannot hide."""
from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..defaults import training_of
from ..errors import GenbenchError
from ..fileio import json_safe, write_json_atomic
from ..leaderboard.verdict import TRAINING_NOISE_R2, private_standing
from ..record import PRIVATE, Record, finite as _finite, private_block, private_score, read_record
from ..text import excerpt

BLOCK_KEYS = ("zoo", "commitment", "status", "scores", "n", "date")  # all a private block may hold
SCORE_PARTS = ("values", "intervals", "refused")  # the parts of the scores block kept: aggregates only


def private_zoo_of(record: Mapping[str, Any]) -> tuple[Any, str | None]:
    """(the built private zoo of the record's grid, None), or (None, why not: the command that builds it)."""
    from ..zoo.private import private_name, private_zoo_dir
    from ..zoo.storage import MANIFEST, Zoo
    grid, _ = training_of(Record.of(record).zoo_name)
    root = private_zoo_dir(grid)
    build = f"`genbench zoo build {grid} --private`"
    if not (root / MANIFEST).is_file():
        return None, f"the private training of {grid} is not built here: build it with {build}"
    zoo = Zoo(root)
    if not zoo.complete:
        return None, (f"{private_name(grid)} is partial ({len(zoo)} of {zoo.expected_models} models): finish it "
                      f"with {build}")
    return zoo, None


def private_scores(record: Mapping[str, Any], *, secret: Any = None, submissions: str | Path | None = None,
                   device: str | None = None, limits: Any = None) -> dict[str, Any]:
    """The private block of a record: its entry re-run without cache or audit on the private training of its grid
    (a submission in the sandbox, from the trusted `submissions` folder, under the record's settings bounded by
    `limits`, as verify re-runs it) and scored. A GenbenchError says why it cannot be made (no secret, the private
    zoo not built, a failed, external or baseline record)."""
    from ..zoo.private import load_secret, private_name
    from .verify import is_submission, trusted_settings
    rec = Record.of(record)
    secret = secret if secret is not None else load_secret()
    if rec.external or rec.baseline or not rec.ok:
        what = "an external value table's" if rec.external else "a baseline row's" if rec.baseline else "a failed"
        raise GenbenchError(f"{what} record has no private score: private scores are re-runs of an entry's measure")
    zoo, why = private_zoo_of(rec)
    if zoo is None:
        raise GenbenchError(why)
    settings = {**trusted_settings(rec, limits), "audit_zoo": None, "allow_partial": False}
    if is_submission(rec):
        from .submit.api import rerun_record
        new = Record(rerun_record(rec, zoo, submissions, device, audit=False, settings=settings))
    else:
        from ..measures import get_measure
        from .run import run_entry
        m = get_measure(str(rec.measure))  # an unknown name: the registry's own error, with suggestions
        new = Record(run_entry(m.name, zoo, name=rec.name, audit_zoo=None, device=device, n_boot=settings["n_boot"],
                               seed=settings["seed"], command="private", cache=False))
    scores = {part: dict(new.scores.get(part) or {}) for part in SCORE_PARTS} if new.ok else None
    n = new.scores.get("n") if new.ok else None
    return json_safe({"zoo": private_name(training_of(rec.zoo_name)[0]),
                      "commitment": secret.commitment(zoo.table_sha256), "status": "ok" if new.ok else "failed",
                      "scores": scores, "n": n if isinstance(n, int) else len(zoo),
                      "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})


def add_private(path: str | Path, **kw: Any) -> dict[str, Any]:
    """Make the private block of the record file at `path` (private_scores, same keywords) and write it into that
    file atomically, replacing any earlier one; return the block."""
    data = read_record(path)
    block = private_scores(data, **kw)
    write_json_atomic(path, json_safe({**data, PRIVATE: block}))
    return block


def block_problems(block: Any) -> list[str]:
    """What in a private block is not the aggregate form (a key beyond BLOCK_KEYS, a score part beyond SCORE_PARTS,
    a non-number value): a private block carries nothing per model."""
    if not isinstance(block, dict):
        return [f"the private block is not an object: {excerpt(block)}"]
    problems = [f"the private block holds {excerpt(k)}, which is not one of {list(BLOCK_KEYS)}"
                for k in block if k not in BLOCK_KEYS]
    scores = block.get("scores")
    for part, held in (scores.items() if isinstance(scores, dict) else ()):
        if part not in SCORE_PARTS or not isinstance(held, dict):
            problems.append(f"the private block's scores hold {excerpt(part)}, not one of {list(SCORE_PARTS)}")
        elif part == "values" and not all(v is None or _finite(v) is not None for v in held.values()):
            problems.append("the private block's score values are not all numbers")
    return problems


__all__ = ["PRIVATE", "TRAINING_NOISE_R2", "add_private", "block_problems", "private_block", "private_score",
           "private_scores", "private_standing", "private_zoo_of"]
