"""Evaluated values on disk: one parquet table per zoo, new measures merged into the columns already there;
values_for() completes a zoo's table with the measures it lacks."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..errors import GenbenchError
from ..fileio import atomic_write
from ..measures.registry import resolve_measures
from ..paths import values_dir
from .evaluate import evaluate

if TYPE_CHECKING:
    from ..zoo.storage import Zoo


def values_path(zoo_name: str) -> Path:
    """Default place of a zoo's value table: $GENBENCH_HOME/values/<zoo>.parquet."""
    return values_dir() / f"{zoo_name}.parquet"


def measure_columns(df: pd.DataFrame, name: str) -> list[str]:
    """The columns holding one measure: its value(s) and its error column."""
    return [c for c in df.columns if c == name or c.startswith(name + "[") or c == name + ":error"]


def merge_values(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """`new` joined onto `old` by model_id; a measure in both takes its columns from `new`."""
    if old is None:
        return new
    names = list(new.attrs.get("measures", {}))
    drop = [c for n in names for c in measure_columns(old, n)]
    merged = old.drop(columns=drop).merge(new, on="model_id", how="outer")
    merged.attrs = {**old.attrs, **new.attrs,
                    "measures": {**old.attrs.get("measures", {}), **new.attrs.get("measures", {})},
                    "seconds": {**old.attrs.get("seconds", {}), **new.attrs.get("seconds", {})}}
    return merged


def load_values(path: str | Path) -> pd.DataFrame:
    """Read a value table written by `save_values`."""
    p = Path(path)
    if not p.is_file():
        raise GenbenchError(f"no value table at {p}; run `genbench evaluate MEASURE... --zoo ZOO` first")
    return pd.read_parquet(p)


def save_values(df: pd.DataFrame, path: str | Path, *, merge: bool = True) -> Path:
    """Write a value table atomically, merged with the one already at `path` unless merge=False.
    A table of another zoo (or another zoo version) is replaced, never mixed in."""
    p = Path(path)
    old = pd.read_parquet(p) if merge and p.is_file() else None
    if old is not None and old.attrs.get("table_sha256") != df.attrs.get("table_sha256"):
        old = None
    out = merge_values(old, df)
    atomic_write(p, lambda tmp: out.to_parquet(tmp, index=False))
    return p


def values_for(zoo: Zoo, measures: Sequence[str] = (), path: str | Path | None = None, *,
               note: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, list[str] | None]:
    """The value table of a zoo with (at least) these measures, evaluating the missing ones (cached), and the
    resolved measure names (None: no measures named, so every measure in the table). A table of another zoo
    version counts as missing. `note` hears when measures are evaluated."""
    path = Path(path) if path else values_path(zoo.name)
    wanted = [m.name for m in resolve_measures(measures)] if measures else None
    df = load_values(path) if path.is_file() else None
    have = set(df.attrs.get("measures", {})) if df is not None else set()
    if df is not None and df.attrs.get("table_sha256") != zoo.table_sha256:
        df, have = None, set()
    if wanted is None and df is None:
        raise GenbenchError(f"no values for zoo {zoo.name!r} yet: name the measures to score, or run "
                            f"`genbench evaluate MEASURE... --zoo {zoo.name}` first")
    missing = [n for n in (wanted or []) if n not in have]
    if missing:
        if note:
            note(f"evaluating {len(missing)} measure(s) not in {path} (cached values are reused)")
        save_values(evaluate(missing, zoo), path)
        df = load_values(path)
    return df, wanted
