"""The result record: one JSON object per (entry, zoo). The only place its field names are written: the
constructors of a scored, a failed and a baseline record and their provenance; read through `Record`'s typed
accessors; written, read and found on disk; the merge of the shipped and the user's folders the leaderboard shows."""
from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import shlex
import subprocess
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson

from . import paths
from .defaults import AUTO_AUDIT, MAX_N_BOOT, OFFICIAL_ZOOS, SHIPPED_RESULTS, TRAININGS
from .errors import GenbenchError, did_you_mean
from .fileio import json_safe, read_capped, write_json_atomic
from .paths import plain_name, results_dir
from .text import TEXT_LIMIT, excerpt, plain_text, safe_text
from .scoring.spec import DEFAULT_SORT, SCORE_NAMES, MeasureScores
from .version import __version__

if TYPE_CHECKING:
    from .measures import Measure
    from .zoo.storage import Zoo

T = TypeVar("T")
SCHEMA = 3  # 3: the direction-held k-fold R^2, delta_r2, the direction check; 2: pooled repeated k-fold, paired
#              resamples, baselines, refusals (docs/architecture.md)
REQUIRED = ("schema", "name", "measure", "zoo", "status")
RECORD_MAX_BYTES = 64 * 2**20  # a record holds per-model values: ~0.3 MB on a zoo of 200 models


def finite(x: Any) -> float | None:
    """A finite float, or None for None, NaN, infinities, booleans and anything not a number."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer of hundreds of digits
        return None
    return v if math.isfinite(v) else None


def json_kind(x: Any) -> str:
    """How an error message names a JSON value that is not what a field needs: 'null', 'an array', 'the string
    'abc'', 'NaN', 'infinite', 'true', ..."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, str):
        return f"the string {excerpt(x)}"
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else "infinite"
    if isinstance(x, (int, float)):
        return excerpt(x)
    return "an array" if isinstance(x, list) else "an object" if isinstance(x, Mapping) else f"a {type(x).__name__}"


def _mapping(x: Any) -> Mapping[str, Any] | None:
    return x if isinstance(x, Mapping) else None


# ------------------------------------------------------------------------------------------------ making records

def git_commit(cwd: str | Path | None = None) -> str | None:
    """The commit of the genbench checkout (None outside a git work tree)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def zoo_block(zoo: Zoo) -> dict[str, Any]:
    """The record's zoo block; on a partial zoo only, also `complete: false` and the counts (so that records on
    complete zoos read exactly as before)."""
    info = {"name": zoo.name, "version": zoo.version, "table_sha256": zoo.table_sha256,
            "revision": getattr(zoo, "revision", None)}
    if getattr(zoo, "repo_id", None):  # a Hub zoo: where `genbench verify` downloads it again
        info["repo"] = zoo.repo_id
    if zoo.manifest.get("external"):  # a value table from elsewhere: its file, hash, target and columns
        info["external"] = zoo.manifest["external"]
    if not zoo.complete:
        info.update(complete=False, models=len(zoo), expected_models=zoo.expected_models)
    return info


def provenance(m: Measure | None, *, device: str, seconds: float, command: str, **extra: Any) -> dict[str, Any]:
    """Who made a record, with what, how long it took and the command that makes it again; `extra`: the settings
    verify repeats (seed, n_boot, audit_zoo, ...)."""
    import torch
    return {"genbench_version": __version__, "git_commit": git_commit(),
            "measure_version": m.version if m else None, "measure_source_hash": m.source_hash if m else None,
            "device": device, "seconds": round(seconds, 3),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command,
            "python": platform.python_version(), "torch": torch.__version__, **extra}


def command_line(base: str, *options: tuple[str, Any, Any]) -> str:
    """`base` and each (flag, value, default) whose value is not its default (a flag alone where the value is True):
    the command that makes a record again with the settings it was made with, for its provenance."""
    words = [base]
    for flag, value, default in options:
        if value != default:
            text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
            words.append(flag if value is True else f"{flag} {shlex.quote(text)}")
    return " ".join(words)


def audit_options(audit_zoo: str | None, auto: str | None) -> tuple[tuple[str, Any, Any], ...]:
    """command_line's options for the audit zoo a record is audited on (''/None: no audit); the one AUTO_AUDIT picks
    for its zoo (`auto`) is the default, so a re-run that names it (verify does) says the same command."""
    shown = AUTO_AUDIT if audit_zoo and audit_zoo == auto else audit_zoo
    return ("--no-audit", not shown, False), ("--audit-zoo", shown or AUTO_AUDIT, AUTO_AUDIT)


def _entry(name: str, m: Measure | None, measure: str, zoo: Zoo, submission: dict | None) -> dict[str, Any]:
    return {"schema": SCHEMA, "name": name, "measure": measure, "kind": m.kind if m else None,
            "citation": m.citation if m else None, "higher_means": m.higher_means if m else None,
            "builtin": submission is None, "submission": submission, "zoo": zoo_block(zoo)}


def values_block(model_ids: list[str], gap: list[float], value: Any, error: list[str | None] | None,
                 heldout: Any) -> dict[str, Any]:
    """Per-model values: the measure (scalar or signature rows; None for a baseline), its failures, the gap, and
    the held-out predictions of every shuffle ([R][n], None where a model has no value) with shuffle 0's."""
    rows = None if heldout is None else [[v if math.isfinite(v) else None for v in map(float, row)]
                                         for row in heldout]
    return {"model_id": model_ids, "gap": gap, "value": value, "error": error,
            "prediction": rows[0] if rows else None, "heldout": rows}


def _outcome(rec: dict[str, Any], *, ok: bool, failure: str | None, prov: dict[str, Any],
             scores: dict[str, Any] | None = None, audit: dict[str, Any] | None = None,
             values: dict[str, Any] | None = None) -> dict[str, Any]:
    """`rec` (its entry and zoo) completed with how it ended: scored, or failed with no scores, audit or values."""
    if not ok:
        scores = audit = values = None
    rec.update(status="ok" if ok else "failed", failure=failure, scores=scores, audit=audit, values=values,
               provenance=prov)
    return json_safe(rec)


def scored_record(name: str, m: Measure, zoo: Zoo, *, scores: dict[str, Any], audit: dict[str, Any] | None,
                  values: dict[str, Any], prov: dict[str, Any], submission: dict | None = None) -> dict[str, Any]:
    """The record of an entry scored on a zoo: its scores block, audit report, per-model values and provenance."""
    return _outcome(_entry(name, m, m.name, zoo, submission), ok=True, failure=None, scores=scores, audit=audit,
                    values=values, prov=prov)


def failed_record(name: str, m: Measure | None, measure: str, zoo: Zoo, reason: str, *, prov: dict[str, Any],
                  submission: dict | None = None) -> dict[str, Any]:
    """The record saying that an entry could not be scored on a zoo, and why (`m`: None when the measure is not
    registered here)."""
    return _outcome(_entry(name, m, measure, zoo, submission), ok=False, failure=reason, prov=prov)


