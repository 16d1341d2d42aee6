"""genbench verify: recompute a result record from scratch and list every number that does not reproduce;
genbench leaderboard add: the one way into the shipped folder of records, for a record that reproduces."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..defaults import SHIPPED_RESULTS
from ..errors import GenbenchError
from ..paths import is_plain_name
from ..fileio import atomic_write
from ..measures import get_measure
from ..zoo.storage import Zoo, load_zoo
from ..record import Record, record_path
from .run import NO_AUDIT, baselines_source_hash, run_baselines, run_entry

RTOL, ATOL = 1e-5, 1e-8
# The audit's rescaling control reports the largest relative change of an invariant measure under a function-
# preserving rescaling: float rounding (~1e-6), which moves with the thread count and the order of summation, against
# a threshold of 0.05. Its value is compared to this absolute tolerance; its `failed` flag, exactly.
CONTROL_ATOL = 1e-4


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


# the fields of a record that differ between identical runs: when and how long, the commit of the checkout that
# re-runs it (a record cites the commit that made it: it must be one of this checkout's history, see known_commit),
# and when its scores were recomputed from its values (`genbench leaderboard rescore`; a fresh run has none)
TIMING = ("provenance.seconds", "provenance.date", "provenance.git_commit", "provenance.rescored")


EXTERNAL_PROBLEM = ("it scores a value table from elsewhere (external values): genbench has no checkpoints to "
                    "compute them again, so it is never verified and never shipped")


def is_submission(rec: Record) -> bool:
    """Whether a record is a submission's (its code came from outside genbench): it says so by a submission block,
    or by not being built in."""
    return rec.data.get("submission") is not None or rec.data.get("builtin") is False


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
        control = old.get("part") == "control" and new.get("part") == "control"
        for k in sorted(set(old) | set(new)):
            _compare(f"{path}.{k}" if path else k, old.get(k), new.get(k), out, rtol,
                     max(atol, CONTROL_ATOL) if control and k == "value" else atol)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            _compare(f"{path}[{i}]", a, b, out, rtol, atol)
    elif not _close(old, new, rtol, atol):
        out.append((path, old, new))


def _open(source: str | Path, revision: str | None) -> Zoo:
    s = str(source)
    if s.startswith("hf://") and "@" in s and revision is None:  # hf://ORG/NAME@REVISION
        s, revision = s.split("@", 1)
    return load_zoo(s, revision)


def cited_zoo(rec: Record, zoo: str | Path | None = None) -> tuple[Zoo | None, str | None]:
    """The zoo a record cites, found by its table hash: `zoo` if given (a folder, a local zoo's name or
    hf://ORG/NAME[@REVISION]), else the zoo the record names (its Hub commit, or the local build of that name), else
    the canonical copy on the Hub (HUB_ORG/NAME at the tag of the hash). Returns (zoo, None), or (None, why not)."""
    from ..zoo.hub import canonical_repo, table_tag
    if not is_plain_name(rec.zoo_name):
        return None, f"the record's zoo name {rec.zoo_name!r} is not a plain name; verify opens no such path"
    want = rec.table_sha256
    tag = table_tag(want) if want else None
    canonical = canonical_repo(rec.zoo_name)
    tried: list[tuple[str, str]] = []  # (where, what was found there)
    sources = [(zoo, None)] if zoo is not None else [rec.zoo_source()]
    if zoo is None and want and rec.zoo_source()[0] != f"hf://{canonical}":
        sources.append((f"hf://{canonical}", tag))
    for source, revision in sources:
        where = f"{source}" + (f" at {revision}" if revision else "")
        try:
            z = _open(source, revision)
        except GenbenchError as e:
            tried.append((where, str(e).splitlines()[0]))
            continue
        if not want or z.table_sha256 == want:
            return z, None
        tried.append((where, f"table sha256 {z.table_sha256[:12]}..."))
    found = "; ".join(f"{w}: {what}" for w, what in tried)
    return None, (f"your zoo {rec.zoo_name} differs from the one this record cites (table sha256 "
                  f"{str(want)[:12]}...; found {found}). Get the cited zoo with `genbench zoo download {canonical} "
                  f"--revision {tag}` and verify again, or pass --zoo with a copy of it. A local rebuild is the "
                  "same zoo only when built by the same genbench and torch versions under genbench's pinned CPU "
                  "settings (README, 'Reproducible builds')")


def audit_zoo_problem(rec: Record) -> str | None:
    """Why the record's fragility audit cannot be repeated here: its audit zoo is not built (then with the command
    that builds it and how many models that trains); None when it can, or when the record has no audit."""
    from ..zoo.recipe import list_recipes, load_recipe
    name = rec.rerun_settings()["audit_zoo"]
    if not name or rec.audit is None:
        return None
    try:
        load_zoo(name)
        return None
    except GenbenchError:
        pass
    size = f" ({len(load_recipe(name).expand())} models to train)" if name in list_recipes() else ""
    return (f"the record's fragility audit ran on {name}, which is not built here: build it with `genbench zoo build "
            f"{name}`{size} and verify again, or pass --scores-only to verify the scores and per-model values "
            "without repeating the audit")


def _without_audit_note(scores: Any) -> Any:
    """The scores block without the note that an audit could not run (what --scores-only compares)."""
    if not isinstance(scores, dict):
        return scores
    return {**scores, "notes": [n for n in scores.get("notes") or [] if not str(n).startswith(NO_AUDIT)]}


def _compare_outcome(rec: Record, new: Record, v: Verification, *, scores_only: bool = False) -> None:
    """Compare how two records of an entry ended: status, failure, scores and per-model values (with `scores_only`,
    leaving out of the scores the note that an audit could not run)."""
    for key in ("status", "failure", "scores", "values"):
        old_part, new_part = rec.get(key), new.get(key)
        if key == "scores" and scores_only:
            old_part, new_part = _without_audit_note(old_part), _without_audit_note(new_part)
        _compare(key, old_part, new_part, v.differences, v.rtol, v.atol)


def verify_record(path: str | Path, *, rtol: float = RTOL, atol: float = ATOL, device: str | None = None,
                  submissions: str | Path | None = None, zoo: str | Path | None = None,
                  scores_only: bool = False) -> Verification:
    """Re-run the record's entry without the value cache; compare scores, audit verdicts and per-model values,
    and check that the measure's source hash and the zoo's table hash are still those recorded. A record whose
    audit zoo is not built here is refused, saying how to build it, unless `scores_only`: then the audit is not
    repeated and the status, scores and per-model values are compared.

    A submission's record is re-made by `entries.submit.rerun_record`: its measure.py runs again in the
    sandbox, taken only from the folder named after the entry in the trusted `submissions` folder (default: the
    checkout's submissions/), never from a path the record names, and every field of the new record except the
    timings (TIMING) is compared with the recorded one: scores, values, audit, metadata and provenance.

    The zoo is the one the record cites by its table hash (`cited_zoo`; `zoo` names a copy of it)."""
    rec = Record.read(path)
    v = Verification(str(path), rtol=rtol, atol=atol)
    if rec.external:
        v.problems.append(EXTERNAL_PROBLEM)
        return v
    if rec.data.get("baseline") is True:
        return _verify_baseline(rec, v, device=device, zoo=zoo)
    if not scores_only and (why := audit_zoo_problem(rec)):
        v.problems.append(why)
        return v
    if is_submission(rec):
        return _verify_submission(rec, v, device=device, submissions=submissions, zoo=zoo, scores_only=scores_only)
    m = get_measure(rec.measure)
    if rec.source_hash and rec.source_hash != m.source_hash:
        v.problems.append(f"the source of {m.name} changed: recorded hash {rec.source_hash[:12]}..., "
                          f"now {m.source_hash[:12]}...")
    zoo, why = cited_zoo(rec, zoo)
    if why:
        v.problems.append(why)
    if v.problems:
        return v
    settings = {**rec.rerun_settings(), **({"audit_zoo": None} if scores_only else {})}
    new = Record(run_entry(m.name, zoo, name=rec.name, submission=rec.submission, device=device, cache=False,
                           **settings))
    _compare_outcome(rec, new, v, scores_only=scores_only)
    if scores_only:
        return v
    _compare("audit.verdict", rec.verdict, new.verdict, v.differences, rtol, atol)
    for part in ("checks", "missing", "evidence"):
        _compare(f"audit.{part}", (rec.audit or {}).get(part), (new.audit or {}).get(part), v.differences, rtol,
                 atol)
    return v


def _without_timing(data: Any, path: str = "") -> Any:
    """A record's JSON without the TIMING fields."""
    if isinstance(data, dict):
        return {k: _without_timing(x, f"{path}.{k}" if path else k) for k, x in data.items()
                if (f"{path}.{k}" if path else k) not in TIMING}
    return data


def _verify_submission(rec: Record, v: Verification, *, device: str | None, submissions: str | Path | None,
                       zoo: str | Path | None, scores_only: bool = False) -> Verification:
    """Re-make a submission's record in the sandbox and compare every field but the timings (with `scores_only`,
    without its audit: the status, scores and per-model values)."""
    from .submit.api import rerun_record
    found, why = cited_zoo(rec, zoo)
    if found is None or not rec.table_sha256:
        v.problems.append(why or "the record cites no zoo table hash, so the zoo it was made on cannot be found")
        return v
    try:
        new = rerun_record(rec, found, submissions, device, audit=not scores_only)
    except GenbenchError as e:
        v.problems.append(str(e))
        return v
    if scores_only:
        _compare_outcome(rec, Record(new), v, scores_only=True)
        return v
    _compare("", _without_timing(dict(rec.data)), _without_timing(new), v.differences, v.rtol, v.atol)
    recorded = rec.provenance.get("git_commit")
    if recorded != new.get("provenance", {}).get("git_commit") and not known_commit(recorded):
        v.differences.append(("provenance.git_commit", recorded, new.get("provenance", {}).get("git_commit")))
    return v


def known_commit(commit: Any) -> bool:
    """Whether `commit` is a commit of this checkout's history (a record made at an older commit cites it; a forged
    one names none). False outside a git checkout: then a differing commit cannot be vouched for."""
    import subprocess
    if not isinstance(commit, str) or not commit or not all(c in "0123456789abcdef" for c in commit):
        return False
    try:
        out = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=Path(__file__).parent,
                             capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _verify_baseline(rec: Record, v: Verification, *, device: str | None, zoo: str | Path | None) -> Verification:
    """Re-make a baseline row without the value cache and compare it as verify_record compares a measure's."""
    from ..scoring.baselines import BASELINE_NAMES
    if rec.name not in BASELINE_NAMES:
        v.problems.append(f"{rec.name!r} is not a baseline (the baselines are {list(BASELINE_NAMES)})")
        return v
    if rec.source_hash and rec.source_hash != baselines_source_hash():
        v.problems.append("the source of the baselines changed since the record was made: make it again with "
                          "`genbench leaderboard baselines`")
    zoo, why = cited_zoo(rec, zoo)
    if why:
        v.problems.append(why)
    if v.problems:
        return v
    settings = rec.rerun_settings()
    new = Record(run_baselines(zoo, only=(rec.name,), device=device, cache=False, n_boot=settings["n_boot"],
                               seed=settings["seed"], command=settings["command"],
                               allow_partial=settings["allow_partial"])[0])
    _compare_outcome(rec, new, v)
    return v


def add_record(path: str | Path, to: str | Path, *, rtol: float = RTOL, atol: float = ATOL,
               device: str | None = None, submissions: str | Path | None = None,
               zoo: str | Path | None = None) -> Verification:
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
    elif rec.external:
        v.problems.append(EXTERNAL_PROBLEM)
    elif not rec.ok:
        v.problems.append("a failed record is not added (the shipped folder holds verified scores only): "
                          + (rec.failure or "no reason recorded"))
    elif not rec.zoo_complete:
        v.problems.append(f"a record on a partial zoo ({rec.zoo_models} of {rec.zoo_expected_models} models) is not "
                          "added: the shipped folder holds records on complete zoos only; finish the zoo and "
                          "score it again")
    if v.problems:
        return v
    v = verify_record(path, rtol=rtol, atol=atol, device=device, submissions=submissions, zoo=zoo)
    if v.ok and path.read_bytes() != data:
        v.problems.append("the record's file changed while it was verified; add it again")
    if v.ok:
        old = dest.read_bytes() if dest.is_file() else None
        if old != data:
            atomic_write(dest, lambda tmp: tmp.write_bytes(data))
        v.added, v.replaced = str(dest), old is not None and old != data
    return v
