"""genbench verify: recompute a result record from scratch and list every number that does not reproduce;
genbench leaderboard add: the one way into the shipped folder of records, for a record that reproduces."""
from __future__ import annotations

import math
import numbers
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..defaults import BUDGET_S, N_BOOT, SEED, SHIPPED_RESULTS
from ..errors import GenbenchError
from ..paths import is_plain_name
from ..fileio import atomic_write, read_capped
from ..measures import get_measure
from ..zoo.storage import Zoo, load_zoo
from ..record import RECORD_MAX_BYTES, Record, parse_record, record_path
from ..text import excerpt, plain_text
from .run import NO_AUDIT, baselines_source_hash, run_baselines, run_entry
from .trainings import MissingTrainings

RTOL, ATOL = 1e-5, 1e-8
# The audit's rescaling control reports the largest relative change of an invariant measure under a function-
# preserving rescaling: float rounding (~1e-6), which moves with the thread count and the order of summation, against
# a threshold of 0.05. Its value is compared to this absolute tolerance; its `failed` flag, exactly.
CONTROL_ATOL = 1e-4


@dataclass(frozen=True)
class Limits:
    """The most a record may ask `verify` for: it names what to re-run (its entry, its zoo, its submission folder);
    how much to spend comes from genbench (the defaults; the flags --max-n-boot and --max-budget-s raise them)."""

    n_boot: int = N_BOOT
    budget_s: float = BUDGET_S


_REVISION = re.compile(r"[A-Za-z0-9._-]{1,100}")


def _positive(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def trusted_settings(rec: Record, limits: Limits | None = None, notes: list[str] | None = None) -> dict[str, Any]:
    """The settings verify re-runs a record with: its resamples and budget as recorded but never above `limits`,
    genbench's seed, its audit zoo only when it is one of genbench's zoos (else a GenbenchError); a line is appended
    to `notes` for each value of the record that was not taken as written."""
    from ..zoo.roles import recipe_of
    limits, notes = limits or Limits(), notes if notes is not None else []
    prov = rec.provenance
    n_boot = prov.get("n_boot", N_BOOT)
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral) or n_boot < 1:
        notes.append(f"the record's bootstrap count {excerpt(n_boot)} is not a positive integer; verify uses "
                     f"{limits.n_boot}")
        n_boot = limits.n_boot
    elif n_boot > limits.n_boot:
        notes.append(f"the record asks for {n_boot} bootstrap resamples; verify makes at most {limits.n_boot} "
                     "(--max-n-boot to raise it), so its intervals will differ")
        n_boot = limits.n_boot
    budget_s = prov.get("budget_s", BUDGET_S)
    if budget_s is None or not _positive(budget_s) or budget_s > limits.budget_s:
        notes.append(f"the record's per-model budget {excerpt(budget_s)} s is not a positive number of at most "
                     f"{limits.budget_s:g} s; verify uses {limits.budget_s:g} s (--max-budget-s to raise it)")
        budget_s = limits.budget_s
    seed = prov.get("seed", SEED)
    if seed != SEED or isinstance(seed, bool):
        notes.append(f"the record says seed {excerpt(seed)}; verify uses genbench's seed {SEED}")
    audit_zoo = prov.get("audit_zoo")
    if audit_zoo is not None and not (isinstance(audit_zoo, str) and is_plain_name(audit_zoo)
                                      and recipe_of(audit_zoo) is not None):
        raise GenbenchError(f"the record's audit zoo {excerpt(audit_zoo)} is not one of genbench's zoos; verify "
                            "audits only on those")
    command = prov.get("command", "")
    return {"audit_zoo": audit_zoo, "n_boot": int(n_boot), "seed": SEED, "budget_s": float(budget_s),
            "allow_partial": not rec.zoo_complete, "command": command if isinstance(command, str) else ""}


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
    notes: list[str] = field(default_factory=list)  # the record's values verify did not take as written

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


LOCAL = "local:"  # a cited_zoo source: the zoo built here under that name (never a folder of the current directory)


def _open(source: str | Path, revision: str | None) -> Zoo:
    s = str(source)
    if s.startswith(LOCAL):
        from ..paths import zoos_dir
        from ..zoo.storage import MANIFEST
        name = s[len(LOCAL):]
        if not (zoos_dir() / name / MANIFEST).is_file():
            raise GenbenchError(f"no zoo {name} is built here")
        return Zoo(zoos_dir() / name)
    if s.startswith("hf://") and "@" in s and revision is None:  # hf://ORG/NAME@REVISION
        s, revision = s.split("@", 1)
    return load_zoo(s, revision)


