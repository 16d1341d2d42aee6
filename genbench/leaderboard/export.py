"""The ranked leaderboard as a flat table (one row per record, every exported score with its interval) and as
text: csv, json or markdown."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..errors import GenbenchError
from ..scoring.spec import DEFAULT_SORT, SCORE_NAMES
from .format import DIGITS, TEXT_FORMATS
from .ranking import partial_note, rank_records
from .schema import EXPORTED, SHOWN

MARKDOWN_COLUMNS = ["zoo", "rank", "group", "entry", "local", "kind", *SHOWN, "fragility"]


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def leaderboard_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT) -> pd.DataFrame:
    """One row per record, in ranking order: zoo, rank, rank group, entry, kind, status, local (the user's own,
    unverified record), scores with intervals (the exported ones and the sort score), verdict, citation, failure,
    and a note on a record made on a partial zoo (also in its fragility text, which every view shows)."""
    keys = [k for k in SCORE_NAMES if k in EXPORTED or k == sort]
    rows = []
    for r in rank_records(records, sort):
        row = {"zoo": r.zoo_name, "rank": r["rank"], "group": r["rank_group"], "entry": r.name, "kind": r.kind,
               "status": r.status, "local": r.local}
        for k in keys:
            lo, hi = r.interval(k)
            row[k], row[k + "_lo"], row[k + "_hi"] = _nan(r.score(k)), _nan(lo), _nan(hi)
        row["fragility"] = r.verdict or ("failed" if not r.ok else "not audited")
        row["citation"] = r.citation or ""
        row["failure"] = r.failure or ""
        row["note"] = partial_note(r)
        if row["note"]:
            row["fragility"] += f"; {row['note']}"
        rows.append(row)
    return pd.DataFrame(rows)


def export_text(table: pd.DataFrame, fmt: str) -> str:
    """The leaderboard table as csv, json (one object per row) or markdown (the shown columns)."""
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        return table.to_json(orient="records", indent=1) + "\n"
    if fmt == "markdown":
        return table[MARKDOWN_COLUMNS].to_markdown(index=False, floatfmt=f".{DIGITS}f") + "\n"
    raise GenbenchError(f"the leaderboard exports as {', '.join(TEXT_FORMATS)}, not {fmt!r}")
