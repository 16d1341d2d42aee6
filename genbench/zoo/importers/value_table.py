"""A value table from elsewhere (one row per trained model: hyperparameter columns, a target column, a column per
measure, no weights), read into what genbench scores: a `TableZoo` standing in for the zoo (its table: model ids, the
hp.* axes, the target as `gap`) and a value table of the measures. Its records are marked external: never verified,
never ranked officially (`genbench score --values FILE`)."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...defaults import EXTERNAL_PREFIX
from ...errors import GenbenchError, did_you_mean
from ...fileio import sha256_file
from ...paths import is_plain_name
from ...text import excerpt
from ..storage import Zoo

REPLICATE = "seed"
SEED_COLUMNS = ("hp.seed", "seed")  # a column of these names is the replicate axis, not a hyperparameter
CONVERGED_COLUMNS = ("converged", "is.converged")  # read as the table's `converged` column when present
DEFAULT_TEST_SIZE = 10_000  # the test-set size behind each gap (the robust sign-error's noise filter)
HIGHER_MEANS = ("larger_gap", "smaller_gap")
MAX_LEVELS = 20  # a hyperparameter column with more distinct values is not a grid axis (it is refused)


class TableZoo(Zoo):
    """The zoo behind a value table from elsewhere: a table and a grid, no checkpoints or data. Complete by
    construction (its rows are the population), so it is scored as any complete zoo is."""

    def __init__(self, name: str, table: pd.DataFrame, grid: dict[str, list[Any]], *, source: dict[str, Any],
                 test_size: int):
        self.root = Path(".")
        self.revision, self.repo_id = None, None
        self.manifest = {"name": name, "version": 1, "grid": grid, "files": {}, "test_size": test_size,
                         "dataset": {"kind": "external", "training_data": False,
                                     "why": "a table of values from elsewhere holds no data"},
                         "expected_models": len(table), "external": source}
        self.missing_models: list[str] = []
        self.table = table
        self._rows = {mid: i for i, mid in enumerate(table["model_id"])}

    def load_model(self, model_id: str, init: bool = False, device: Any = "cpu") -> Any:
        raise GenbenchError(f"{self.name!r} is a table of values from elsewhere: it has no weights to load")

    def train_data(self, model_id: str) -> Any:
        raise GenbenchError(f"{self.name!r} is a table of values from elsewhere: it has no training data")


@dataclass
class ValueTable:
    """A value table from elsewhere, ready to score: its zoo, its values (model_id + one column per measure, with
    the measures' declarations in attrs) and what reading it noticed."""

    zoo: TableZoo
    values: pd.DataFrame
    measures: list[str]
    notes: list[str] = field(default_factory=list)


OTHER_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "bars"}  # a one-column header holding one: misread


def read_frame(path: str | Path) -> pd.DataFrame:
    """A CSV (optionally compressed) or parquet file as a DataFrame; a clear error for anything else."""
    path = Path(path)
    if not path.is_file():
        raise GenbenchError(f"--values {path}: " + ("a folder; name the table's file (CSV or parquet) in it"
                                                   if path.is_dir() else "no such file"))
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            df = pd.read_parquet(path)
            header = [str(c) for c in df.columns]
        elif re.search(r"\.(csv|tsv|txt)(\.(gz|bz2|xz|zip|zst))?$", name):
            sep = "\t" if ".tsv" in name else ","
            header = [str(c) for c in pd.read_csv(path, sep=sep, nrows=1, header=None).iloc[0]]  # as written
            df = pd.read_csv(path, sep=sep)
        else:
            raise GenbenchError(f"--values {path}: the file must be a CSV (.csv, .csv.gz, ...) or parquet (.parquet) "
                                "table")
    except GenbenchError:
        raise
    except Exception as e:  # noqa: BLE001 (pandas raises many kinds; each becomes one line)
        first = (str(e).strip().splitlines() or [""])[0]
        need = ("a parquet file written by pandas or pyarrow" if name.endswith(".parquet") else
                "every row needs the header's fields, separated by " + ("tabs" if ".tsv" in name else "commas"))
        raise GenbenchError(f"cannot read {path} as a table ({type(e).__name__}: {first}); {need}") from None
    other = [word for sep, word in OTHER_SEPARATORS.items() if len(header) == 1 and sep in header[0]]
    if other and not name.endswith(".parquet"):
        raise GenbenchError(f"{path} reads as one column ({excerpt(header[0])}): its fields look separated by "
                            f"{other[0]}; write the table with commas (pandas: df.to_csv(path, index=False)), or name a tab-"
                            "separated file .tsv")
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise GenbenchError(f"{path} names the column(s) {dup} more than once; give each column its own name")
    return df


