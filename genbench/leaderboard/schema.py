"""The result record format: one JSON object per (entry, zoo), read through `Record`'s typed accessors so that
the format is spelled out here only; reading, writing and finding records on disk; the leaderboard's scores."""
from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError, did_you_mean
from ..fileio import json_safe, write_json_atomic
from ..paths import results_dir
from ..scoring.spec import SCORE_NAMES, SCORES, MeasureScores, Score

T = TypeVar("T")
SCHEMA = 1
REQUIRED = ("schema", "name", "measure", "zoo", "status")
SHOWN = ("adj_r2", "kfold_r2", "tau", "psi", "cmi", "sign_error_worst")  # the leaderboard's score columns
WITH_INTERVAL = ("adj_r2", "kfold_r2")  # shown with their 95% interval beside them
HEADLINE = ("adj_r2", "kfold_r2", "tau")  # a submission's summary (`genbench submit`)
EXPORTED = tuple(n for n in SCORE_NAMES if n in SHOWN or n == "mse")  # csv/json columns, each with its interval
_BY_NAME = {s.name: s for s in SCORES}


def score_spec(name: str) -> Score:
    """The score called `name` (its labels and direction); a did-you-mean error for an unknown one."""
    if name not in _BY_NAME:
        raise did_you_mean(name, SCORE_NAMES, what="score to sort by")
    return _BY_NAME[name]


def score_label(name: str) -> str:
    """A score's full label; the name itself for a score the list does not know."""
    return _BY_NAME[name].label if name in _BY_NAME else name


def finite(x: Any) -> float | None:
    """A finite float, or None for None, NaN, infinities, booleans and anything not a number."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _mapping(x: Any) -> Mapping[str, Any] | None:
    return x if isinstance(x, Mapping) else None


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
    def ok(self) -> bool:
        """Whether the entry was scored."""
        return self.status == "ok"

    @property
    def submission(self) -> Mapping[str, Any] | None:
        """The submission's metadata (title, authors, contact, paper_url, licence, entry, path), if submitted."""
        return _mapping(self.data.get("submission"))

    @property
    def submission_path(self) -> str | None:
        """The submission's folder, from which `genbench verify` imports its measure.py again."""
        return (self.submission or {}).get("path")

    # ------------------------------------------------------------ the zoo

    zoo_revision: _Field[str | None] = _Field("The Hub revision of the zoo, for a downloaded one.", block="zoo",
                                              key="revision")
    table_sha256: _Field[str | None] = _Field("The hash of the zoo table the entry was scored on.", block="zoo")
    written_zoo_name: _Field[Any] = _Field("The zoo's name as written; None when missing.", block="zoo", key="name")
    zoo_models: _Field[int | None] = _Field("How many models the zoo held, on a partial zoo (None on a complete one).",
                                            block="zoo", key="models")
    zoo_expected_models: _Field[int | None] = _Field("How many models the zoo's recipe makes, on a partial zoo (None "
                                                     "on a complete one).", block="zoo", key="expected_models")

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

    def score(self, key: str) -> float | None:
        """One score's value; None when missing or not finite."""
        values = _mapping(self.scores.get("values"))
        return finite(values.get(key)) if values else None

    def interval(self, key: str) -> tuple[float | None, float | None]:
        """One score's 95% interval; (None, None) when missing."""
        iv = (_mapping(self.scores.get("intervals")) or {}).get(key)
        if not isinstance(iv, (list, tuple)) or len(iv) != 2:
            return None, None
        return finite(iv[0]), finite(iv[1])

    def score_keys(self) -> list[str]:
        """The scores the record holds (a value or an interval), in the score list's order, then others by name."""
        held = set(_mapping(self.scores.get("values")) or {}) | set(_mapping(self.scores.get("intervals")) or {})
        return [k for k in SCORE_NAMES if k in held] + sorted(held - set(SCORE_NAMES))

    @property
    def fit(self) -> Fit:
        """How the scores were fitted."""
        return Fit.from_dict(self.scores)

    @property
    def notes(self) -> list[str]:
        """What could not be computed, and why."""
        return list(self.scores.get("notes") or [])

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
    def audit_notes(self) -> list[str]:
        """The audit's notes."""
        return list((self.audit or {}).get("notes") or [])

    @property
    def values(self) -> Mapping[str, Any] | None:
        """Per-model values: model_id, gap, value, error, prediction."""
        return _mapping(self.data.get("values"))

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
        the seed, resamples and audit zoo that `genbench verify` repeats."""
        return _mapping(self.data.get("provenance")) or {}

    def rerun_settings(self) -> dict[str, Any]:
        """The settings run_entry needs to repeat the record: audit zoo (as requested), resamples, seed, command,
        and whether a partial zoo is allowed (only for a record made on one)."""
        prov = self.provenance
        return {"audit_zoo": prov.get("audit_zoo"), "n_boot": int(prov.get("n_boot", N_BOOT)),
                "allow_partial": not self.zoo_complete,
                "seed": int(prov.get("seed", SEED)), "command": prov.get("command", "")}

    # ------------------------------------------------------------ the ranking

    @property
    def rank(self) -> float | None:
        """The rank on its zoo, once ranked (None: not ranked)."""
        return finite(self.data.get("rank"))

    @property
    def rank_group(self) -> float | None:
        """The rank group on its zoo, once ranked."""
        return finite(self.data.get("rank_group"))

    def with_rank(self, rank: int | None, group: int | None) -> Record:
        """A copy that carries a rank and a rank group."""
        return Record({**self.data, "rank": rank, "rank_group": group})

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
    """Where a record lives: ROOT/<zoo>/<name>.json (ROOT: the user's results folder, $GENBENCH_HOME/results)."""
    r = Record.of(record)
    return Path(root if root is not None else results_dir()) / r.zoo_name / f"{r.name}.json"


def write_record(record: Mapping[str, Any], root: str | Path | None = None) -> Path:
    """Write a record atomically to ROOT/<zoo>/<name>.json (ROOT: the user's results folder by default)."""
    data = record.data if isinstance(record, Record) else record
    return write_json_atomic(record_path(record, root), json_safe(dict(data)))


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and check one record file; its JSON object (JSON only: nothing is unpickled)."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GenbenchError(f"cannot read result record {path}: {e}") from None
    if not isinstance(rec, dict):
        raise GenbenchError(f"{path} is not a genbench result record: it holds a {type(rec).__name__}, not an object")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise GenbenchError(f"{path} is not a genbench result record: missing {missing}")
    if rec["schema"] != SCHEMA:
        raise GenbenchError(f"{path} has record schema {rec['schema']}; this genbench reads schema {SCHEMA}")
    if not isinstance(rec["zoo"], dict) or not rec["zoo"].get("name"):
        raise GenbenchError(f"{path} is not a genbench result record: its zoo is not an object with a name")
    return rec


def load_records(root: str | Path | None = None, zoo: str | None = None) -> list[Record]:
    """Every record under ROOT (or ROOT/<zoo>), sorted by zoo and name (ROOT: the user's results folder by default)."""
    root = Path(root if root is not None else results_dir())
    if not root.is_dir():
        raise GenbenchError(f"no result records at {root}: run `genbench submit` or `genbench leaderboard run` first, "
                            "or pass --results DIR")
    pattern = f"{zoo}/*.json" if zoo else "*/*.json"
    recs = [Record.read(p) for p in sorted(root.glob(pattern))]
    if zoo and not recs:
        zoos = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise GenbenchError(f"no records for zoo {zoo!r} under {root}; zoos with records: {zoos}")
    return recs
