"""genbench verify: recompute a result record from scratch and list every number that does not reproduce."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GenbenchError
from ..measures import get_measure
from ..zoo.storage import load_zoo
from .records import read_record, run_entry
from .submission import import_measure_file

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
    rec = read_record(path)
    v = Verification(str(path), rtol=rtol, atol=atol)
    sub = rec.get("submission") or {}
    if sub.get("path"):
        import_submission(sub["path"])
    m = get_measure(rec["measure"])
    prov = rec.get("provenance") or {}
    if prov.get("measure_source_hash") and prov["measure_source_hash"] != m.source_hash:
        v.problems.append(f"the source of {m.name} changed: recorded hash {prov['measure_source_hash'][:12]}..., "
                          f"now {m.source_hash[:12]}...")
    zoo = load_zoo(rec["zoo"]["name"], **({"revision": rec["zoo"]["revision"]} if rec["zoo"].get("revision") else {}))
    table_hash = zoo.table_sha256
    if rec["zoo"].get("table_sha256") and rec["zoo"]["table_sha256"] != table_hash:
        v.problems.append(f"zoo {zoo.name}'s table changed: recorded sha256 {rec['zoo']['table_sha256'][:12]}..., "
                          f"now {str(table_hash)[:12]}... (rebuild or download the recorded zoo version)")
    if v.problems:
        return v
    new = run_entry(m.name, zoo, name=rec["name"], submission=rec.get("submission"),
                    audit_zoo=prov.get("audit_zoo"), device=device, n_boot=int(prov.get("n_boot", 1000)),
                    seed=int(prov.get("seed", 0)), command=prov.get("command", ""), cache=False)
    for key in ("status", "failure", "scores", "values"):
        _compare(key, rec.get(key), new.get(key), v.differences, rtol, atol)
    old_audit, new_audit = rec.get("audit") or {}, new.get("audit") or {}
    _compare("audit.verdict", old_audit.get("verdict"), new_audit.get("verdict"), v.differences, rtol, atol)
    _compare("audit.checks", old_audit.get("checks"), new_audit.get("checks"), v.differences, rtol, atol)
    return v
