"""The ranked leaderboard as a flat table (one row per shown record, every exported score with its interval and
refusal) and as text: csv, json or markdown; and what every view says beside its tables (`view_notes`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..errors import GenbenchError
from ..scoring.spec import DEFAULT_SORT, SCORE_NAMES
from .format import BASELINE_RANK, DIGITS, TEXT_FORMATS, Footnotes, rank_text, score_cell
from .ranking import alias_lines, by_zoo, empty_scores, group_rule, hidden_lines, partial_note, rank_records
from .schema import BASELINE_NOTE, EXPORTED, SHOWN, Record

MARKDOWN_COLUMNS = ["zoo", "rank", "group", "entry", "local", "kind", *SHOWN, "fragility"]


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


@dataclass
class ViewNotes:
    """What a view says beside its tables: per zoo, the score columns no entry has a value for (and why) and the
    entries shown for others; once, the group rule and what a baseline is."""

    hidden: dict[str, dict[str, str]] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    group: str = ""         # the group rule (or why there are no groups), when anything is ranked
    baseline: bool = False  # whether a baseline row is shown

    def lines(self, *, data: bool = False) -> list[str]:
        """What the view says once: the group rule and what a baseline is (`data`: as csv and json mark it)."""
        mark = "baseline=true" if data else BASELINE_RANK + " (rank column)"
        return ([self.group] if self.group else []) + ([f"{mark}: {BASELINE_NOTE}"] if self.baseline else [])

    def zoo_lines(self, zoo: str, *, shown: bool = True) -> list[str]:
        """One zoo's lines: its aliases, then its columns without a value (not shown by a table, empty in data)."""
        return self.aliases.get(zoo, []) + hidden_lines(self.hidden.get(zoo, {}), shown=shown)


def view_notes(ranked: Sequence[Record], sort: str = DEFAULT_SORT, keys: Iterable[str] = SHOWN) -> ViewNotes:
    """The notes of a view of `ranked` (rank_records' output) showing the score columns `keys`."""
    keys = list(keys)
    notes = ViewNotes()
    for zoo, recs in by_zoo(ranked).items():
        hidden = empty_scores((r for r in recs if r.zoo_complete), keys)
        notes.hidden[zoo], notes.aliases[zoo] = hidden, alias_lines(recs)
    if any(r.rank is not None or r.rank_group is not None for r in ranked):
        notes.group = group_rule(sort)
    notes.baseline = any(r.baseline for r in ranked)
    return notes


def leaderboard_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT, *,
                      ranked: Sequence[Record] | None = None) -> pd.DataFrame:
    """One row per shown record, in ranking order: zoo, rank (none for a baseline), rank group, entry, baseline,
    aliases (the equivalent entries it stands for), kind, status, local (the user's own, unverified record), scores
    with intervals and refusals (the exported ones and the sort score), verdict, citation, failure, and a note on a
    record made on a partial zoo (also in its fragility text, which every view shows). `ranked`: already ranked."""
    keys = [k for k in SCORE_NAMES if k in EXPORTED or k == sort]
    rows = []
    for r in ranked if ranked is not None else rank_records(records, sort):
        row = {"zoo": r.zoo_name, "rank": r["rank"], "group": r["rank_group"], "entry": r.name,
               "baseline": r.baseline, "aliases": ", ".join(r.aliases), "kind": r.kind, "status": r.status,
               "local": r.local}
        for k in keys:
            lo, hi = r.interval(k)
            row[k], row[k + "_lo"], row[k + "_hi"] = _nan(r.score(k)), _nan(lo), _nan(hi)
            row[k + "_refused"] = r.refusal(k) or ""
        row["fragility"] = r.verdict or ("failed" if not r.ok else "not audited")
        row["citation"] = r.citation or ""
        row["failure"] = r.failure or ""
        row["note"] = partial_note(r)
        if row["note"]:
            row["fragility"] += f"; {row['note']}"
        rows.append(row)
    table = pd.DataFrame(rows)
    for col in ("rank", "group"):  # whole numbers, empty when unranked (a baseline, a failure)
        if col in table:
            table[col] = table[col].astype("Int64")
    return table


def rank_cell(row: Mapping[str, Any]) -> str:
    """The rank column of a table row as text: the rank, BASELINE_RANK for a baseline, '-' when unranked."""
    return BASELINE_RANK if row.get("baseline") is True else rank_text(row.get("rank"))


def _md(text: Any) -> str:
    """Text safe in a markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(table: pd.DataFrame, notes: ViewNotes | None = None) -> str:
    """One markdown table per zoo (its score columns without those never valued on it), each followed by its
    notes and refusal footnotes, then the notes said once (group rule, what a baseline is)."""
    notes = notes or ViewNotes()
    parts = []
    for zoo, part in table.groupby("zoo", sort=True):
        keys = [k for k in SHOWN if k not in notes.hidden.get(str(zoo), {}) and k in part]
        foot = Footnotes()
        rows = []
        for _, r in part.iterrows():
            entry = r["entry"] + (f" (also: {r['aliases']})" if r.get("aliases") else "")
            rows.append({"zoo": zoo, "rank": rank_cell(r), "group": rank_text(r["group"]), "entry": entry,
                         "local": str(bool(r["local"])), "kind": r["kind"] or "",
                         **{k: score_cell(r[k], refused=r.get(f"{k}_refused"), notes=foot, digits=DIGITS)
                            for k in keys},
                         "fragility": r["fragility"]})
        df = pd.DataFrame(rows, columns=[c for c in MARKDOWN_COLUMNS if c not in SHOWN or c in keys]).map(_md)
        lines = notes.zoo_lines(str(zoo)) + foot.lines()
        parts.append(df.to_markdown(index=False, disable_numparse=True) + "\n"
                     + "".join(f"\n- {_md(line)}" for line in lines) + ("\n" if lines else ""))
    tail = "".join(f"- {_md(line)}\n" for line in notes.lines())
    return "\n".join(parts) + ("\n" + tail if tail else "")


def export_text(table: pd.DataFrame, fmt: str, notes: ViewNotes | None = None) -> str:
    """The leaderboard table as csv, json (one object per row) or markdown (the shown columns, with `notes`)."""
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        return table.to_json(orient="records", indent=1) + "\n"
    if fmt == "markdown":
        return markdown(table, notes)
    raise GenbenchError(f"the leaderboard exports as {', '.join(TEXT_FORMATS)}, not {fmt!r}")