def cited_zoo(rec: Record, zoo: str | Path | None = None, notes: list[str] | None = None
              ) -> tuple[Zoo | None, str | None]:
    """The zoo a record cites, found by its table hash: `zoo` if given (a folder, a local zoo's name or
    hf://ORG/NAME[@REVISION]), else the zoo built here under the record's zoo name, else, for one of genbench's zoos,
    the canonical copy on the Hub (HUB_ORG/NAME: at the commit the record names, or at the tag of the hash). A Hub
    repository the record names is never fetched unless it is the canonical one (a line in `notes` says so).
    Returns (zoo, None), or (None, why not)."""
    from ..zoo.hub import canonical_repo, table_tag
    from ..zoo.roles import recipe_of
    if not is_plain_name(rec.zoo_name):
        return None, f"the record's zoo name {excerpt(rec.zoo_name)} is not a plain name; verify opens no such path"
    want = rec.table_sha256
    want = want if isinstance(want, str) and re.fullmatch(r"[0-9a-f]{64}", want) else None
    tag = table_tag(want) if want else None
    canonical = canonical_repo(rec.zoo_name)
    known = recipe_of(rec.zoo_name) is not None  # one of genbench's zoos: a recipe's, or a training of one
    tried: list[tuple[str, str]] = []  # (where, what was found there)
    sources: list[tuple[str | Path, str | None]] = [(zoo, None)] if zoo is not None else []
    if zoo is None:
        repo, revision = rec.zoo_repo, rec.zoo_revision
        if repo == canonical and known and isinstance(revision, str) and _REVISION.fullmatch(revision):
            sources.append((f"hf://{canonical}", revision))
        elif repo is not None and notes is not None:
            notes.append(f"the record names the Hub repository {excerpt(repo)}; verify fetches a zoo only from "
                         f"genbench's canonical copy of its own zoos (pass --zoo hf://REPO to use another)")
        sources.append((f"{LOCAL}{rec.zoo_name}", None))
        if want and known and (f"hf://{canonical}", tag) not in sources:
            sources.append((f"hf://{canonical}", tag))
    for source, revision in sources:
        where = f"{source}".removeprefix(LOCAL) + (f" at {revision}" if revision else "")
        try:
            z = _open(source, revision)
        except GenbenchError as e:
            if zoo is not None:  # the zoo the user named, not the record's, is what is wrong
                return None, f"--zoo: {e}"
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


def audit_zoo_problem(rec: Record, *, scores_only_hint: bool = True) -> str | None:
    """Why the record's fragility audit cannot be repeated here: its audit zoo is not built (then with the command
    that builds it and how many models that trains, and `verify --scores-only` where the caller has it); None when
    it can, or when the record has no audit."""
    from ..zoo.recipe import list_recipes, load_recipe
    name = rec.provenance.get("audit_zoo")
    if not name or rec.audit is None or not isinstance(name, str) or not is_plain_name(name):
        return None
    try:
        _open(f"{LOCAL}{name}", None)
        return None
    except GenbenchError:
        pass
    size = f" ({len(load_recipe(name).expand())} models to train)" if name in list_recipes() else ""
    other = (", or pass --scores-only to verify the scores and per-model values without repeating the audit"
             if scores_only_hint else " (a record is added only with its audit repeated)")
    return (f"the record's fragility audit ran on {name}, which is not built here: build it with `genbench zoo build "
            f"{name}`{size} and verify again{other}")


def _without_audit_note(scores: Any) -> Any:
    """The scores block without the note that an audit could not run (what --scores-only compares)."""
    if not isinstance(scores, dict):
        return scores
    return {**scores, "notes": [n for n in scores.get("notes") or [] if not str(n).startswith(NO_AUDIT)]}


def _compare_outcome(rec: Record, new: Record, v: Verification, *, scores_only: bool = False) -> None:
    """Compare how two records of an entry ended: status, failure, scores and per-model values (with `scores_only`,
    leaving out of the scores the note that an audit could not run)."""
    for key in ("status", "failure", "scores", "values", "trainings"):
        old_part, new_part = rec.get(key), new.get(key)
        if key == "scores" and scores_only:
            old_part, new_part = _without_audit_note(old_part), _without_audit_note(new_part)
        _compare(key, old_part, new_part, v.differences, v.rtol, v.atol)


