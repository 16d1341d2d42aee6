"""The ranked leaderboard as a flat table (one row per shown record, every exported score with its interval and
refusal) and as text: csv, json or markdown; and what every view says beside its tables (`view_notes`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..errors import GenbenchError
from ..record import Record, finite
from ..scoring.spec import DEFAULT_SORT, SCORE_NAMES, is_flat
from .columns import BASELINE_NOTE, EXPORTED, FRAGILITY_LEGEND, SHOWN, WITH_INTERVAL, score_spec
from .format import BASELINE_RANK, DIGITS, TEXT_FORMATS, Footnotes, rank_text, score_cell
from .standings import by_zoo, empty_scores, group_rule, hidden_lines, partial_note, rank_records, zoo_title
from .verdict import groups_over_trainings, zoo_verdicts

NAMING = ("entry: the registered measure (a submission's `entry`); submission: the submission's folder "
          "(submissions/NAME), empty for a built-in measure")  # how every view names an entry


def entry_name(record: Mapping[str, Any]) -> str:
    """An entry as every view names it: its registered measure (the record's name when it names none)."""
    r = Record.of(record)
    return str(r.measure or r.name)


def submission_folder(record: Mapping[str, Any]) -> str:
    """The folder a submitted entry came from (submissions/NAME: its record's name), '' for a built-in."""
    r = Record.of(record)
    return r.name if r.submission is not None else ""


def entry_names(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(zoo, record name) -> entry name, for the records a view shows and the ones it folds in as aliases."""
    return {(r.zoo_name, r.name): entry_name(r) for r in map(Record.of, records)}


def alias_names(rec: Record, names: Mapping[tuple[str, str], str]) -> list[str]:
    """The entries `rec` stands for, named as entries."""
    return [names.get((rec.zoo_name, a), a) for a in rec.aliases]


def score_columns(sort: str, hidden: Iterable[str] = ()) -> list[str]:
    """The score columns of a view ranked by `sort`: the ranking score first, then the shown ones that some entry
    has a value for."""
    hidden = set(hidden)
    return [sort] + [k for k in SHOWN if k != sort and k not in hidden]


def interval_columns(sort: str) -> tuple[str, ...]:
    """The score columns shown with their 95% interval: the ranking score's and WITH_INTERVAL's."""
    return tuple(dict.fromkeys((sort, *WITH_INTERVAL)))


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
    sort: str = DEFAULT_SORT  # the ranking score: the first score column of every view
    verdicts: dict[str, str] = field(default_factory=dict)  # per zoo: the sentence its table opens with
    against: bool = False  # whether an entry shown runs against its claim
    no_claim: bool = False  # whether an entry shown is a scalar that declares no direction
    audited: bool = False  # whether an entry shown has a fragility verdict
    groups: dict[str, str] = field(default_factory=dict)  # per zoo ranked over trainings: how settled its groups are

    def lines(self, *, data: bool = False) -> list[str]:
        """What the view says once: the group rule, what a baseline is (`data`: as csv and json mark it), what
        "against its claim" and "no claim" mean and what the fragility labels mean."""
        mark = "baseline=true" if data else BASELINE_RANK + " (rank column)"
        return ([self.group] if self.group else []) + ([f"{mark}: {BASELINE_NOTE}"] if self.baseline else []) + \
            ([AGAINST_NOTE] if self.against else []) + ([NO_CLAIM_NOTE] if self.no_claim else []) + \
            ([FRAGILITY_LEGEND] if self.audited else [])

    def zoo_lines(self, zoo: str, *, shown: bool = True) -> list[str]:
        """One zoo's lines: its aliases, then its columns without a value (not shown by a table, empty in data)."""
        return self.aliases.get(zoo, []) + ([self.groups[zoo]] if zoo in self.groups else []) + \
            hidden_lines(self.hidden.get(zoo, {}), shown=shown)


def alias_notes(ranked: Sequence[Record], records: Iterable[Mapping[str, Any]] = ()) -> dict[str, list[str]]:
    """Per zoo, a line for each entry of `ranked` that stands for equivalent ones (its aliases, named as `records`
    name them)."""
    names = {**entry_names(ranked), **entry_names(records)}
    return {zoo: [f"{entry_name(r)} also: {', '.join(alias_names(r, names))} (the same held-out predictions and "
                  "scores: shown once)" for r in recs if r.aliases] for zoo, recs in by_zoo(ranked).items()}


def view_notes(ranked: Sequence[Record], sort: str = DEFAULT_SORT, keys: Iterable[str] = SHOWN, *,
               records: Iterable[Mapping[str, Any]] = ()) -> ViewNotes:
    """The notes of a view of `ranked` (rank_records' output) showing the score columns `keys`; `records`: the
    records ranked (which name the aliases as entries)."""
    keys = [k for k in keys if k != sort]  # the ranking score's column is always shown
    notes = ViewNotes(sort=sort)
    notes.aliases = alias_notes(ranked, records)
    for zoo, recs in by_zoo(ranked).items():
        hidden = empty_scores((r for r in recs if r.zoo_complete), keys)
        notes.hidden[zoo] = hidden
        groups = groups_over_trainings(recs)
        if groups:
            notes.groups[zoo] = groups
    if any(r.rank is not None or r.rank_group is not None for r in ranked):
        notes.group = group_rule(sort)
    notes.baseline = any(r.baseline for r in ranked)
    notes.against = any(r.against_claim for r in ranked)
    notes.no_claim = any(claim_text(r) == NO_CLAIM for r in ranked)
    notes.audited = any(r.verdict for r in ranked)
    notes.verdicts = {zoo: v.sentence() for zoo, v in zoo_verdicts(ranked).items()}
    return notes


def leaderboard_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT, *,
                      ranked: Sequence[Record] | None = None) -> pd.DataFrame:
    """One row per shown record, in ranking order: zoo, rank (none for a baseline), rank group, entry (the
    measure), submission (its folder, for a submitted entry), baseline, aliases (the equivalent entries it stands
    for), kind, status, local (the user's own, unverified record), scores with intervals and refusals (the exported
    ones and the sort score), claim (against its claim, as claimed, flat (no direction), no claim), verdict, citation, failure, and a note on a record made on a partial zoo (also in its
    fragility text, which every view shows). `ranked`: already ranked."""
    keys = [k for k in SCORE_NAMES if k in EXPORTED or k == sort]
    records = list(records)
    ranked = ranked if ranked is not None else rank_records(records, sort)
    names = {**entry_names(ranked), **entry_names(records)}
    rows = []
    for r in ranked:
        row = {"zoo": r.zoo_name, "rank": r["rank"], "tied": r.data.get("rank_tied") is True, "group": r["rank_group"],
               "entry": entry_name(r),
               "submission": submission_folder(r), "baseline": r.baseline,
               "aliases": ", ".join(alias_names(r, names)), "kind": r.kind, "status": r.status, "local": r.local,
               "trainings": r.n_trainings, "provisional": r.provisional,
               "group_settled": None if r.group_trainings is None else r.group_trainings[0] == r.group_trainings[1]}
        for k in keys:
            lo, hi = r.interval(k)
            row[k], row[k + "_lo"], row[k + "_hi"] = _nan(r.score(k)), _nan(lo), _nan(hi)
            row[k + "_refused"] = r.refusal(k) or ""
        row["claim"] = claim_text(r)
        row["fragility"] = r.verdict or ("failed" if not r.ok else "not audited")
        row["audit_zoo"] = r.audit_zoo or ""
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


AGAINST = "against its claim"
AGAINST_NOTE = (f"{AGAINST}: the entry's free slope or Kendall \u03c4 runs against the direction its measure "
                "declares (higher_means); its ranking k-fold R\u00b2 holds the slope to the claim in every training "
                "fold, its free k-fold R\u00b2 is kept as kfold_r2_free")


NO_CLAIM = "no claim"
NO_CLAIM_NOTE = (f"{NO_CLAIM}: the entry's measure is a scalar that declares no direction (higher_means), so its "
                 "ranking k-fold R\u00b2 fits the slope freely (DEMOGEN's protocol) where the others' hold it to "
                 "their claim; declare one to be held to it")


def claim_text(r: Record) -> str:
    """How an entry stands to its declared direction: against its claim, as claimed, no claim, or '' (not checked:
    a signature, a baseline, a failure)."""
    d = r.direction
    if not d:
        return ""
    if d.get("claim") is None:
        return NO_CLAIM
    if r.against_claim:  # over trainings: on most of them (Record.against_claim)
        return AGAINST
    return "flat (no direction)" if is_flat(d) else "as claimed"


def rank_cell(row: Mapping[str, Any]) -> str:
    """The rank column of a table row as text: the rank ('=22' when shared with entries of the same ranking score),
    BASELINE_RANK for a baseline, '-' when unranked."""
    if row.get("baseline") is True:
        return BASELINE_RANK
    return ("=" if row.get("tied") is True and finite(row.get("rank")) is not None else "") + rank_text(row.get("rank"))


def _md(text: Any) -> str:
    """Text safe in a markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(table: pd.DataFrame, notes: ViewNotes | None = None) -> str:
    """One markdown table per zoo: rank, group, entry, its submission folder (when the zoo has a submitted entry),
    the ranking score first, then the score columns valued on the zoo (labelled as in the terminal), each with its
    95% interval where one exists, kind, local, fragility and citation; each table followed by its notes, failures
    and refusal footnotes; then the notes said once (group rule, what a baseline is, how entries are named)."""
    notes = notes or ViewNotes()
    parts = []
    for zoo, part in table.groupby("zoo", sort=False):  # the rows' order: the ranking's zoo order
        keys = [k for k in score_columns(notes.sort, notes.hidden.get(str(zoo), {})) if k in part]
        subs = "submission" in part and bool(part["submission"].fillna("").astype(bool).any())
        foot = Footnotes()
        rows = []
        for _, r in part.iterrows():
            entry = r["entry"] + (f" (also: {r['aliases']})" if r.get("aliases") else "") + \
                (f" ({r['claim']})" if r.get("claim") in (AGAINST, NO_CLAIM) else "")
            rows.append({"zoo": zoo, "rank": rank_cell(r), "group": rank_text(r["group"]), "entry": entry,
                         **({"submission": r.get("submission") or ""} if subs else {}),
                         **{k: score_cell(r[k], r.get(f"{k}_lo"), r.get(f"{k}_hi"), refused=r.get(f"{k}_refused"),
                                          notes=foot, digits=DIGITS) for k in keys},
                         "kind": r["kind"] or "", "local": str(bool(r["local"])), "fragility": r["fragility"],
                         "citation": r.get("citation") or ""})
        df = pd.DataFrame(rows).map(_md).rename(columns={k: f"{score_spec(k).ascii} [95%]" for k in keys})
        failed = [f"failed: {r['entry']}" + (f" (submission {r['submission']})" if r.get("submission") else "")
                  + f": {r['failure'] or 'no reason recorded'}" for _, r in part.iterrows() if r["status"] != "ok"]
        lines = notes.zoo_lines(str(zoo)) + failed + foot.lines()
        verdict = notes.verdicts.get(str(zoo))
        parts.append((f"**{_md(zoo_title(str(zoo)))}: {_md(verdict)}**\n\n" if verdict else "") + df.to_markdown(index=False,
                                                                                     disable_numparse=True) + "\n"
                     + "".join(f"\n- {_md(line)}" for line in lines) + ("\n" if lines else ""))
    once = notes.lines() + ([f"{NAMING}; score cells: value [95% interval] where one exists"] if parts else [])
    tail = "".join(f"- {_md(line)}\n" for line in once)
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
