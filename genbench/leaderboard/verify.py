"""genbench verify: recompute a result record from scratch and list every number that does not reproduce;
genbench leaderboard add: the one way into the shipped folder of records, for a record that reproduces."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..defaults import SHIPPED_RESULTS
from ..errors import GenbenchError
from ..fileio import atomic_write
from ..measures import get_measure, import_measure_file
from ..zoo.storage import load_zoo
from .records import baselines_source_hash, run_baselines, run_entry
from .schema import Record, record_path

RTOL, ATOL = 1e-5, 1e-8


@dataclass
class Verification:
    """The outcome of re-running one record: the differences found (empty when it reproduces)."""

    path: str
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rtol: float = RTOL
    atol: float = ATOL
    added: str | None = None  # where add_record copied the record (None: not added)
    replaced: bool = False  # whether it replaced a different record there

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
    if rec.data.get("baseline") is True:
        return _verify_baseline(rec, v, device=device)
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
    for part in ("checks", "missing", "evidence"):
        _compare(f"audit.{part}", (rec.audit or {}).get(part), (new.audit or {}).get(part), v.differences, rtol,
                 atol)
    return v


def _verify_baseline(rec: Record, v: Verification, *, device: str | None) -> Verification:
    """Re-make a baseline row without the value cache and compare it as verify_record compares a measure's."""
    from ..scoring.baselines import BASELINE_NAMES
    if rec.name not in BASELINE_NAMES:
        v.problems.append(f"{rec.name!r} is not a baseline (the baselines are {list(BASELINE_NAMES)})")
        return v
    if rec.source_hash and rec.source_hash != baselines_source_hash():
        v.problems.append("the source of the baselines changed since the record was made: make it again with "
                          "`genbench leaderboard baselines`")
    zoo = load_zoo(rec.zoo_name, **({"revision": rec.zoo_revision} if rec.zoo_revision else {}))
    if rec.table_sha256 and rec.table_sha256 != zoo.table_sha256:
        v.problems.append(f"zoo {zoo.name}'s table changed: recorded sha256 {rec.table_sha256[:12]}..., "
                          f"now {str(zoo.table_sha256)[:12]}... (rebuild or download the recorded zoo version)")
    if v.problems:
        return v
    settings = rec.rerun_settings()
    new = Record(run_baselines(zoo, only=(rec.name,), device=device, cache=False, n_boot=settings["n_boot"],
                               seed=settings["seed"], command=settings["command"],
                               allow_partial=settings["allow_partial"])[0])
    for key in ("status", "failure", "scores", "values"):
        _compare(key, rec.get(key), new.get(key), v.differences, v.rtol, v.atol)
    return v


def add_record(path: str | Path, to: str | Path, *, rtol: float = RTOL, atol: float = ATOL,
               device: str | None = None) -> Verification:
    """Verify a record and, when it reproduces, copy its file atomically into the shipped folder `to`, as
    TO/<zoo>/<name>.json (`.added` says where). A failed record, one that does not reproduce and one whose file
    changed while it was verified are refused, and so is a record on a partial zoo (`.problems` and `.differences` say why) and nothing is written."""
    to, path = Path(to), Path(path)
    if not to.is_dir():
        raise GenbenchError(f"{to} is not a folder: records are added to the shipped folder of verified records (a "
                            f"checkout's {SHIPPED_RESULTS.as_posix()}), which must exist")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise GenbenchError(f"cannot read result record {path}: {e}") from None
    rec = Record.read(path)
    v = Verification(str(path), rtol=rtol, atol=atol)
    dest = record_path(rec, to)
    if dest.resolve().parent.parent != to.resolve():
        v.problems.append(f"its entry name {rec.name!r} or zoo name {rec.zoo_name!r} is not a plain file name")
    elif not rec.ok:
        v.problems.append("a failed record is not added (the shipped folder holds verified scores only): "
                          + (rec.failure or "no reason recorded"))
    elif not rec.zoo_complete:
        v.problems.append(f"a record on a partial zoo ({rec.zoo_models} of {rec.zoo_expected_models} models) is not "
                          "added: the shipped folder holds records on complete zoos only; finish the zoo and "
                          "score it again")
    if v.problems:
        return v
    v = verify_record(path, rtol=rtol, atol=atol, device=device)
    if v.ok and path.read_bytes() != data:
        v.problems.append("the record's file changed while it was verified; add it again")
    if v.ok:
        old = dest.read_bytes() if dest.is_file() else None
        if old != data:
            atomic_write(dest, lambda tmp: tmp.write_bytes(data))
        v.added, v.replaced = str(dest), old is not None and old != data
    return v
