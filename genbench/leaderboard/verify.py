"""genbench verify: recompute a result record from scratch and list every number that does not reproduce."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GenbenchError
from ..measures import get_measure, import_measure_file
from ..zoo.storage import load_zoo
from .records import run_entry
from .schema import Record

RTOL, ATOL = 1e-5, 1e-8


@dataclass
class Verification:
    """The outcome of re-running one record: the differences found (empty when it reproduces)."""

    path: str
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rtol: float = RTOL
    atol: float = ATOL

    @property
    def ok(self) -> bool:
        return not self.differences and not self.problems


def import_submission(folder: str | Path) -> None:
    """Import a submission's measure.py by path so that its measures are registered."""
    path = Path(folder) / "measure.py"
    if not path.is_file():
        raise GenbenchError(f"the record names submission folder {folder}, which has no measure.py")
    import_measure_file(path)


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if not (math.isfinite(a) and math.isfinite(b)):
            return a == b
        return abs(a - b) <= atol + rtol * abs(b)
    return a == b


def _compare(path: str, old: Any, new: Any, out: list[tuple[str, Any, Any]], rtol: float, atol: float) -> None:
    """Walk two JSON values in parallel and collect the leaves that differ beyond the tolerance."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            _compare(f"{path}.{k}" if path else k, old.get(k), new.get(k), out, rtol, atol)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            _compare(f"{path}[{i}]", a, b, out, rtol, atol)
    elif not _close(old, new, rtol, atol):
        out.append((path, old, new))


def verify_record(path: str | Path, *, rtol: float = RTOL, atol: float = ATOL, device: str | None = None) -> Verification:
    """Re-run the record's entry without the value cache; compare scores, audit verdicts and per-model values,
    and check that the measure's source hash and the zoo's table hash are still those recorded."""
    rec = Record.read(path)
    v = Verification(str(path), rtol=rtol, atol=atol)
    if rec.submission_path:
        import_submission(rec.submission_path)
    m = get_measure(rec.measure)
    if rec.source_hash and rec.source_hash != m.source_hash:
        v.problems.append(f"the source of {m.name} changed: recorded hash {rec.source_hash[:12]}..., "
                          f"now {m.source_hash[:12]}...")
    zoo = load_zoo(rec.zoo_name, **({"revision": rec.zoo_revision} if rec.zoo_revision else {}))
    table_hash = zoo.table_sha256
    if rec.table_sha256 and rec.table_sha256 != table_hash:
        v.problems.append(f"zoo {zoo.name}'s table changed: recorded sha256 {rec.table_sha256[:12]}..., "
                          f"now {str(table_hash)[:12]}... (rebuild or download the recorded zoo version)")
    if v.problems:
        return v
    new = Record(run_entry(m.name, zoo, name=rec.name, submission=rec.submission, device=device, cache=False,
                           **rec.rerun_settings()))
    for key in ("status", "failure", "scores", "values"):
        _compare(key, rec.get(key), new.get(key), v.differences, rtol, atol)
    _compare("audit.verdict", rec.verdict, new.verdict, v.differences, rtol, atol)
    _compare("audit.checks", (rec.audit or {}).get("checks"), (new.audit or {}).get("checks"), v.differences, rtol,
             atol)
    return v