def baseline_record(name: str, citation: str, zoo: Zoo, *, scores: dict[str, Any] | None, failure: str | None,
                    values: dict[str, Any] | None, prov: dict[str, Any]) -> dict[str, Any]:
    """The record of a baseline row (a reference predictor, not a measure): scored, or failed with `failure`."""
    rec = {"schema": SCHEMA, "name": name, "measure": name, "kind": "baseline", "citation": citation,
           "higher_means": None, "builtin": True, "baseline": True, "submission": None, "zoo": zoo_block(zoo)}
    ok = scores is not None
    return _outcome(rec, ok=ok, failure=None if ok else failure, scores=scores, values=values, prov=prov)


def external_record(name: str, zoo: Zoo, *, column: str, higher_means: str | None, scores: dict[str, Any],
                    values: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """The record of a measure column of a value table from elsewhere, scored as a measure is: marked external (its
    values were computed by others, so it is never verified and never ranked officially)."""
    rec = {"schema": SCHEMA, "name": name, "measure": column, "kind": "scalar",
           "citation": f"column {column!r} of {zoo.manifest['external']['file']}",
           "higher_means": higher_means, "builtin": False, "external": True, "submission": None,
           "zoo": zoo_block(zoo)}
    return _outcome(rec, ok=True, failure=None, scores=scores, values=values, prov=prov)


def declare_measure(rec: dict[str, Any], *, kind: str, citation: str | None, higher_means: str | None,
                    version: Any) -> dict[str, Any]:
    """`rec` saying what a measure declared about itself (a submission's, known only once its code ran)."""
    rec.update(kind=kind, citation=citation, higher_means=higher_means)
    rec["provenance"]["measure_version"] = version
    return rec


def with_failure(rec: dict[str, Any], reason: str) -> dict[str, Any]:
    """`rec` with its failure worded as `reason`."""
    rec["failure"] = reason
    return rec


def as_submission(rec: dict[str, Any], *, source_hash: str, device: str, seconds: float, sandbox: str,
                  budget_s: float | None) -> dict[str, Any]:
    """What every record of a submission says beside its scores: not built in, the parent's hash of measure.py,
    the device the values were computed on, the run's wall-clock seconds, the sandbox and the budget."""
    rec["builtin"] = False
    rec["provenance"].update(measure_source_hash=source_hash, device=device, seconds=round(seconds, 3),
                             sandbox=sandbox, budget_s=budget_s)
    return rec


# ------------------------------------------------------------------------------------------------ reading records

class _Field(Generic[T]):
    """A field of the record, or of one of its blocks (zoo, audit, provenance), read as is; None when missing."""

    def __init__(self, doc: str, *, block: str = "", key: str = ""):
        self.__doc__, self.block, self.key = doc, block, key

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    def __get__(self, rec: Record | None, owner: type | None = None) -> T:
        if rec is None:
            return self  # type: ignore[return-value]
        source = getattr(rec, self.block) if self.block else rec.data
        return source.get(self.key) if source else None


class _Block:
    """A part of a record read from its JSON object; a missing field reads as None."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        """The part from its JSON object."""
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Check(_Block):
    """One check of a fragility audit: a statistic against its threshold, failed (None: not applicable)."""

    part: str | None = None
    label: str | None = None
    statistic: str | None = None
    value: float | None = None
    threshold: str | None = None
    failed: bool | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Fit(_Block):
    """How the scores were fitted: models scored and dropped, the target, phi, intercept and coefficients."""

    n: int | None = None
    dropped: int | None = None
    target: str | None = None
    transform: str | None = None
    intercept: float | None = None
    coef: list[float] | None = None


class Record(Mapping[str, Any]):
    """A read-only view of one record's JSON object with typed accessors; a missing or malformed part reads
    as None (or empty), so that a page can show any record it is given."""

    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]):
        self.data = data

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Record:
        """`record` as a Record (itself when it is one)."""
        return record if isinstance(record, Record) else cls(record)

    @classmethod
    def read(cls, path: str | Path) -> Record:
        """Load and check one record file."""
        return cls(read_record(path))

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"Record({self.zoo_name}/{self.name}, {self.status})"

    def shown(self, attr: str, *, limit: int | None = TEXT_LIMIT, markup: bool = True) -> str:
        """An accessor's value as text safe on a terminal ('' for None): `r.shown("failure")`, `r.shown("title")`,
        `r.shown("name")`. Everything a record holds is untrusted (a forged record's fields may carry control
        sequences, bidirectional overrides or rich markup), so views show its strings through this or
        genbench.text: escaped for rich (`markup`), else plain (`plain_text`); the record keeps what it holds."""
        value = getattr(self, attr)
        if value is None:
            return ""
        return (safe_text if markup else plain_text)(value, limit=limit)

    # ------------------------------------------------------------ the entry

    measure: _Field[str | None] = _Field("The registered measure the entry runs.")
    kind: _Field[str | None] = _Field("'scalar' or 'signature'.")
    citation: _Field[str | None] = _Field("The paper the measure comes from.")
    higher_means: _Field[str | None] = _Field("'larger_gap' or 'smaller_gap': what a higher value of the measure "
                                              "says (None: it does not say).")
    builtin: _Field[bool | None] = _Field("Whether the entry is a built-in measure (not a submission).")
    failure: _Field[str | None] = _Field("Why a failed entry failed.")
    schema: _Field[int | None] = _Field("The version of the record format.")

    @property
    def name(self) -> str:
        """The entry's name (unique per zoo; the file name)."""
        return str(self.data.get("name", "?"))

    @property
    def status(self) -> str:
        """'ok' or 'failed' (a record that does not say counts as ok)."""
        return str(self.data.get("status", "ok"))

    # as written, for checking a record that untrusted code wrote: no default, no conversion to text
    written_name: _Field[Any] = _Field("The name as written; None when missing.", key="name")
    written_status: _Field[Any] = _Field("The status as written; None when missing.", key="status")

    @property
    def baseline(self) -> bool:
        """Whether the entry is a baseline row (baseline.hparams, ...): ranked among the measures for comparison,
        but given no rank number (across zoos, its place among the measures stands for a mean rank)."""
        return self.data.get("baseline") is True

    @property
    def ok(self) -> bool:
        """Whether the entry was scored."""
        return self.status == "ok"

    @property
    def submission(self) -> Mapping[str, Any] | None:
        """The submission's metadata (title, authors, contact, paper_url, licence, entry, path), if submitted."""
        return _mapping(self.data.get("submission"))

    @property
    def title(self) -> str | None:
        """A submission's title (None for a built-in); untrusted text: show it with `shown("title")`."""
        t = (self.submission or {}).get("title")
        return None if t is None else str(t)

    @property
    def submission_path(self) -> str | None:
        """The submission's folder, from which `genbench verify` imports its measure.py again."""
        return (self.submission or {}).get("path")

    # ------------------------------------------------------------ the zoo

    zoo_revision: _Field[str | None] = _Field("The Hub revision of the zoo, for a downloaded one.", block="zoo",
                                              key="revision")
    zoo_repo: _Field[str | None] = _Field("The Hub repository of the zoo, for a downloaded one.", block="zoo",
                                          key="repo")
    table_sha256: _Field[str | None] = _Field("The hash of the zoo table the entry was scored on.", block="zoo")
    written_zoo_name: _Field[Any] = _Field("The zoo's name as written; None when missing.", block="zoo", key="name")
    zoo_models: _Field[int | None] = _Field("How many models the zoo held, on a partial zoo (None on a complete one).",
                                            block="zoo", key="models")
    zoo_expected_models: _Field[int | None] = _Field("How many models the zoo's recipe makes, on a partial zoo (None "
                                                     "on a complete one).", block="zoo", key="expected_models")

    def zoo_source(self) -> tuple[str, str | None]:
        """How to open the zoo the record was made on: (`load_zoo` name, revision): `hf://REPO` at the recorded
        commit for a zoo downloaded from the Hub, else the zoo's name (a local build)."""
        repo = self.zoo_repo
        return (f"hf://{repo}", self.zoo_revision) if isinstance(repo, str) and repo else (self.zoo_name, None)

    @property
    def external(self) -> bool:
        """Whether the record scores a value table from elsewhere (`genbench score --values`): never verified, never
        ranked officially."""
        return self.data.get("external") is True or bool(self.zoo.get("external"))

    @property
    def zoo_complete(self) -> bool:
        """Whether the entry was scored on every model of its zoo's recipe: only a partial record says
        `complete: false` (with the counts); such a record is never ranked beside complete ones."""
        return self.zoo.get("complete") is not False

    @property
    def zoo(self) -> Mapping[str, Any]:
        """The zoo block: name, version, table_sha256, revision (and complete, models, expected_models on a partial
        zoo)."""
        z = self.data.get("zoo")
        return z if isinstance(z, Mapping) else {"name": z} if z else {}

    @property
    def zoo_name(self) -> str:
        """The zoo the record belongs to ('unknown' when it does not say)."""
        return str(self.zoo.get("name") or "unknown")

    # ------------------------------------------------------------ scores

    @property
    def scores(self) -> Mapping[str, Any]:
        """The scores block (empty for a failed record)."""
        return _mapping(self.data.get("scores")) or {}

    def _block_of(self, key: str) -> Mapping[str, Any]:
        """Where a score is read from: over trainings, their combination (the mean, with an interval that holds the
        training noise) for the scores combined; else the scores block (training 0's). A name that is neither a
        score genbench computes nor one the record holds (a typo) is refused, not read as a missing score."""
        if key not in SCORE_NAMES and key not in self._held():
            raise did_you_mean(key, [*SCORE_NAMES, *self._held()], what="score",
                               hint="Record.score_keys() lists the scores this record holds.")
        combined = _mapping(self.trainings.get("combined"))
        if combined and (key in (_mapping(combined.get("values")) or {})
                         or key in (_mapping(combined.get("refused")) or {})):
            return combined
        return self.scores

    def score(self, key: str) -> float | None:
        """One score's value (over trainings: the mean over them); None when missing, refused or not finite."""
        values = _mapping(self._block_of(key).get("values"))
        return finite(values.get(key)) if values and not self.refusal(key) else None

    def refusal(self, key: str) -> str | None:
        """Why a score is refused (not reported: too few models, estimate outside its interval, ...); None if not."""
        reason = (_mapping(self._block_of(key).get("refused")) or {}).get(key)
        return None if reason is None else str(reason) or "refused"

    @property
    def refused(self) -> dict[str, str]:
        """Every refused score with its reason."""
        keys = set(_mapping(self.scores.get("refused")) or {}) | set(
            _mapping((_mapping(self.trainings.get("combined")) or {}).get("refused")) or {})
        return {k: r for k in sorted(keys) if (r := self.refusal(k)) is not None}

    def interval(self, key: str) -> tuple[float | None, float | None]:
        """One score's 95% interval (over trainings: the two-stage interval of the mean); (None, None) when missing
        (no real interval) or refused."""
        iv = (_mapping(self._block_of(key).get("intervals")) or {}).get(key)
        if self.refusal(key):
            return None, None
        if not isinstance(iv, (list, tuple)) or len(iv) != 2:
            return None, None
        return finite(iv[0]), finite(iv[1])

    def _held(self) -> set[str]:
        """Every score name the record's scores block or its combination over trainings mentions."""
        combined = _mapping(self.trainings.get("combined")) or {}
        return {k for block in (self.scores, combined) for part in ("values", "intervals", "refused")
                for k in (_mapping(block.get(part)) or {}) if isinstance(k, str)}

    def score_keys(self) -> list[str]:
        """The scores the record holds (a value or an interval), in the score list's order, then others by name."""
        held = (set(_mapping(self.scores.get("values")) or {}) | set(_mapping(self.scores.get("intervals")) or {})
                | set(self.refused))
        return [k for k in SCORE_NAMES if k in held] + sorted(held - set(SCORE_NAMES))

    @property
    def direction(self) -> Mapping[str, Any]:
        """A scalar's claim checked (scores.direction): claim, slope and tau signs, against; {} when not checked."""
        return _mapping(self.scores.get("direction")) or {}

    @property
    def against_claim(self) -> bool:
        """Whether the entry's free slope or Kendall tau runs against the direction its measure declares (over
        trainings: on most of them, `verdict_over('against_claim')`)."""
        over = self.verdict_over("against_claim")
        if over is not None and over["trainings"][1] > 1:
            return bool(over["holds"])
        return self.direction.get("against") is True

    # ------------------------------------------------------------ trainings of the grid

    @property
    def provisional(self) -> bool:
        """Whether it is an entry of an official zoo scored on fewer trainings of its grid than the official records
        (defaults.TRAININGS): ranked, but marked, with the command that completes it."""
        return self.ok and self.zoo_name in OFFICIAL_ZOOS and self.n_trainings < TRAININGS

    @property
    def trainings(self) -> Mapping[str, Any]:
        """The scores on each training of the zoo's grid and their combination (entries/trainings.py); {} for an
        entry scored on one training."""
        return _mapping(self.data.get("trainings")) or {}

    @property
    def n_trainings(self) -> int:
        """On how many trainings of its grid the entry is scored (1 without a trainings block)."""
        zoos = self.trainings.get("zoos")
        return len(zoos) if isinstance(zoos, list) and zoos else 1

    @property
    def training_names(self) -> list[str]:
        """The zoos of the trainings it is scored on, training 0 first."""
        zoos = self.trainings.get("zoos")
        if not isinstance(zoos, list) or not zoos:
            return [self.zoo_name]
        return [str((_mapping(z) or {}).get("name")) for z in zoos]

    def training_part(self, t: int) -> Mapping[str, Any]:
        """Training t's part of the trainings block (its scores, and for t >= 1 its gaps and held-out predictions);
        {} when absent."""
        zoos = self.trainings.get("zoos")
        return (_mapping(zoos[t]) or {}) if isinstance(zoos, list) and 0 <= t < len(zoos) else {}

    def training_scores(self, key: str) -> list[float | None]:
        """Score `key` on each training, in order (None where a training has no finite value of it)."""
        return [finite((_mapping(self.training_part(t).get("values")) or {}).get(key)) for t in range(self.n_trainings)]

    @property
    def verdicts(self) -> Mapping[str, Any]:
        """The verdicts over trainings (scores.verdicts): beats_recipe, adds_to_recipe, against_claim, each
        {holds, trainings: [held, of], open (trainings whose interval contains 0), settled, and for the two read
        from an interval predicted (where the next training's interval is predicted to lie)}."""
        return _mapping(self.scores.get("verdicts")) or {}

    def verdict_over(self, key: str) -> dict[str, Any] | None:
        """One verdict over trainings, checked for shape; None when the record does not state it."""
        v = _mapping(self.verdicts.get(key))
        t = v.get("trainings") if v else None
        if not v or not isinstance(t, list) or len(t) != 2 or not all(isinstance(x, int) for x in t):
            return None
        o, p = v.get("open"), v.get("predicted")
        ends = [finite(x) for x in p] if isinstance(p, list) and len(p) == 2 else [None]
        return {"holds": v.get("holds") is True, "trainings": [int(t[0]), int(t[1])], "settled": v.get("settled") is True,
                "open": o if isinstance(o, int) else 0, "predicted": None if None in ends else ends}

    @property
    def fit(self) -> Fit:
        """How the scores were fitted."""
        return Fit.from_dict(self.scores)

    @property
    def notes(self) -> list[str]:
        """What could not be computed, and why."""
        return list(self.scores.get("notes") or [])

    def note_on(self, family: str) -> str | None:
        """The first note about a score family (one that starts with it, e.g. 'robust sign-error: ...')."""
        return next((n for n in self.notes if str(n).lower().startswith(family.lower())), None)

    @property
    def spread(self) -> Mapping[str, list[float]]:
        """Per-shuffle values of the repeated k-fold scores: {"kfold_r2": [R values], "mse": [R values]}."""
        return _mapping(self.scores.get("spread")) or {}

    @property
    def kfold(self) -> Mapping[str, Any]:
        """The cross-validation: k, repeats and the shuffle seeds."""
        return _mapping(self.scores.get("kfold")) or {}

    @property
    def bootstrap(self) -> Mapping[str, Any]:
        """The paired bootstrap's settings: seed, n_boot and the table_sha256 its resamples derive from."""
        return _mapping(self.scores.get("bootstrap")) or {}

    @property
    def paired_settings(self) -> tuple[str, int, int] | None:
        """What its rank group is paired on: (table hash, seed, n_boot) of the bootstrap, from scores.bootstrap (else
        the zoo block and the provenance); None when it does not say them."""
        bs, prov = self.bootstrap, self.provenance
        table, seed, n_boot = (bs.get("table_sha256") or self.table_sha256, bs.get("seed", prov.get("seed")),
                               bs.get("n_boot", prov.get("n_boot")))
        try:
            return (str(table), int(seed), int(n_boot)) if table and seed is not None and n_boot is not None else None
        except (TypeError, ValueError, OverflowError):
            return None

    @property
    def transform_used(self) -> Mapping[str, Any]:
        """The phi used: {"all": phi of the fit on all models, "folds": {phi: how many training folds chose it}}."""
        return _mapping(self.scores.get("transform_used")) or {}

    @property
    def unconverged(self) -> int | None:
        """How many of the scored models did not converge (None: the record does not say)."""
        v = finite(self.scores.get("unconverged"))
        return None if v is None else int(v)

    def measure_scores(self) -> MeasureScores:
        """The scores block as the scorer's MeasureScores."""
        return MeasureScores.from_dict(dict(self.scores))

    # ------------------------------------------------------------ audit, values, provenance

    verdict: _Field[str | None] = _Field("The audit's verdict, if audited.", block="audit")
    audit_zoo: _Field[str | None] = _Field("The zoo the audit ran on.", block="audit", key="zoo")
    command: _Field[str | None] = _Field("The command that (re)produces the record.", block="provenance")
    source_hash: _Field[str | None] = _Field("The sha256 of the measure's module when the record was made.",
                                             block="provenance", key="measure_source_hash")

    @property
    def audit(self) -> Mapping[str, Any] | None:
        """The fragility audit (zoo, verdict, checks, notes), if audited."""
        return _mapping(self.data.get("audit"))

    @property
    def checks(self) -> list[Check]:
        """The audit's checks."""
        return [Check.from_dict(c) for c in (self.audit or {}).get("checks") or [] if isinstance(c, Mapping)]

    @property
    def audit_missing(self) -> list[tuple[str, str]]:
        """The audit's parts that could not run, each with why (they make a verdict inconclusive)."""
        out = []
        for m in (self.audit or {}).get("missing") or []:
            if isinstance(m, (list, tuple)) and m:
                out.append((str(m[0]), str(m[1]) if len(m) > 1 else ""))
            elif isinstance(m, Mapping):
                out.append((str(m.get("part", "?")), str(m.get("reason", ""))))
        return out

    @property
    def audit_notes(self) -> list[str]:
        """The audit's notes."""
        return list((self.audit or {}).get("notes") or [])

    @property
    def values(self) -> Mapping[str, Any] | None:
        """Per-model values: model_id (sorted), gap, value, error, prediction (shuffle seed 0) and heldout (the
        held-out predictions of every shuffle: R lists of one value or null per model)."""
        return _mapping(self.data.get("values"))

    @property
    def model_ids(self) -> list[str] | None:
        """The zoo's model ids the values are given for (None when the record holds none)."""
        ids = (self.values or {}).get("model_id")
        return [str(i) for i in ids] if isinstance(ids, list) else None

    @property
    def heldout(self) -> list[list[float | None]] | None:
        """The held-out predictions of every shuffle ([R][n], null where a model has no value); None if absent."""
        h = (self.values or {}).get("heldout")
        return h if isinstance(h, list) and h and all(isinstance(row, list) for row in h) else None

    def predicted_gaps(self) -> tuple[list[float], list[float]]:
        """The (true gap, k-fold held-out prediction) pairs where both are finite."""
        vals = self.values or {}
        gap, pred = vals.get("gap"), vals.get("prediction")
        if not isinstance(gap, list) or not isinstance(pred, list) or len(gap) != len(pred):
            return [], []
        pairs = [(finite(g), finite(p)) for g, p in zip(gap, pred)]
        pairs = [(g, p) for g, p in pairs if g is not None and p is not None]
        return [g for g, _ in pairs], [p for _, p in pairs]

    @property
    def provenance(self) -> Mapping[str, Any]:
        """genbench version, git commit, measure version and source hash, device, seconds, date, command, and
        the seed, resamples, budget and audit zoo the record was made with (as written: `genbench verify` takes them
        only within genbench's bounds, entries.verify.trusted_settings)."""
        return _mapping(self.data.get("provenance")) or {}

    # ------------------------------------------------------------ the ranking

    @property
    def rank(self) -> float | None:
        """The rank on its zoo, once ranked (None: not ranked)."""
        return finite(self.data.get("rank"))

    @property
    def rank_group(self) -> float | None:
        """The rank group on its zoo, once ranked."""
        return finite(self.data.get("rank_group"))

    @property
    def group_trainings(self) -> list[int] | None:
        """Once ranked over trainings: [on how many trainings its rank group is the same as over all of them, of
        how many]; None otherwise."""
        g = self.data.get("group_trainings")
        return [int(g[0]), int(g[1])] if isinstance(g, list) and len(g) == 2 and all(
            isinstance(x, int) for x in g) else None

    @property
    def aliases(self) -> list[str]:
        """Entries equivalent to this one on its zoo (the same held-out predictions and scores), shown as this one."""
        return [str(a) for a in self.data.get("aliases") or []]

    def with_rank(self, rank: int | None, group: int | None, aliases: list[str] | None = None) -> Record:
        """A copy that carries a rank, a rank group and (once ranked) the names of its equivalent entries."""
        extra = {} if aliases is None else {"aliases": list(aliases)}
        return Record({**self.data, "rank": rank, "rank_group": group, **extra})

    # ------------------------------------------------------------ where it was read from

    @property
    def local(self) -> bool:
        """Whether the record is the user's own (read from a folder other than the shipped one: not verified);
        False until the leaderboard reads it (`with_local`)."""
        return self.data.get("local") is True

    def with_local(self, local: bool) -> Record:
        """A copy that says whether it is the user's own, unverified record (whatever its file says)."""
        return Record({**self.data, "local": bool(local)})


def record_path(record: Mapping[str, Any], root: str | Path | None = None) -> Path:
    """Where a record lives: ROOT/<zoo>/<name>.json (ROOT: the user's results folder, $GENBENCH_HOME/results). Its zoo
    and entry names come from the record, so each must be a plain file name (`paths.plain_name`), else a
    GenbenchError: a record never chooses a path outside ROOT/<zoo>/."""
    r = Record.of(record)
    zoo = plain_name(r.written_zoo_name, what="zoo name", source=f"the record's field zoo.name (entry {r.name!r})")
    name = plain_name(r.written_name, what="entry name", source=f"the record's field name (zoo {r.zoo_name!r})")
    return Path(root if root is not None else results_dir()) / zoo / f"{name}.json"


def write_record(record: Mapping[str, Any], root: str | Path | None = None) -> Path:
    """Write a record atomically to ROOT/<zoo>/<name>.json (ROOT: the user's results folder by default)."""
    data = record.data if isinstance(record, Record) else record
    return write_json_atomic(record_path(record, root), json_safe(dict(data)))


FALLBACK_RESULTS = "genbench-results"  # the folder under the system's temporary folder a record falls back to


def fallback_results_dir() -> Path:
    """Where a record goes when its results folder cannot be written after the work: the system's temporary folder."""
    import tempfile
    return Path(tempfile.gettempdir()) / FALLBACK_RESULTS


def write_record_safely(record: Mapping[str, Any], root: str | Path | None = None,
                        say: Callable[[str], None] | None = None) -> Path:
    """write_record, and where that fails once the work is done (the results folder became unwritable, the disk
    filled up) the record written under fallback_results_dir() instead, with one line to `say` (default: a warning)
    naming both places, so that the work is not lost."""
    try:
        return write_record(record, root)
    except OSError as e:
        target = record_path(record, root)
        path = write_record(record, fallback_results_dir())
        (say or warnings.warn)(f"cannot write the record to {target} ({e.strerror or e}); written to {path} instead "
                               f"(`genbench leaderboard --results {fallback_results_dir()}` shows it)")
        return path


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and check one record file; its JSON object (JSON only: nothing is unpickled). The file is read only as
    a regular file (not through a link) of at most RECORD_MAX_BYTES."""
    path = Path(path)
    return parse_record(read_capped(path, RECORD_MAX_BYTES, what="result record"), path)


_DIGIT_RUNS = bytes(48 if 48 <= i <= 57 else i if i == 46 else 32 for i in range(256))  # digits '0', '.' kept, else ' '
_LONG_INTEGER = b" " + b"0" * 19  # 19 digits after neither a digit nor '.': an integer part orjson may read as a float


def loads_json(data: bytes) -> Any:
    """The JSON value of UTF-8 bytes, as json.loads reads it: orjson (several times faster on the shipped records,
    which the leaderboard reads whole), and the standard library where orjson refuses what json accepts (NaN,
    Infinity, a number beyond a double's range, a lone surrogate) or to give json's own error, and where a number
    has an integer part of 19 or more digits (orjson reads an integer beyond 64 bits as a float; json keeps it).
    One difference is left: orjson reads arrays and objects nested up to 1024 deep, where json runs out of Python's
    recursion at about 1000 less the caller's depth (no record is nested more than a few levels)."""
    digits = data.translate(_DIGIT_RUNS)
    if _LONG_INTEGER not in digits and not digits.startswith(_LONG_INTEGER[1:]):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data.decode("utf-8"))


def parse_record(data: bytes, path: str | Path) -> dict[str, Any]:
    """Check the bytes of a record file read from `path` (named in the errors); its JSON object."""
    path = Path(path)
    try:
        rec = loads_json(data)
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, an integer of thousands of digits
        why = ("nested too deeply" if isinstance(e, RecursionError) else "not UTF-8 text"
               if isinstance(e, UnicodeDecodeError) else f"not JSON ({e})")
        raise GenbenchError(f"cannot read result record {path}: {why}; a record is the JSON file that `genbench "
                            "submit` or `genbench leaderboard run` writes") from None
    if not isinstance(rec, dict):
        raise GenbenchError(f"{path} is not a genbench result record: it is {json_kind(rec)}, not a JSON object")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise GenbenchError(f"{path} is not a genbench result record: missing {missing}")
    schema = rec["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise GenbenchError(f"{path} is not a genbench result record: its field schema is {json_kind(schema)}, but a "
                            f"record's schema is an integer (this genbench reads schema {SCHEMA}); regenerate it with "
                            f"`{regenerate_command(rec)}`")
    if schema != SCHEMA:
        raise SchemaError(_schema_error(path, rec))
    if not isinstance(rec["zoo"], dict) or not rec["zoo"].get("name"):
        zoo = rec["zoo"]
        what = f"its field zoo is {json_kind(zoo)}" if not isinstance(zoo, dict) else "its zoo block has no name"
        raise GenbenchError(f"{path} is not a genbench result record: {what}; a record's zoo is an object with the "
                            "zoo's name")
    fault = record_fault(rec)
    if fault:
        raise GenbenchError(f"{path} is a malformed result record: {fault}; regenerate it with "
                            f"`{regenerate_command(rec)}`, or remove the file")
    return rec


STATUSES = ("ok", "failed")


def record_fault(rec: Mapping[str, Any]) -> str | None:
    """What makes a record unfit to show, in one phrase that names the field (None: nothing): a status other than
    ok or failed; for a scored record, a broken block of scores (`scores_fault`) or of per-model values
    (`values_fault`)."""
    status = rec.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        return f"its field status is {json_kind(status)}, not 'ok' or 'failed'"
    if status != "ok":
        return None
    r = Record(rec)
    combined = r.trainings.get("combined")
    return (scores_fault(rec.get("scores"), "scores")
            or (None if combined is None else scores_fault(combined, "trainings.combined"))
            or values_fault(r))


def scores_fault(block: Any, where: str) -> str | None:
    """What is wrong with a block of scores (`where`: its place in the record): not an object, no values object, a
    score that is neither a finite number nor null, or the ranking score null where `refused` gives no reason (a
    refused score is the one legitimate gap: other scores are null where their statistic was NaN)."""
    if not isinstance(block, Mapping):
        return f"{where} is {json_kind(block)}, not an object"
    values = block.get("values")
    if not isinstance(values, Mapping):
        return f"{where}.values is " + ("missing" if "values" not in block else f"{json_kind(values)}, not an object")
    refused = _mapping(block.get("refused")) or {}
    for key, v in values.items():
        field = f"{where}.values.{plain_text(key, limit=60)}"
        if v is None and key == DEFAULT_SORT and key not in refused:
            return f"{field} is null and {where}.refused gives no reason"
        if v is not None and (isinstance(v, (bool, str)) or finite(v) is None):
            return f"{field} is {json_kind(v)}, not a finite number"
    return None


def implausible(rec: Record) -> str | None:
    """What no record genbench writes holds (a hand-edited one: ranked first with "k-fold R2 5.000"), in one phrase
    that names the field; None: nothing. The views skip such a record; `verify` still reads it, to show what
    differs. A score beyond the range its statistic has, a score outside its own interval (genbench refuses those),
    more bootstrap resamples than genbench draws (the views draw them again)."""
    if rec.status != "ok":
        return None
    combined = rec.trainings.get("combined")
    for where, block in (("scores", rec.scores), ("trainings.combined", combined)):
        if isinstance(block, Mapping):
            fault = _implausible_block(block, where)
            if fault:
                return fault
    paired = rec.paired_settings  # the resamples the views draw again (from the provenance where scores lack it)
    if paired is not None and paired[2] > MAX_N_BOOT:
        return f"its bootstrap n_boot is {paired[2]:g}, above the {MAX_N_BOOT} resamples genbench draws at most"
    return None


def _implausible_block(block: Mapping[str, Any], where: str) -> str | None:
    values, refused = _mapping(block.get("values")) or {}, _mapping(block.get("refused")) or {}
    for key, raw in values.items():
        v = finite(raw)
        if key in BOUNDED and v is not None and not BOUNDED[key][0] <= v <= BOUNDED[key][1]:
            return (f"{where}.values.{key} is {v:g}, which no {key} can be (it lies in [{BOUNDED[key][0]:g}, "
                    f"{BOUNDED[key][1]:g}])")
    intervals = _mapping(block.get("intervals")) or {}
    for key, iv in intervals.items():
        v, ends = finite(values.get(key)), [finite(e) for e in iv] if isinstance(iv, list) and len(iv) == 2 else []
        if v is not None and len(ends) == 2 and None not in ends and key not in refused and not (
                ends[0] - SLACK * (1 + abs(ends[0])) <= v <= ends[1] + SLACK * (1 + abs(ends[1]))):
            return (f"{where}.values.{plain_text(key, limit=60)} {v:g} lies outside its own interval [{ends[0]:g}, "
                    f"{ends[1]:g}]: genbench refuses such a score and never writes one")
    n_boot = (_mapping(block.get("bootstrap")) or {}).get("n_boot")
    if isinstance(n_boot, (int, float)) and not isinstance(n_boot, bool) and n_boot > MAX_N_BOOT:
        return f"{where}.bootstrap.n_boot is {n_boot:g}, above the {MAX_N_BOOT} resamples genbench draws at most"
    return None


BOUNDED = {"kfold_r2": (-math.inf, 1.0), "kfold_r2_free": (-math.inf, 1.0), "adj_r2": (-math.inf, 1.0),
           "tau": (-1.0, 1.0), "psi": (-1.0, 1.0), "sign_error_worst": (0.0, 1.0), "sign_error_p90": (0.0, 1.0),
           "sign_error_mean": (0.0, 1.0)}  # the scores a record cannot hold outside these (a hand-edited record)
SLACK = 1e-9  # an estimate this close to its interval's end is inside it (floating point)


PER_MODEL = ("gap", "prediction", "value", "error")  # the values block's lists of one entry per model


def values_fault(r: Record) -> str | None:
    """What is wrong with a scored record's per-model values (its values block, and each later training's gap and
    held-out predictions): not an object, no model ids, a list whose length is not the number of models, gaps or
    held-out predictions that are not numbers, or, beside a k-fold score (ranked in paired rank groups), no values,
    held-out predictions or bootstrap settings to pair it on."""
    values, paired = r.data.get("values"), r.score("kfold_r2") is not None or r.score("mse") is not None
    if values is None and not paired:  # nothing to pair: the leaderboard reads only its scores
        return None
    if not isinstance(values, Mapping):
        return f"values is {json_kind(values)}, not an object"
    ids = values.get("model_id")
    if not isinstance(ids, list) or not ids:
        return f"values.model_id is {'empty' if ids == [] else json_kind(ids)}, not a list of model ids"
    n = len(ids)
    for key in PER_MODEL:
        if values.get(key) is not None or key == "gap":
            fault = _per_model_fault(values.get(key), f"values.{key}", n, numbers=key == "gap")
            if fault:
                return fault
    parts = [("values", values), *((f"trainings.zoos[{t}]", r.training_part(t)) for t in range(1, r.n_trainings))]
    for where, part in parts:
        for key in ("heldout",) if where == "values" else ("gap", "heldout"):
            x = part.get(key)
            if x is None and paired:
                return (f"{where}.{key} is {'null' if key in part else 'missing'}, but the record's k-fold score is "
                        "ranked in paired rank groups, made from the gaps and held-out predictions of every shuffle")
            fault = None if x is None else _per_model_fault(x, f"{where}.{key}", n, numbers=True, rows=key == "heldout")
            if fault:
                return fault
    if paired and r.paired_settings is None:
        return ("scores.bootstrap lacks the seed, n_boot or table_sha256 that its k-fold score's rank group is paired "
                "on")
    return None


def _number_or_null(v: Any) -> bool:
    """Whether a per-model entry is a number numpy reads as a float (NaN included), or null (no value)."""
    return v is None or type(v) is float or type(v) is int and finite(v) is not None


def _per_model_fault(x: Any, where: str, n: int, *, numbers: bool = False, rows: bool = False) -> str | None:
    """What is wrong with a list of one entry per model (`rows`: a list of such lists): not a list, not `n` long
    (the number of model ids), or (`numbers`) entries that are neither numbers nor null."""
    if not isinstance(x, list) or (rows and not x):
        return f"{where} is {'empty' if x == [] else json_kind(x)}, not a list" + (" of lists" if rows else "")
    for i, row in enumerate(x if rows else [x]):
        at = f"{where}[{i}]" if rows else where
        if not isinstance(row, list):
            return f"{at} is {json_kind(row)}, not a list"
        if len(row) != n:
            return f"{at} holds {len(row)} entries for the {n} models of values.model_id"
        if numbers and not (set(map(type, row)) <= {float, type(None)} or all(map(_number_or_null, row))):
            return f"{at} holds {json_kind(next(v for v in row if not _number_or_null(v)))}, not a number"
    return None


PRIVATE = "private"  # a record's key of its private block (entries/private.py writes it)


def private_block(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record's private block as written (a plain dict), None when it has none."""
    data = record.data if isinstance(record, Record) else record
    block = data.get(PRIVATE)
    return block if isinstance(block, dict) else None


def private_score(record: Mapping[str, Any], key: str = "kfold_r2") -> float | None:
    """One private score of a record; None when it has no private block, the run failed, or the score is refused."""
    block = private_block(record)
    scores = block.get("scores") if block and block.get("status") == "ok" else None
    if not isinstance(scores, dict) or (scores.get("refused") or {}).get(key):
        return None
    values = scores.get("values")
    return finite(values.get(key)) if isinstance(values, dict) and not isinstance(values.get(key), bool) else None


class SchemaError(GenbenchError):
    """A record of another schema than this genbench reads (its message says how to get a current one)."""


def _schema_error(path: Path, rec: Mapping[str, Any]) -> str:
    """What is wrong with a record of another schema, and how to get one this genbench reads."""
    found = rec.get("schema")
    if isinstance(found, int) and not isinstance(found, bool) and found > SCHEMA:
        return (f"{path} has record schema {found}, newer than this genbench reads (schema {SCHEMA}): upgrade "
                "genbench")
    zoo = rec.get("zoo")
    zoo = plain_text(zoo.get("name") if isinstance(zoo, Mapping) else zoo, limit=100)
    if found == 2:
        return (f"{path} has record schema 2; this genbench reads schema {SCHEMA}, whose ranking k-fold R^2 holds a "
                "scalar's slope to its declared direction and which says what each entry adds to the recipe: "
                f"re-score it from its stored values with `genbench leaderboard rescore --results {path.parent.parent}"
                f" --zoo {zoo}` (the measure is not run again)")
    return (f"{path} has record schema {excerpt(found)}; this genbench reads schema {SCHEMA} (pooled repeated "
            "k-fold R^2, paired bootstrap resamples, baseline rows), whose scores are not comparable with older ones: "
            f"regenerate it with `{regenerate_command(rec)}`")


def regenerate_command(record: Mapping[str, Any]) -> str:
    """The command that makes a record again, safe to print: a submission's own `genbench submit` command as it
    recorded it, `genbench leaderboard baselines` for a baseline row, else `genbench leaderboard run MEASURE`."""
    data = record.data if isinstance(record, Record) else record
    zoo = data.get("zoo")
    zoo = plain_text(zoo.get("name") if isinstance(zoo, Mapping) else zoo, limit=100)
    prov, sub = _mapping(data.get("provenance")) or {}, _mapping(data.get("submission"))
    command = plain_text(prov.get("command") or "", limit=300)
    if sub and command.startswith("genbench submit"):
        return command
    if data.get("baseline") is True:
        return f"genbench leaderboard baselines --zoo {zoo}"
    return f"genbench leaderboard run {plain_text(data.get('measure') or data.get('name'), limit=100)} --zoo {zoo}"


class SkippedRecordWarning(UserWarning):
    """A file in a results folder that `load_records` skipped: it cannot be read as a record of this genbench."""


def record_files(paths: Iterable[str | Path]) -> list[Path]:
    """The record files `paths` name: a file as given; a folder, the records in it (NAME.json) or, for a results
    folder, in its zoo folders (ZOO/NAME.json), sorted; a folder that holds neither is refused."""
    out: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            out.append(path)
            continue
        found = sorted(path.glob("*.json")) or sorted(path.glob("*/*.json"))
        if not found:
            raise GenbenchError(f"no result records in the folder {path} (neither NAME.json nor ZOO/NAME.json): name "
                                "record files, a zoo's folder of records or a results folder")
        out += found
    return out


def load_records(root: str | Path | None = None, zoo: str | None = None, *,
                 skipped: list[str] | None = None) -> list[Record]:
    """Every record under ROOT (or ROOT/<zoo>), sorted by zoo and name (ROOT: the user's results folder by default).

    A file that cannot be read as a record (not JSON, not a record, a malformed one (`record_fault`), a name that is
    no plain file name, not at the place its own zoo and name give it, or another record schema: then with the
    command that regenerates it) is skipped, so that one bad file never hides the others: why is appended to
    `skipped` when a list is given, else warned (SkippedRecordWarning). `Record.read` of one explicit file still
    raises."""
    if root is not None and not isinstance(root, (str, Path)):
        raise GenbenchError(f"load_records takes a results folder (a path), got {type(root).__name__} {root!r}")
    root = Path(root if root is not None else results_dir())
    if root.exists() and not root.is_dir():
        raise GenbenchError(f"{root} is a file, not a folder: --results takes a folder of result records (its zoo "
                            f"folders hold them as ZOO/NAME.json), e.g. {SHIPPED_RESULTS}")
    if not root.is_dir():
        raise GenbenchError(f"no result records at {root}: run `genbench submit` or `genbench leaderboard run` first, "
                            "or pass --results DIR")
    if zoo:
        plain_name(zoo, what="zoo name", source="the zoo asked for")
    pattern = f"{zoo}/*.json" if zoo else "*/*.json"
    if not any(root.glob("*/*.json")) and any(root.glob("*.json")):  # a zoo's folder of records, given as the root
        raise GenbenchError(f"{root} holds records itself (NAME.json), not in zoo folders (ZOO/NAME.json): a results "
                            f"folder (--results) is the folder of zoo folders above it, {root.parent}")
    recs, why, old = [], [], []
    for p in sorted(root.glob(pattern)):
        try:
            rec = Record.read(p)
            where = record_path(rec, root)
        except SchemaError as e:
            old.append(f"skipped: {e}")
            continue
        except GenbenchError as e:
            why.append(f"skipped {p}: {e}" if str(p) not in str(e) else f"skipped: {e}")
            continue
        if where != p:
            why.append(f"skipped {p}: it is the record of entry {excerpt(rec.name)} on zoo {excerpt(rec.zoo_name)}, "
                       f"whose place is {where}; move it there or remove it")
            continue
        odd = implausible(rec)
        if odd:
            why.append(f"skipped: {p} is an implausible result record: {odd} (was it edited?); regenerate it with "
                       f"`{regenerate_command(rec.data)}`, or remove the file")
            continue
        recs.append(rec)
    if len(old) == 1:
        why += old
    elif old:  # one line for them all: the first says what the schema change is
        why.append(f"skipped {len(old)} record(s) under {root} of another record schema; the first: "
                   f"{old[0].removeprefix('skipped: ')}. `genbench leaderboard rescore --results {root}` re-scores "
                   "those of schema 2; `genbench leaderboard run '*' --zoo ZOO` regenerates every built-in one")
    if skipped is not None:
        skipped.extend(why)
    else:
        for w in why:
            warnings.warn(w, SkippedRecordWarning, stacklevel=2)
    if zoo and not recs:
        zoos = sorted(p.name for p in root.iterdir() if p.is_dir())
        also = f" ({len(why)} file(s) skipped: {why[0]})" if why else ""
        raise GenbenchError(f"no records for zoo {zoo!r} under {root}; zoos with records: {zoos}{also}")
    return recs


def _audited_twin(shown: Record, other: Record) -> bool:
    """Whether `shown` is audited and holds the scores `other` holds, on the same zoo table: `other` (a built-in
    run again without its audit zoo) says nothing more, and showing it would hide the audit."""
    def scores(r: Record) -> tuple[Any, Any]:
        return (r.scores.get("values"), ((r.data.get("trainings") or {}).get("combined") or {}).get("values"))
    return shown.verdict is not None and shown.ok and other.ok and shown.table_sha256 == other.table_sha256 and \
        scores(shown) == scores(other)


def _some(names: Sequence[str], listed: int = 5) -> str:
    """'the records of a, b and c', at most `listed` names and how many more."""
    shown = ", ".join(names[:listed]) + (f" and {len(names) - listed} more" if len(names) > listed else "")
    return f"the record{'s' if len(names) > 1 else ''} of {shown}"


def shown_records(results: Iterable[str | Path] | None = None, zoo: str | None = None, *,
                  say: Callable[[str, str], None] | None = None) -> list[Record]:
    """The records the leaderboard shows: those in each `results` folder, else those in the shipped folder (a
    checkout's leaderboard/results) and the user's ($GENBENCH_HOME/results). Records from any folder but the
    shipped one are marked local; an entry found in two folders is shown once: the later folder's record, unless
    both are the same or the earlier one is audited and the later holds its scores without an audit (a built-in run
    again where its audit zoo is not built). `say(text, kind)` hears what is worth a word ('note' or 'warning'; default: warnings)."""
    if say is None:
        def say(text: str, kind: str) -> None:
            warnings.warn(text, SkippedRecordWarning, stacklevel=3)
    results = [results] if isinstance(results, (str, Path)) else list(results or [])  # one folder, or several
    shipped = paths.shipped_results_dir()
    folders = results or [f for f in (shipped, paths.results_dir()) if f is not None and f.is_dir()]
    if not results and shipped is None:
        say(f"note: genbench runs from an installed package, which ships no records; pass --results "
            f"CHECKOUT/{SHIPPED_RESULTS} --results {paths.results_dir()} to rank yours beside the repository's", "note")
    if not folders:
        raise GenbenchError(f"no result records yet: `genbench submit` and `genbench leaderboard run` write them to "
                            f"{paths.results_dir()}")
    seen: dict[tuple[str, str], tuple[Record, Path, bool]] = {}
    skipped: list[str] = []  # files that are no readable record: reported once, never hiding the others
    replaced: dict[tuple[str, Path, Path], list[str]] = {}  # per zoo and pair of folders: the entries replaced
    kept: dict[tuple[str, Path], list[str]] = {}  # per zoo and folder: records not shown for an audited twin
    for folder in folders:
        local = shipped is None or Path(folder).resolve() != shipped.resolve()
        try:
            found = load_records(folder, skipped=skipped)
        except GenbenchError as e:  # a folder asked for is refused; a default one never hides the others
            if results:
                raise
            skipped.append(str(e))
            continue
        for rec in found:
            key = (rec.zoo_name, rec.name)
            if key in seen and seen[key][0].data == rec.data:
                continue  # the same record in both folders (added to the shipped one): shown once, as the first
            if key in seen and rec.verdict is None and _audited_twin(seen[key][0], rec):
                kept.setdefault((rec.zoo_name, Path(folder)), []).append(rec.name)
                continue
            if key in seen:
                replaced.setdefault((rec.zoo_name, Path(folder), seen[key][1]), []).append(rec.name)
            seen[key] = (rec, Path(folder), local)
    for (z, new, old), names in replaced.items():
        if zoo is None or z == zoo:
            verb = "replace those" if len(names) > 1 else "replaces the one"
            say(f"note: on {z}, {_some(names)} in {new} {verb} in {old}", "note")
    for (z, new), names in kept.items():
        if zoo is None or z == zoo:
            verb = ("have the scores of the audited records shown in their place (theirs are not audited)"
                    if len(names) > 1 else "has the scores of the audited record shown in its place (it is not "
                    "audited)")
            say(f"note: on {z}, {_some(names)} in {new} {verb}", "note")
    for why in skipped:
        say(f"warning: {why}", "warning")
    records = [rec.with_local(local) for rec, _, local in seen.values() if zoo is None or rec.zoo_name == zoo]
    if not records:
        zoos = sorted({rec.zoo_name for rec, _, _ in seen.values()})
        where = ", ".join(map(str, folders))
        also = f" ({len(skipped)} file(s) skipped; the first: {skipped[0]})" if skipped else ""
        raise GenbenchError(f"no records for zoo {zoo!r} in {where}; zoos with records: {zoos}{also}"
                            if zoo is not None else
                            f"no result records in {where}{also}")
    return records