def verify_record(path: str | Path, *, rtol: float = RTOL, atol: float = ATOL, device: str | None = None,
                  submissions: str | Path | None = None, zoo: str | Path | None = None,
                  scores_only: bool = False, limits: Limits | None = None, progress: bool = False) -> Verification:
    """verify_public(), then the record's private block (issue 43), which only the maintainers' secret can check:
    without it `.notes` says so (everything public was checked); with it, once the public part reproduces, the entry
    is re-run on the private training and its private scores compared (check_private)."""
    v = verify_public(path, rtol=rtol, atol=atol, device=device, submissions=submissions, zoo=zoo,
                      scores_only=scores_only, limits=limits, progress=progress)
    check_private(Record.read(path), v, device=device, submissions=submissions, limits=limits)
    return v


PRIVATE_UNCHECKED = ("its private scores (on {zoo}) can be checked only with the maintainers' secret ({env} or "
                     "{file}), which is not set here: not checked (everything public was)")


def check_private(rec: Record, v: Verification, *, device: str | None = None,
                  submissions: str | Path | None = None, limits: Limits | None = None) -> None:
    """The private block of `rec`, if any, checked into `v`: without the secret a note says it cannot be; with it,
    the block is made again on the private zoo built here (entries.private.private_scores) and its zoo, commitment,
    status and model count compared exactly, its scores within v's tolerance. Not run when the public part failed."""
    from ..zoo.private import PRIVATE_ENV, load_secret, secret_path
    from .private import PRIVATE, block_problems, private_block, private_scores, private_zoo_of
    block = private_block(rec)
    if PRIVATE not in rec.data:
        return
    try:
        secret = load_secret(required=False)
    except GenbenchError as e:
        v.problems.append(f"its private scores cannot be checked: {e}")
        return
    if secret is None:
        zoo = block.get("zoo") if block else None
        v.notes.append(PRIVATE_UNCHECKED.format(zoo=excerpt(zoo), env=f"${PRIVATE_ENV}", file=secret_path()))
        return
    if not v.ok:
        return
    if problems := block_problems(rec.data.get(PRIVATE)):
        v.problems += problems
        return
    if (why := private_zoo_of(rec)[1]) is not None:
        v.notes.append(f"its private scores were not checked: {why}")
        return
    try:
        new = private_scores(rec, secret=secret, submissions=submissions, device=device, limits=limits)
    except GenbenchError as e:
        v.problems.append(f"its private scores cannot be made again here: {e}")
        return
    for key in ("zoo", "commitment", "status", "n"):
        if block.get(key) != new.get(key):
            v.differences.append((f"{PRIVATE}.{key}", block.get(key), new.get(key)))
    _compare(f"{PRIVATE}.scores", block.get("scores"), new.get("scores"), v.differences, v.rtol, v.atol)


