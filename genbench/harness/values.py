"""Evaluated values on disk: one parquet table per zoo, new measures merged into the columns already there (under
a file lock, so that concurrent runs keep every column); values_for() completes a zoo's table with the measures it
lacks."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from filelock import FileLock, Timeout

from ..errors import GenbenchError
from ..fileio import atomic_write
from ..measures.registry import resolve_measures
from ..paths import values_path
from .evaluate import evaluate

if TYPE_CHECKING:
    from ..zoo.storage import Zoo

LOCK_TIMEOUT_S = 600.0  # how long a writer waits for the lock (another writer's read-merge-write takes seconds)


def values_lock(path: str | Path) -> Path:
    """The lock file that guards the value table at `path` (a hidden file beside it)."""
    p = Path(path)
    return p.with_name(f".{p.name}.lock")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the value table's file lock (released by the OS if this process dies)."""
    try:  # FileLock would take a lock file it cannot create for one held by another process, and wait
        path.parent.mkdir(parents=True, exist_ok=True)
        values_lock(path).touch()
    except OSError as e:
        raise GenbenchError(f"cannot write the value table {path}: {e.strerror or e} ({values_lock(path)}); "
                            "write it to a folder you can write to") from None
    lock = FileLock(str(values_lock(path)), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise GenbenchError(f"the value table {path} stayed locked for {LOCK_TIMEOUT_S:g} s by another genbench "
                            f"process ({values_lock(path)}); wait for it to finish and run this again") from None
    try:
        yield
    finally:
        lock.release()


def _zoo_of(df: pd.DataFrame) -> str:
    """'zoo NAME (table sha256 1234567890ab)' of a value table, from its metadata."""
    sha = str(df.attrs.get("table_sha256") or "unknown")
    return f"zoo {df.attrs.get('zoo', '?')!r} (table sha256 {sha[:12]})"


def measure_columns(df: pd.DataFrame, name: str) -> list[str]:
    """The columns holding one measure: its value(s) and its error column."""
    return [c for c in df.columns if c == name or c.startswith(name + "[") or c == name + ":error"]


def merge_values(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """`new` joined onto `old` by model_id; a measure in both takes its columns from `new` on the models `new` holds
    and keeps `old`'s on the others (an evaluation of some models adds to the table, it does not empty it), unless
    the measure changed in between (another version, source or columns) or the run's seed or device did: then only
    `new`'s values are kept."""
    if old is None:
        return new
    names = list(new.attrs.get("measures", {}))
    drop = [c for n in names for c in measure_columns(old, n)]
    before = old.attrs.get("measures", {})
    same_run = all(old.attrs.get(k) == new.attrs.get(k) for k in ("seed", "device"))  # the table says one of each
    kept = [c for n in names if same_run and before.get(n) == new.attrs["measures"][n]
            and set(measure_columns(old, n)) == set(measure_columns(new, n)) for c in measure_columns(old, n)]
    merged = old.drop(columns=drop).merge(new, on="model_id", how="outer")
    back = old[~old["model_id"].isin(set(new["model_id"]))].set_index("model_id")[kept]
    rows = merged["model_id"].isin(back.index)
    for c in kept if rows.any() else []:
        if merged[c].dtype != back[c].dtype:  # an error column all None on one side, strings on the other
            merged[c] = merged[c].astype(object)
        merged.loc[rows, c] = merged.loc[rows, "model_id"].map(back[c])
    merged.attrs = {**old.attrs, **new.attrs,
                    "measures": {**old.attrs.get("measures", {}), **new.attrs.get("measures", {})},
                    "seconds": {**old.attrs.get("seconds", {}), **new.attrs.get("seconds", {})}}
    return merged


def load_values(path: str | Path) -> pd.DataFrame:
    """Read a value table written by `save_values`."""
    p = Path(path)
    if not p.is_file():
        raise GenbenchError(f"no value table at {p}; run `genbench evaluate MEASURE... --zoo ZOO` first")
    return _read(p)


def _read(p: Path) -> pd.DataFrame:
    """The parquet table at `p`; a file that is none (empty, cut short, another format) in one line."""
    try:
        return pd.read_parquet(p)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise GenbenchError(f"{p} is not a value table genbench can read ({str(e).splitlines()[0][:200]}): name "
                            "another file, or remove this one") from None


def _other_zoo(p: Path, old: pd.DataFrame, this: str) -> GenbenchError:
    """The refusal to merge values into `p`, which holds another zoo's table `old` (`this`: the zoo of the new ones)."""
    return GenbenchError(f"{p} holds the values of {_zoo_of(old)}, not of {this}: genbench does not overwrite it; "
                         "write these values to another file, or delete that one first")


def check_values_out(path: str | Path, zoo_sha256: str) -> None:
    """Refuse, before any value is computed, a value table file that save_values could not merge into: not a
    parquet table, or another zoo's values (genbench never overwrites them)."""
    p = Path(path)
    if p.is_file():
        old = _read(p)
        if old.attrs.get("table_sha256") != zoo_sha256:
            raise _other_zoo(p, old, f"this zoo (table sha256 {zoo_sha256[:12]})")


def save_values(df: pd.DataFrame, path: str | Path, *, merge: bool = True, replace: bool = False) -> Path:
    """Write a value table atomically, merged with the one already at `path` unless merge=False. The table at `path`
    is read, merged and replaced under a file lock, so that two runs writing different measures keep every column.
    A table of another zoo (or another zoo version) is never mixed in: it is refused (a GenbenchError naming both
    zoos: genbench does not overwrite it), or with replace=True (a zoo's default table) replaced."""
    p = Path(path)
    with _locked(p):
        old = _read(p) if merge and p.is_file() else None
        if old is not None and old.attrs.get("table_sha256") != df.attrs.get("table_sha256"):
            if not replace:
                raise _other_zoo(p, old, _zoo_of(df))
            old = None
        out = merge_values(old, df)
        atomic_write(p, lambda tmp: out.to_parquet(tmp, index=False))
    return p


def values_for(zoo: Zoo, measures: Sequence[str] = (), path: str | Path | None = None, *,
               note: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, list[str] | None]:
    """The value table of a zoo with (at least) these measures, evaluating the missing ones (cached) and merging them
    into the table, and the resolved measure names (None: no measures named, so every measure in the table).
    In the zoo's default table ($GENBENCH_HOME/values/ZOO.parquet) a table of another zoo version counts as missing;
    a `path` given explicitly that holds another zoo's table is an input, never overwritten: it is refused.
    `note` hears when measures are evaluated."""
    explicit = bool(path)
    path = Path(path) if path else values_path(zoo.name)
    wanted = [m.name for m in resolve_measures(measures)] if measures else None
    df = load_values(path) if path.is_file() else None
    if df is not None and df.attrs.get("table_sha256") != zoo.table_sha256:
        if explicit:
            raise GenbenchError(f"{path} holds the values of {_zoo_of(df)}, not of zoo {zoo.name!r} at {zoo.root} "
                                f"(table sha256 {zoo.table_sha256[:12]}): pass this zoo's value table, or leave out "
                                f"--values to use its default one ({values_path(zoo.name)}); {path} is left as it is")
        df = None
    have = set(df.attrs.get("measures", {})) if df is not None else set()
    if wanted is None and df is None:
        raise GenbenchError(f"no values for zoo {zoo.name!r} yet: name the measures to score, or run "
                            f"`genbench evaluate MEASURE... --zoo {zoo.name}` first")
    missing = [n for n in (wanted or []) if n not in have]
    if missing:
        if note:
            note(f"evaluating {len(missing)} measure(s) not in {path} (cached values are reused)")
        save_values(evaluate(missing, zoo), path, replace=not explicit)
        df = load_values(path)
    return df, wanted