def match_columns(patterns: list[str], columns: list[str], *, what: str) -> list[str]:
    """The columns named by `patterns` (exact names or globs), in the file's order; a did-you-mean error for a
    pattern that matches nothing."""
    chosen: list[str] = []
    for p in patterns:
        hits = [c for c in columns if c == p or fnmatch.fnmatchcase(c, p)]
        if not hits:
            raise did_you_mean(p, columns, what=f"{what} column", hint="(the file's columns are listed above the "
                               "suggestion when none is close; globs such as 'complexity.*' are allowed)")
        chosen += [c for c in hits if c not in chosen]
    return chosen


def entry_name(column: str) -> str:
    """The record name of a measure column: the column itself when it is a plain file name, else its characters
    outside letters, digits, '.', '_' and '-' replaced by '_'."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", column).lstrip(".") or "measure"
    return name[:200]


def _numeric(df: pd.DataFrame, column: str, what: str) -> np.ndarray:
    """A column as floats; an error naming the column and its first non-numeric value."""
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() & df[column].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise GenbenchError(f"{what} column {column!r} holds a value that is not a number ({df[column].iloc[row]!r} "
                            f"in data row {row + 1}); fix the file or leave the column out")
    return values.to_numpy(dtype=float)


def _rows_text(mask: np.ndarray) -> str:
    rows = np.flatnonzero(mask) + 1
    return ", ".join(map(str, rows[:5])) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")


def _directions(pairs: dict[str, str], measures: list[str]) -> dict[str, str]:
    """--higher-means NAME=DIRECTION, checked: known columns (globs allowed), known directions."""
    out: dict[str, str] = {}
    for pattern, direction in pairs.items():
        if direction not in HIGHER_MEANS:
            raise GenbenchError(f"--higher-means {pattern}={direction}: the direction must be one of {HIGHER_MEANS}")
        for col in match_columns([pattern], measures, what="measure (in --higher-means)"):
            out[col] = direction
    return out


def read_value_table(path: str | Path, *, measures: list[str], target: str, hparams: list[str] | None = None,
                     id_column: str | None = None, name: str | None = None, test_size: int = DEFAULT_TEST_SIZE,
                     higher_means: dict[str, str] | None = None) -> ValueTable:
    """Read a value table from elsewhere: `measures` and `hparams` name columns (globs allowed; hparams default to
    every 'hp.*' column), `target` the column predicted (it becomes the zoo's `gap`), `id_column` the model ids
    (default: the row number). Rows sharing every hyperparameter are seeds of one grid point unless a seed column
    ('hp.seed' or 'seed') says which. Bad input (a missing column, duplicate ids, a missing target or
    hyperparameter, text where a number belongs) is one GenbenchError line."""
    path = Path(path)
    df = read_frame(path)
    columns = [str(c) for c in df.columns]
    df.columns = columns
    if df.empty:
        raise GenbenchError(f"{path} has no rows")
    if not measures:
        raise GenbenchError("name the measure columns to score (e.g. `genbench score 'complexity.*' --values "
                            f"{path} --target gen.gap`)")
    if target not in columns:
        raise did_you_mean(target, columns, what="target column", hint="(--target names the column to predict)")
    seed_col = next((c for c in SEED_COLUMNS if c in columns), None)
    hp_cols = match_columns(hparams, columns, what="hyperparameter") if hparams else \
        [c for c in columns if c.startswith("hp.") and c != seed_col]
    hp_cols = [c for c in hp_cols if c != seed_col]
    if not hp_cols:
        raise GenbenchError(f"{path} has no hyperparameter column: name them with --hparams (globs allowed), or "
                            "prefix their names with 'hp.'")
    wanted = [c for c in match_columns(measures, columns, what="measure") if c not in (target, id_column)]
    if not wanted:  # scored, nothing would still replace the table's earlier records
        raise GenbenchError(f"{path}: {', '.join(map(repr, measures))} match(es) no measure column, only the target "
                            f"{target!r} or the id column: name the measure columns to score")
    overlap = [c for c in wanted if c in hp_cols or c == seed_col]
    if overlap:
        raise GenbenchError(f"columns {overlap} are named both as measures and as hyperparameters; name each once")
    if id_column is not None:
        if id_column not in columns:
            raise did_you_mean(id_column, columns, what="model id column", hint="(--id names it)")
        if df[id_column].isna().any():
            raise GenbenchError(f"the model id column {id_column!r} is empty in data row(s) "
                                f"{_rows_text(df[id_column].isna().to_numpy())}: give every model an id")
        ids = df[id_column].astype(str)
        dup = ids[ids.duplicated()]
        if len(dup):
            raise GenbenchError(f"duplicate model ids in column {id_column!r}: {sorted(set(dup))[:5]} "
                                f"({len(dup)} repeated rows); each row must be one model")
        ids = ids.tolist()
    else:
        width = len(str(len(df)))
        ids = [f"row-{i + 1:0{width}d}" for i in range(len(df))]
    y = _numeric(df, target, "the target")
    if not np.isfinite(y).all():
        raise GenbenchError(f"the target column {target!r} has no finite value in data row(s) "
                            f"{_rows_text(~np.isfinite(y))}: drop those rows or fix the file")
    missing = df[hp_cols].isna().any(axis=1).to_numpy()
    if missing.any():
        raise GenbenchError(f"hyperparameter columns {hp_cols} have an empty value in data row(s) "
                            f"{_rows_text(missing)}: drop those rows or fix the file")
    many = {c: int(df[c].nunique()) for c in hp_cols if df[c].nunique() > MAX_LEVELS}
    if many:
        raise GenbenchError(f"hyperparameter column(s) {many} (distinct values) have more than {MAX_LEVELS} levels: a "
                            "grid axis needs few (its one-hot levels and their interactions are the recipe's "
                            "features); bin them, or leave them out of --hparams")
    axes = {c[3:] if c.startswith("hp.") else c: c for c in hp_cols}
    if REPLICATE in axes:
        raise GenbenchError(f"the hyperparameter {axes[REPLICATE]!r} is named like the replicate axis 'seed': "
                            "leave it out of --hparams, or name the seed column 'hp.seed'")
    table = pd.DataFrame({"model_id": ids})
    for axis, col in axes.items():
        table[f"hp.{axis}"] = df[col].to_numpy()
    if seed_col is not None:
        bad = df[seed_col].isna().to_numpy() | df.duplicated([*hp_cols, seed_col], keep=False).to_numpy()
        if bad.any():
            raise GenbenchError(f"the seed column {seed_col!r} is empty or repeats a seed within one grid point in data "
                                f"row(s) {_rows_text(bad)}: each row of a grid point must be another seed (or drop the "
                                "column: the rows of a grid point are then its seeds in order)")
        table[f"hp.{REPLICATE}"] = df[seed_col].astype(str).to_numpy()
    else:  # the k-th row of a grid point is its k-th seed
        table[f"hp.{REPLICATE}"] = table.groupby([f"hp.{a}" for a in axes], sort=False).cumcount().to_numpy()
    table["gap"] = y
    conv = next((c for c in CONVERGED_COLUMNS if c in columns), None)
    if conv is not None:
        table["converged"] = df[conv].map({True: True, False: False, "True": True, "False": False, 1: True,
                                           0: False}).to_numpy()
    table = table.sort_values("model_id", kind="stable").reset_index(drop=True)
    grid = {a: sorted(pd.unique(table[f"hp.{a}"]).tolist(), key=str) for a in [*axes, REPLICATE]}
    stem = re.sub(r"\.(csv|tsv|txt|parquet)(\.(gz|bz2|xz|zip|zst))?$", "", path.name, flags=re.IGNORECASE) or "table"
    zoo_name = name or f"{EXTERNAL_PREFIX}{entry_name(stem)}"
    if not is_plain_name(zoo_name):
        raise GenbenchError(f"--name {zoo_name!r} is not a plain file name (letters, digits, '.', '_', '-')")
    if not zoo_name.startswith(EXTERNAL_PREFIX):
        zoo_name = EXTERNAL_PREFIX + zoo_name
    source = {"file": path.name, "sha256": sha256_file(path), "rows": len(df), "target": target,
              "hparams": hp_cols, "seed_column": seed_col, "id_column": id_column}
    zoo = TableZoo(zoo_name, table, grid, source=source, test_size=int(test_size))
    directions = _directions(higher_means or {}, wanted)
    values = pd.DataFrame({"model_id": ids})
    info, notes, names = {}, [], []
    taken: dict[str, str] = {}
    for col in wanted:
        entry = entry_name(col)
        if entry in taken:
            raise GenbenchError(f"measure columns {taken[entry]!r} and {col!r} both become the entry name {entry!r}; "
                                "rename one of them in the file")
        taken[entry] = col
        x = _numeric(df, col, "the measure")
        bad = ~np.isfinite(x)
        if bad.all():
            raise GenbenchError(f"measure column {col!r} has no finite value: leave it out")
        if bad.any():
            notes.append(f"{entry}: {int(bad.sum())} row(s) without a finite value (e.g. data row "
                         f"{int(np.flatnonzero(bad)[0]) + 1}) are left out of its scores, not imputed")
        values[entry] = x
        info[entry] = {"kind": "scalar", "transform": "select" if (x[~bad] > 0).all() else "linear",
                       "higher_means": directions.get(col), "column": col}
        names.append(entry)
    values = values.sort_values("model_id", kind="stable").reset_index(drop=True)
    values.attrs["measures"] = info
    values.attrs["table_sha256"] = zoo.table_sha256
    return ValueTable(zoo=zoo, values=values, measures=names, notes=notes)