def check_tolerances(rtol: Any, atol: Any) -> None:
    """Refuse a tolerance that is not a finite number >= 0: a negative one would call equal numbers different, a nan
    one every number equal."""
    for flag, value in (("--rtol", rtol), ("--atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise GenbenchError(f"{flag} must be a finite number >= 0 (0: exact), got {value!r}")


def verify_public(path: str | Path, *, rtol: float = RTOL, atol: float = ATOL, device: str | None = None,
                  submissions: str | Path | None = None, zoo: str | Path | None = None,
                  scores_only: bool = False, limits: Limits | None = None, progress: bool = False) -> Verification:
    """Re-run the record's entry without the value cache; compare scores, audit verdicts and per-model values,
    and check that the measure's source hash and the zoo's table hash are still those recorded. A record whose
    audit zoo is not built here is refused, saying how to build it, unless `scores_only`: then the audit is not
    repeated and the status, scores and per-model values are compared.

    A submission's record is re-made by `entries.submit.rerun_record`: its measure.py runs again in the
    sandbox, taken only from the folder named after the entry in the trusted `submissions` folder (default: the
    checkout's submissions/), never from a path the record names, and every field of the new record except the
    timings (TIMING) is compared with the recorded one: scores, values, audit, metadata and provenance.

    The zoo is the one the record cites by its table hash (`cited_zoo`; `zoo` names a copy of it). The record
    names what to re-run; the resamples and budget are its own but never above `limits`, the seed is genbench's
    (`trusted_settings`; `.notes` says what was not taken as written)."""
    check_tolerances(rtol, atol)
    rec = Record.read(path)
    v = Verification(str(path), rtol=rtol, atol=atol)
    if rec.external:
        v.problems.append(EXTERNAL_PROBLEM)
        return v
    try:
        settings = trusted_settings(rec, limits, v.notes)
    except GenbenchError as e:
        v.problems.append(cannot_rerun(e))
        return v
    if rec.data.get("baseline") is True:
        return _verify_baseline(rec, v, device=device, zoo=zoo, settings=settings, progress=progress)
    if not scores_only and (why := audit_zoo_problem(rec)):
        v.problems.append(why)
        return v
    if is_submission(rec):
        return _verify_submission(rec, v, device=device, submissions=submissions, zoo=zoo, scores_only=scores_only,
                                  settings=settings)
    if not is_plain_name(rec.measure):
        v.problems.append(f"the record's measure {excerpt(rec.measure)} is not a measure's name")
        return v
    try:
        m = get_measure(rec.measure)
    except GenbenchError:
        v.problems.append(f"the record's measure {excerpt(rec.measure)} is not registered here: `genbench measures "
                          "list` shows those that are")
        return v
    if rec.source_hash and rec.source_hash != m.source_hash:
        v.problems.append(f"the source of {m.name} changed: recorded hash {str(rec.source_hash)[:12]}..., "
                          f"now {m.source_hash[:12]}...")
    zoo, why = cited_zoo(rec, zoo, v.notes)
    if why:
        v.problems.append(why)
    if v.problems:
        return v
    settings = {**settings, **({"audit_zoo": None} if scores_only else {})}
    settings.pop("budget_s")  # a built-in runs under genbench's budget (run_entry's default)
    try:  # on the trainings the record was scored on (each one's zoo built here, found by name)
        new = Record(run_entry(m.name, zoo, name=rec.name, submission=rec.submission, device=device, cache=False,
                               trainings=rec.n_trainings, progress=progress, **settings))
    except GenbenchError as e:
        v.problems.append(cannot_rerun(e))
        return v
    _compare_outcome(rec, new, v, scores_only=scores_only)
    if scores_only:
        return v
    _compare("audit.verdict", rec.verdict, new.verdict, v.differences, rtol, atol)
    for part in ("checks", "missing", "evidence"):
        _compare(f"audit.{part}", (rec.audit or {}).get(part), (new.audit or {}).get(part), v.differences, rtol,
                 atol)
    return v


def misplaced(rec: Record, path: Path) -> str | None:
    """Why a leaderboard would skip this file, when it sits in a zoo's folder of a results folder (a folder named
    after the record's zoo) under another name than the record's: verify checks the record, not where it lies."""
    if path.parent.name != rec.written_zoo_name:
        return None
    try:
        where = record_path(rec, path.parent.parent)
    except GenbenchError:  # a name that is no plain file name: verify_public says so
        return None
    if where.name == path.name:
        return None
    return (f"this file is the record of entry {excerpt(rec.name)}, whose place in the results folder is {where}: "
            f"a leaderboard of that folder skips it where it is; rename it to {where.name}")


def cannot_rerun(e: GenbenchError) -> str:
    """Why a record could not be made again here: the error's message, or, for trainings of its zoo that are not
    built, that they are needed and how to build them (not run's advice to score on fewer)."""
    if isinstance(e, MissingTrainings):
        return (f"the record is scored on trainings that are not built (completely) here: {', '.join(e.missing)}; "
                f"build them ({'; '.join(e.builds)}), then verify it again")
    return str(e)


def _without_timing(data: Any, path: str = "") -> Any:
    """A record's JSON without the TIMING fields."""
    if isinstance(data, dict):
        return {k: _without_timing(x, f"{path}.{k}" if path else k) for k, x in data.items()
                if (f"{path}.{k}" if path else k) not in TIMING}
    return data


def _verify_submission(rec: Record, v: Verification, *, device: str | None, submissions: str | Path | None,
                       zoo: str | Path | None, scores_only: bool = False,
                       settings: dict[str, Any] | None = None) -> Verification:
    """Re-make a submission's record in the sandbox and compare every field but the timings (with `scores_only`,
    without its audit: the status, scores and per-model values)."""
    from .submit.api import rerun_record
    found, why = cited_zoo(rec, zoo, v.notes)
    if found is None or not rec.table_sha256:
        v.problems.append(why or "the record cites no zoo table hash, so the zoo it was made on cannot be found")
        return v
    try:
        new = rerun_record(rec, found, submissions, device, audit=not scores_only, settings=settings)
    except GenbenchError as e:
        v.problems.append(cannot_rerun(e))
        return v
    if scores_only:
        _compare_outcome(rec, Record(new), v, scores_only=True)
        return v
    public = {k: x for k, x in rec.data.items() if k != "private"}  # the private block: check_private
    _compare("", _without_timing(public), _without_timing(new), v.differences, v.rtol, v.atol)
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


def _verify_baseline(rec: Record, v: Verification, *, device: str | None, zoo: str | Path | None,
                     settings: dict[str, Any], progress: bool = False) -> Verification:
    """Re-make a baseline row without the value cache and compare it as verify_record compares a measure's."""
    from ..scoring.baselines import BASELINE_NAMES
    if rec.name not in BASELINE_NAMES:
        v.problems.append(f"{excerpt(rec.name)} is not a baseline (the baselines are {list(BASELINE_NAMES)})")
        return v
    if rec.source_hash and rec.source_hash != baselines_source_hash():
        v.problems.append("the source of the baselines changed since the record was made: make it again with "
                          "`genbench leaderboard baselines`")
    zoo, why = cited_zoo(rec, zoo, v.notes)
    if why:
        v.problems.append(why)
    if v.problems:
        return v
    try:
        new = Record(run_baselines(zoo, only=(rec.name,), device=device, cache=False, n_boot=settings["n_boot"],
                                   seed=settings["seed"], command=settings["command"],
                                   allow_partial=settings["allow_partial"], trainings=rec.n_trainings,
                                   progress=progress)[0])
    except GenbenchError as e:
        v.problems.append(cannot_rerun(e))
        return v
    _compare_outcome(rec, new, v)
    return v


def check_shipped_folder(to: Path) -> None:
    """Refuse a folder to add records to that does not exist (a typo would otherwise make a new one)."""
    if not to.is_dir():
        raise GenbenchError(f"{to} is not a folder: records are added to the shipped folder of verified records (a "
                            f"checkout's {SHIPPED_RESULTS.as_posix()}), which must exist")


def add_record(path: str | Path, to: str | Path, *, rtol: float = RTOL, atol: float = ATOL,
               device: str | None = None, submissions: str | Path | None = None,
               zoo: str | Path | None = None, reviewed: bool = False, limits: Limits | None = None,
               progress: bool = False) -> Verification:
    """Verify a record and, when it reproduces, copy its file atomically into the shipped folder `to`, as
    TO/<zoo>/<name>.json (`.added` says where). A failed record, one that does not reproduce and one whose file
    changed while it was verified are refused, and so is a record on a partial zoo (`.problems` and `.differences` say why) and nothing is written."""
    check_tolerances(rtol, atol)
    to, path = Path(to), Path(path)
    check_shipped_folder(to)
    data = read_capped(path, RECORD_MAX_BYTES, what="result record")
    rec = Record(parse_record(data, path))
    v = Verification(str(path), rtol=rtol, atol=atol)
    dest = record_path(rec, to)
    if dest.resolve().parent.parent != to.resolve():
        v.problems.append(f"its entry name {excerpt(rec.name)} or zoo name {excerpt(rec.zoo_name)} is not a plain "
                          "file name")
    elif rec.external:
        v.problems.append(EXTERNAL_PROBLEM)
    elif not rec.ok:
        v.problems.append("a failed record is not added (the shipped folder holds verified scores only): "
                          + plain_text(rec.failure or "no reason recorded", limit=400))
    elif not rec.zoo_complete:
        v.problems.append(f"a record on a partial zoo ({rec.zoo_models} of {rec.zoo_expected_models} models) is not "
                          "added: the shipped folder holds records on complete zoos only; finish the zoo and "
                          "score it again")
    if not v.problems and "private" in rec.data:  # checked by verify_record below, or the record is refused
        from ..zoo.private import load_secret
        from .private import private_zoo_of
        why = ("the maintainers' secret is not set here" if load_secret(required=False) is None
               else private_zoo_of(rec)[1])
        if why:
            v.problems.append(f"it carries a private block, which cannot be checked here ({why}): remove the block, "
                              "or add the record where it can be checked")
    if not v.problems and (why := audit_zoo_problem(rec, scores_only_hint=False)):  # add has no --scores-only
        v.problems.append(why)
    if not v.problems and not reviewed and is_submission(rec):  # its source flagged: refused unless --reviewed
        from .submit.review import review_problems
        v.problems += review_problems(rec.written_name, submissions)
    if v.problems:
        return v
    v = verify_record(path, rtol=rtol, atol=atol, device=device, submissions=submissions, zoo=zoo, limits=limits,
                      progress=progress)
    if v.ok and _bytes_or_none(path) != data:
        v.problems.append("the record's file changed while it was verified; add it again")
    if v.ok:
        old = _bytes_or_none(dest) if os.path.lexists(dest) else None
        if old != data:
            atomic_write(dest, lambda tmp: tmp.write_bytes(data))
        v.added, v.replaced = str(dest), old is not None and old != data
    return v


def _bytes_or_none(path: Path) -> bytes | None:
    """A record file's bytes (a regular file within the size cap, not a link), None when it is not one."""
    try:
        return read_capped(path, RECORD_MAX_BYTES, what="result record")
    except GenbenchError:
        return None
