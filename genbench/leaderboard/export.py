"""The ranked leaderboard as a flat table (one row per record, every exported score with its interval) and as
text: csv, json or markdown."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..errors import GenbenchError
from ..scoring.scores import SCORE_NAMES
from .format import DIGITS
from .ranking import DEFAULT_SORT, rank_records
from .schema import EXPORTED, SHOWN

TEXT_FORMATS = ("csv", "json", "markdown")
MARKDOWN_COLUMNS = ["zoo", "rank", "group", "entry", "kind", *SHOWN, "fragility"]


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def leaderboard_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT) -> pd.DataFrame:
    """One row per record, in ranking order: zoo, rank, rank group, entry, kind, scores with intervals (the
    exported ones and the sort score), verdict, citation, failure."""
    keys = [k for k in SCORE_NAMES if k in EXPORTED or k == sort]
    rows = []
    for r in rank_records(records, sort):
        row = {"zoo": r.zoo_name, "rank": r["rank"], "group": r["rank_group"], "entry": r.name, "kind": r.kind,
               "status": r.status}
        for k in keys:
            lo, hi = r.interval(k)
            row[k], row[k + "_lo"], row[k + "_hi"] = _nan(r.score(k)), _nan(lo), _nan(hi)
        row["fragility"] = r.verdict or ("failed" if not r.ok else "not audited")
        row["citation"] = r.citation or ""
        row["failure"] = r.failure or ""
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
