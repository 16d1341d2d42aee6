"""The leaderboard, scores and audits as terminal tables (rich), each printed on the console it is given: one
set of labels at any width, long text wrapped, nothing cut."""
from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from ..defaults import AGGREGATE_RULE, SHIPPED_RESULTS
from ..scoring.spec import DEFAULT_SORT, MeasureScores, phi_text, score_label
from ..text import REASON_LIMIT, plain_text, safe_text
from .columns import score_spec
from .export import AGAINST, AGAINST_NOTE, NAMING, NO_CLAIM, entry_names, interval_columns, rank_cell, score_columns
from .format import BASELINE_RANK, MISSING, Footnotes, number, rank_text, score_cell
from .standings import aggregate_table, zoo_title

if TYPE_CHECKING:
    import pandas as pd

    from ..record import Record
    from ..scoring.audit import Check, FragilityReport
    from ..scoring.scores import Scores
    from .export import ViewNotes

WIDE_CITATION = 24  # the narrowest citation column of the full terminal table (narrower: the headline columns)
SHORT_CITATION = 32  # a citation the terminal cannot shorten to "Author et al. YEAR" is clipped to this (with ...)
NARROW = ("delta_r2", "tau")  # the scores a narrow terminal shows beside the ranking score, while they fit
FRAGILITY_WIDTH = 11  # the fragility column: its codes on one line ("fv ft fs db")
LOCAL_MARK = " *"  # after an entry's name in the terminal: the user's own record, not verified
AGAINST_MARK = " !"  # after an entry's name in the terminal: it runs against its claim
NO_CLAIM_MARK = " ?"  # after an entry's name: a scalar that declares no direction (its slope fitted freely)
NO_CLAIM_SHORT = f"{NO_CLAIM} (a scalar that declares no direction: its slope fitted freely, not held to a claim)"
PROVISIONAL_MARK = " ~"  # after an entry's name: provisional (fewer trainings than the official records)
PROVISIONAL = ("provisional: scored on fewer trainings of the grid than the official records; ranked by the mean over "
               "its trainings, without a rank group (its record's note names the commands that complete it)")


MINE_OFF_OFFICIAL = ("across the official zoos: none of your records is on one; `genbench submit FOLDER` without "
                     "--zoo scores on the official zoos built here")


def print_leaderboard(console: Console, table: pd.DataFrame, ranked: list[Record], sort: str, notes: ViewNotes,
                      *, explain: bool = True, local_only: bool = False, off_official: str = MINE_OFF_OFFICIAL
                      ) -> None:
    """The ranked table of each zoo (every column on a wide terminal, the headline ones on a narrow one, with the
    same labels; none that no entry has a value for) with the user's own records marked local, baselines marked
    `base`, its notes and refusal footnotes, its failed records below it, the mean ranks across zoos when there
    are several, and once, the group rule, what a baseline is and how entries are named. Long text wraps: nothing
    is cut. `local_only` (--mine): the mean ranks across zoos of the user's own records only (`off_official`: what
    to say when none of them is on an official zoo)."""
    for z, part in table.groupby("zoo", sort=False):  # the rows' order: the ranking's zoo order
        failed, part = part[part["status"] != "ok"], part[part["status"] == "ok"]
        t, foot = zoo_table(console, str(z), part, sort, notes.hidden.get(str(z), {}))
        if str(z) in notes.verdicts and not part.empty:
            say(console, f"{zoo_title(str(z))}: {notes.verdicts[str(z)]}")
        if not part.empty:
            console.print(t)
        for line in notes.zoo_lines(str(z)) + foot.lines():
            say(console, line, indent=2)
        if not failed.empty:
            say(console, f"failed on {z}, not ranked:")
        for _, r in failed.iterrows():
            sub = f" (submission {r['submission']})" if r.get("submission") else ""
            why = plain_text(r["failure"] or "no reason recorded", limit=REASON_LIMIT)
            say(console, f"{entry_cell(r)}{plain_text(sub)}: {why}", indent=2)
    agg = aggregate_table([], sort, ranked=ranked)
    if local_only and not agg.empty and agg["zoos"].max() > 1:  # ranked among all, shown: the user's own
        agg = agg[agg["local"].astype(bool)]
        if agg.empty:
            say(console, off_official)
    if not agg.empty and agg["zoos"].max() > 1:  # complete official zoos only, as on the page
        names = {name: entry for (_, name), entry in entry_names(ranked).items()}
        t = Table("entry", "mean rank", "zoos", box=box.SIMPLE_HEAD, pad_edge=False,
                  title=f"across the official zoos: mean of the per-zoo ranks by {sort}")
        for _, r in agg.iterrows():
            base = f" ({BASELINE_RANK}: mean place)" if r["baseline"] else ""
            t.add_row(escape(entry_cell({"entry": names.get(r["entry"], r["entry"]), "local": r["local"],
                                         "provisional": r["provisional"]})) + base,
                      rank_text(r["mean_rank"]), str(int(r["zoos"])))
        console.print(t)
        say(console, f"across zoos: {AGGREGATE_RULE}", indent=2)
    if explain:
        print_notes(notes, console)
    else:
        say(console, short_legend(notes.sort) + ("; group: " + notes.group.split(": ", 1)[-1] if notes.group else ""))
    if notes.audited:
        say(console, fragility_key(table, hint=not explain))
    if explain and "submission" in table and table["submission"].astype(bool).any():
        say(console, NAMING)
    if "claim" in table and (table["claim"] == AGAINST).any():
        say(console, f"{AGAINST_MARK.strip()} after an entry's name: {AGAINST} (above)")
    if "claim" in table and (table["claim"] == NO_CLAIM).any():
        say(console, f"{NO_CLAIM_MARK.strip()} after an entry's name: {NO_CLAIM_SHORT}")
    if "provisional" in table and table["provisional"].astype(bool).any():
        say(console, f"{PROVISIONAL_MARK.strip()} after an entry's name: {PROVISIONAL}")
    if table["local"].any():
        say(console, f"{LOCAL_MARK.strip()} local: your own record, not verified (not in the shipped {SHIPPED_RESULTS}); "
             "`genbench leaderboard add RECORD` verifies it and adds it there")


def zoo_table(console: Console, zoo: str, part: pd.DataFrame, sort: str, hidden: dict[str, str]
              ) -> tuple[Table, Footnotes]:
    """One zoo's ranked rows as a terminal table, and the footnotes of its refused cells. One set of labels at any
    width: where it fits, every score column valued on the zoo (the ranking score first), the submission folder,
    kind and citation; else rank, group, entry, the ranking score, what it adds to the recipe, tau (where it fits)
    and fragility (where it fits; one label per line), with a caption saying so.
    Text that does not fit its column wraps: nothing is cut."""
    with_iv = interval_columns(sort)
    subs = "submission" in part and bool(part["submission"].astype(bool).any())

    def build(wide: bool, extra: tuple[str, ...] = (), caption: str | None = None, least: bool = False,
              fragility: bool = True) -> tuple[Table, Footnotes]:
        """The full (`wide`) or headline table (the ranking score and the `extra` scores, fragility unless told
        not); `least`: its wrapping columns at their narrowest."""
        foot = Footnotes()
        keys = score_columns(sort, hidden) if wide else [sort, *extra]
        cols = [Column("rank", no_wrap=True), Column("group", no_wrap=True), Column("entry", no_wrap=True),
                *([Column("submission", no_wrap=True)] if wide and subs else []),
                *(Column(score_spec(k).ascii + (" [95%]" if k in with_iv else ""), no_wrap=True) for k in keys),
                *([Column("kind", no_wrap=True)] if wide else []),
                *([Column("fragility", overflow="fold", min_width=FRAGILITY_WIDTH)] if fragility else []),
                *([Column("citation", no_wrap=True, min_width=WIDE_CITATION)] if wide else [])]
        t = Table(*cols, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False,
                  title=f"{zoo_title(zoo)}: ranked by {sort}", caption=caption)
        for _, r in part.iterrows():
            scores = [score_cell(r.get(k), *((r.get(f"{k}_lo"), r.get(f"{k}_hi")) if k in with_iv else ()),
                                 refused=r.get(f"{k}_refused"), notes=foot, digits=score_spec(k).digits)
                      for k in keys]
            t.add_row(rank_cell(r), rank_text(r["group"]), escape(entry_cell(r)),
                      *([safe_text(r["submission"])] if wide and subs else []),
                      *scores, *([safe_text(r["kind"] or "")] if wide else []),
                      *([fragility_cell(r["fragility"], _note(r))] if fragility else []),
                      *([safe_text(short_citation(plain_text(r["citation"] or "")))] if wide else []))
        return t, foot

    need = width(build(True, least=True)[0])
    if need <= console.width:
        return build(True)
    caption = (f"a terminal narrower than {need} columns shows fewer columns here; --format markdown or csv gives "
               "them all")
    headline = [k for k in NARROW if k != sort and k not in hidden]
    while headline and width(build(False, tuple(headline), least=True)[0]) > console.width:
        headline.pop()  # the last of NARROW goes first
    if not headline and width(build(False, least=True)[0]) > console.width:  # the fragility last, said so
        return build(False, caption=caption + "; fragility: `genbench audit MEASURE`", fragility=False)
    return build(False, tuple(headline), caption)


def short_citation(text: str) -> str:
    """A citation on one line of the terminal table: "Author YEAR", "Author and Other YEAR" or "Author et al. YEAR"
    when it starts with its authors and a year, else its first SHORT_CITATION characters; the page and the exports
    keep it whole. Runs of whitespace (a tab, which a terminal cell would cut) are one space."""
    text = " ".join(text.split())
    m = re.match(r"\s*([^()\d]{1,80}?)[\s,(]*((?:19|20)\d\d)\b", text)
    if m:
        authors = [a.strip() for a in re.split(r",| and | & ", m.group(1).replace(" et al.", ",,")) if a.strip()]
        many = len(authors) > 2 or " et al" in m.group(1)
        if authors and len(authors[0]) <= SHORT_CITATION:
            who = f"{authors[0]} et al." if many else " and ".join(authors)
            return f"{who} {m.group(2)}"
    return text if len(text) <= SHORT_CITATION else text[:SHORT_CITATION - 1].rstrip() + "\u2026"


def width(table: Table) -> int:
    """The columns `table` takes when nothing has to wrap but what it wraps anyway: Rich's measurement of its widest
    layout (what printing it on an unbounded console gives, without the rendering)."""
    return Console(file=io.StringIO(), width=100_000, color_system=None).measure(table).maximum


def say(out: Console, text: str, *, indent: int = 0) -> None:
    """Print plain text wrapped at word boundaries to the console's width, continuation lines indented."""
    lines = textwrap.wrap(" ".join(str(text).split()), width=max(out.width, 20), initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + 2), break_on_hyphens=False)
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def print_notes(notes: ViewNotes, out: Console, *, per_zoo: bool = False) -> None:
    """The notes a view says once: the group rule and what a baseline is; with `per_zoo`, each zoo's notes first
    (aliases, columns never valued there), which the terminal prints under each zoo's table instead."""
    lines = [f"{z}: {line}" for z in notes.hidden for line in
             ([notes.verdicts[z]] if z in notes.verdicts else []) + notes.zoo_lines(z, shown=False)] if per_zoo else []
    for line in lines + notes.lines(data=per_zoo):
        say(out, line)


def entry_cell(row: pd.Series | dict) -> str:
    """An entry's name as the terminal shows it (its measure): marked when the record is the user's own (local),
    when it runs against its claim or makes none, and when it is provisional."""
    claim = {AGAINST: AGAINST_MARK, NO_CLAIM: NO_CLAIM_MARK}.get(row.get("claim"), "")
    return plain_text(row["entry"]) + (LOCAL_MARK if row.get("local") else "") + claim + \
        (PROVISIONAL_MARK if row.get("provisional") else "")


PHI_WIDTH = 7  # the phi column's narrowest: its longest word, "(folds:"
SCORE_VIEW = ("kfold_r2", "delta_r2", "tau", "adj_r2", "psi", "cmi", "pgdl_score", "sign_error_worst",
              "sign_error_mean")
"""The columns of `genbench score`, most wanted first: a narrow terminal drops them from the end."""


def print_scores(console: Console, scores: Scores, zoo: str, target: str) -> None:
    """One row per measure, best k-fold R^2 first: the scores with their intervals (what it adds to the recipe among
    them) and the phi used, as many as fit the terminal (a name, number or interval is never cut: the last columns
    go first, and a caption says so); a measure against its claim marked; each measure's notes and refusals below
    the table."""
    ordered = sorted(scores, key=lambda s: -(s.values.get("kfold_r2", float("-inf"))))
    foot = Footnotes()

    def cell(s: MeasureScores, k: str) -> str:
        if k in s.refused:
            return foot.mark(f"{s.measure}: {score_label(k)}: {s.refused[k]}")  # the dash and its footnote number
        iv = s.intervals.get(k, ()) if score_spec(k).interval or k == "kfold_r2" else ()
        return number(s.values.get(k), *iv, digits=score_spec(k).digits)

    def build(keys: Sequence[str], caption: str | None = None, measuring: bool = False) -> Table:
        """The table; `measuring`: with each phi cell at its narrowest (the folds' choices wrap below it)."""
        iv = {k for k in keys if score_spec(k).interval or k == "kfold_r2"}
        t = Table(Column("measure", no_wrap=True), Column("phi", min_width=PHI_WIDTH),
                  *(Column(score_spec(k).ascii + (" [95%]" if k in iv else ""), no_wrap=True) for k in keys),
                  box=box.SIMPLE_HEAD, pad_edge=False, caption=caption,
                  title=f"{zoo}: target {target}, {len(scores)} measure(s), 95% paired bootstrap intervals")
        for s in ordered:
            phi = phi_text(s.transform_used, s.transform or "")
            t.add_row(s.measure + (AGAINST_MARK if s.direction.get("against") else ""),
                      phi.partition(" ")[0].ljust(PHI_WIDTH) if measuring else phi, *(cell(s, k) for k in keys))
        return t

    keys = [k for k in SCORE_VIEW if any(k in s.values or k in s.refused for s in ordered)]
    shown = list(keys)
    while len(shown) > 1 and width(build(shown, measuring=True)) > console.width:
        shown.pop()
    foot = Footnotes()  # the marks of the table printed, not of the ones measured
    dropped = [score_spec(k).ascii for k in keys if k not in shown]
    console.print(build(shown, caption=f"not shown at this width: {', '.join(dropped)} (a wider terminal shows "
                                       "them)" if dropped else None))
    for line in foot.lines():
        say(console, line, indent=2)
    said: dict[str, list[str]] = {}  # a note several measures share is said once, naming them
    for s in ordered:
        for note in s.notes:
            said.setdefault(note, []).append(s.measure)
    for note, names in said.items():
        who = f"all {len(names)} measures" if len(names) == len(scores) > 2 else ", ".join(names)
        say(console, f"{who}: {note}", indent=2)
    if any(s.direction.get("against") for s in scores):
        say(console, f"{AGAINST_MARK.strip()} after a measure: {AGAINST_NOTE}")


def print_demogen_tables(console: Console, scores: Scores, zoo: str) -> None:
    """The DEMOGEN Tables 1 and 4 measured on `zoo`, beside the paper's CNN column."""
    from ..scoring.demogen import FIXED_NOTE, demogen_table
    for which, title in ((1, "Table 1: ablations"), (4, "Table 4: single layers, qrt+log")):
        t = Table("setting", "adj R2 [95%]", "k-fold R2 [95%]", "k-fold R2 per fold", "MSE x1e-3 [95%]",
                  "paper adj R2", "paper kf R2", "paper MSE",
                  title=f"DEMOGEN {title} on {zoo} (paper: CNN on CIFAR-10)")
        for _, r in demogen_table(scores.items, which).iterrows():
            t.add_row(r["setting"],
                      *(number(r[k], r[f"{k}_lo"], r[f"{k}_hi"]) for k in ("adj_r2", "kfold_r2")),
                      number(r["kfold_r2_folds"]), number(r["mse"], r["mse_lo"], r["mse_hi"]),
                      number(r["paper_adj_r2"]),
                      "negative" if r["paper_kfold_r2"] is None else number(r["paper_kfold_r2"]),
                      number(r["paper_mse"]))
        console.print(t)
    console.print("k-fold R2: pooled over the held-out predictions, mean of 10 shuffles of 10-fold CV; per fold: "
                  f"the paper's mean of per-fold R2 (unstable on small folds). {FIXED_NOTE}.",
                  markup=False, highlight=False)


def _audit_outcome(c: Check, missing: dict[str, str]) -> str:
    """A check's outcome cell: failed (its label), passed, n/a, or passed on too little evidence."""
    if c.failed is None:
        return "[dim]n/a[/dim]"
    if c.failed:
        return f"[red]{c.label}[/red]"
    return "[yellow]ok, too little evidence[/yellow]" if c.part in missing else "[green]ok[/green]"


def print_audit(console: Console, report: FragilityReport, measure: str, zoo: str, *, details: bool = False) -> None:
    """A fragility audit: its checks against their thresholds, with `details` the per-cell and per-curve tables,
    its notes, and the verdict."""
    admitted = ", ".join(f"{k} {v:.0%}" for k, v in report.admitted.items()) or "no twins"
    console.print(f"[bold]{measure}[/bold] on {zoo} ({report.form} form); admissible twin cells: {admitted}")
    t = Table("part", *(Column(c, overflow="fold") for c in ("statistic", "value", "threshold (fails if)", "outcome",
                                                            "detail")),  # a long word wraps, never cut short
              title=f"fragility audit of {measure}")
    for c in report.checks:
        t.add_row(c.part, c.statistic, number(c.value), escape(c.threshold), _audit_outcome(c, report.missing),
                  escape(c.detail))
    console.print(t)
    if details:
        for name, df in (("twin cells", report.cells), ("learning curves", report.curves),
                         ("data sensitivity", report.data), ("rescaling control", report.control)):
            if not df.empty:
                console.print(f"[bold]{name}[/bold]")
                console.print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for note in report.notes:
        console.print(f"note: {note}")
    print_verdict(console, report)


def print_verdict(console: Console, report: FragilityReport) -> None:
    """The verdict, the evidence of every part against its minimum, and the missing parts with their reasons."""
    verdict, missing = report.verdict, report.missing
    colour = "green" if verdict == "robust" else "yellow" if verdict.startswith("inconclusive") else "red"
    for e in report.evidence:
        unit = e.unit[:-1] if e.n == 1 and e.unit.endswith("s") else e.unit  # "1 control model"
        per = " per twin kind" if e.by_twin else ""  # value, trend and scaling judge each kind on its own
        console.print(f"evidence: {escape(e.part)} rests on {e.n} {escape(unit)} (needs >= {e.minimum}{per})")
    for part, why in missing.items():
        console.print(f"[yellow]missing[/yellow] {escape(part)}: {escape(why)}")
    console.print(f"verdict: [bold {colour}]{escape(verdict)}[/bold {colour}]")


# ---------------------------------------------------------------- the default view: the official zoos at a glance

FRAGILITY_CODES = {"robust": "ok", "fragile-value": "fv", "fragile-trend": "ft", "fragile-scale": "fs",
                   "data-blind": "db", "inconclusive": "?", "not audited": "-", "failed": "x"}
"""The fragility labels as the terminal's one-line cell abbreviates them (the key is printed under the table)."""


def fragility_code(text: str, note: str = "") -> str:
    """A record's fragility text (its verdict, then `note` when the row carries one) on one short line: each label by
    its code (FRAGILITY_CODES), unknown ones whole; '?' for a verdict that is or ends inconclusive. The reasons of an
    inconclusive verdict hold commas and semicolons of their own: they are not labels."""
    verdict = _verdict_of(str(text), note)
    if verdict.startswith("inconclusive"):
        return FRAGILITY_CODES["inconclusive"]
    head, _, rest = verdict.partition(";")
    codes = [FRAGILITY_CODES.get(p.strip(), p.strip()) for p in head.split(",") if p.strip()]
    if rest.strip().startswith("inconclusive"):
        codes.append(FRAGILITY_CODES["inconclusive"])
    return " ".join(codes) or "-"


def _note(row: Any) -> str:
    """A table row's note ('' where it has none)."""
    note = row.get("note")
    return note if isinstance(note, str) else ""


def _verdict_of(text: str, note: str) -> str:
    """The verdict part of a row's fragility text (export.py appends '; NOTE' when the row has a note)."""
    return text[:-len(note) - 2] if note and text.endswith(f"; {note}") else text


def fragility_cell(text: str, note: str = "") -> str:
    """The fragility cell of a zoo's table: the codes on one line, then the row's note (a partial zoo's) whole."""
    return fragility_code(text, note) + (f"; {note}" if note else "")


def fragility_key(rows: pd.DataFrame, *, hint: bool = True) -> str:
    """The key of the fragility codes under a table of `rows`, naming the zoo(s) their audits ran on; `hint`: where
    the long legend is not printed, how to get it."""
    audit_zoos = sorted({str(a) for a in rows.get("audit_zoo", ()) if a})
    on = f" (audited on {', '.join(audit_zoos)})" if audit_zoos else ""
    return (f"fragility{on}: ok robust, fv fragile-value, ft fragile-trend, fs fragile-scale, db data-blind, "
            "? inconclusive, - not audited" + ("; --explain says what each means" if hint else ""))


SHORT_LEGEND = ("rank: by k-fold R^2 on each zoo, 1 = best (=N: tied, the same score; base: a baseline row, a "
                "reference with no rank, its place among the measures); mean: the mean rank over the official zoos; "
                "adds: what the entry adds to the recipe (baseline.hparams), 95% paired interval")


def short_legend(sort: str) -> str:
    """SHORT_LEGEND for a view ranked by `sort` (--sort tau ranks by Kendall tau, not k-fold R^2)."""
    return SHORT_LEGEND if sort == DEFAULT_SORT else SHORT_LEGEND.replace("k-fold R^2", score_spec(sort).ascii, 1)


def official_view(console: Console, table: pd.DataFrame, ranked: list[Record], sort: str, notes: ViewNotes,
                  zoos: Sequence[str], *, explain: bool = False) -> None:
    """The official zoos at a glance: each zoo's verdict, then one table with a row per entry (best mean rank first)
    and, per zoo, its rank, ranking score, what it adds to the recipe and its fragility on one line; the entries
    that failed, a short legend once (`explain`: then the long one). As many columns as fit the console:
    intervals, then the adds, then the fragility go first, and a caption says so."""
    for z in zoos:
        if z in notes.verdicts:
            say(console, f"{z}: {notes.verdicts[z]}")
    parts = {z: table[(table["zoo"] == z) & (table["status"] == "ok")] for z in zoos}
    agg = aggregate_table([], sort, ranked=ranked)
    names = {name: entry for (_, name), entry in entry_names(ranked).items()}
    rows = {z: {r["entry"]: r for _, r in part.iterrows()} for z, part in parts.items()}
    order = [names.get(e, e) for e in agg["entry"]] if not agg.empty else []
    order += [e for z in zoos for e in rows[z] if e not in order]  # on one official zoo, not in the aggregate
    mean = {names.get(e, e): m for e, m in zip(agg["entry"], agg["mean_rank"])} if not agg.empty else {}
    with_iv = set(interval_columns(sort))
    spec = score_spec(sort)
    letters = {z: chr(ord("A") + i) for i, z in enumerate(zoos)}  # zoo names are long: each column says its letter
    longest = max([len(entry_cell({"entry": e, "local": True, "claim": AGAINST, "provisional": True}))
                   for e in order] or [5])

    def build(intervals: bool, adds: bool, fragility: bool, compact: bool = False, caption: str | None = None
              ) -> tuple[Table, Footnotes]:
        foot = Footnotes()
        label = ({"kfold_r2": "R2"}.get(sort, spec.ascii) if compact else spec.ascii) + (" [95%]" if intervals else "")
        cols = [Column("entry", no_wrap=True, min_width=longest)]
        for z, letter in letters.items():
            cols += [Column(letter if compact else f"rank {letter}", no_wrap=True), Column(label, no_wrap=True)]
            cols += [Column("adds [95%]" if intervals else "adds", no_wrap=True)] if adds else []
            cols += [Column(f"frag {letter}", no_wrap=True)] if fragility else []
        cols.append(Column("mean", no_wrap=True))
        t = Table(*cols, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False, caption=caption,
                  title=f"the official zoos ({', '.join(f'{l}: {z}' for z, l in letters.items())}), ranked by {sort}: "
                        f"{len(order)} entries, best mean rank first", title_justify="left", caption_justify="left")
        for e in order:
            cells = []
            local = any(bool(rows[z][e]["local"]) for z in zoos if e in rows[z])
            claims = {rows[z][e].get("claim") for z in zoos if e in rows[z]}
            claim = AGAINST if AGAINST in claims else NO_CLAIM if NO_CLAIM in claims else ""
            provisional = any(bool(rows[z][e].get("provisional")) for z in zoos if e in rows[z])
            for z in zoos:
                r = rows[z].get(e)
                if r is None:
                    cells += [MISSING, MISSING] + ([MISSING] if adds else []) + ([MISSING] if fragility else [])
                    continue
                iv = (r.get(f"{sort}_lo"), r.get(f"{sort}_hi")) if intervals and sort in with_iv else ()
                cells += [rank_cell(r), score_cell(r.get(sort), *iv, refused=r.get(f"{sort}_refused"), notes=foot,
                                                   digits=spec.digits)]
                if adds:
                    div = (r.get("delta_r2_lo"), r.get("delta_r2_hi")) if intervals else ()
                    cells.append(score_cell(r.get("delta_r2"), *div, refused=r.get("delta_r2_refused"), notes=foot,
                                            digits=score_spec("delta_r2").digits))
                if fragility:
                    cells.append(fragility_code(r["fragility"], _note(r)))
            m = mean.get(e)
            t.add_row(escape(entry_cell({"entry": e, "local": local, "claim": claim,
                                         "provisional": provisional})), *cells,
                      rank_text(m) if m is not None else MISSING)
        return t, foot

    tries = [(True, True, True), (False, True, True), (False, False, True), (False, False, False),
             (False, False, False, True)]
    for i, shape in enumerate(tries):
        t, foot = build(*shape)
        if width(t) <= console.width or i == len(tries) - 1:
            break
    if shape != tries[0]:
        gone = ["intervals"] + (["adds"] if not shape[1] else []) + (["fragility"] if not shape[2] else [])
        t, foot = build(*shape, caption=f"narrow terminal: no {', '.join(gone)} here; a wider one, --zoo NAME or "
                                         "--format markdown shows them")
    console.print(t)
    for line in foot.lines():
        say(console, line, indent=2)
    for z in zoos:
        failed = table[(table["zoo"] == z) & (table["status"] != "ok")]
        if not failed.empty:
            say(console, f"failed on {z}, not ranked: " + "; ".join(
                f"{entry_cell(r)}: {plain_text(r['failure'] or 'no reason recorded', limit=REASON_LIMIT)}"
                for _, r in failed.iterrows()),
                indent=2)
    say(console, short_legend(sort))
    if shape[2]:
        say(console, fragility_key(table[table["zoo"].isin(zoos)], hint=not explain))
    marks = [f"{AGAINST_MARK.strip()}: {AGAINST} on a zoo"] if "claim" in table and (table["claim"] == AGAINST).any() \
        else []
    marks += [f"{NO_CLAIM_MARK.strip()}: {NO_CLAIM_SHORT}"] \
        if "claim" in table and (table["claim"] == NO_CLAIM).any() else []
    marks += [f"{LOCAL_MARK.strip()}: local, your own unverified record"] if table["local"].any() else []
    marks += [f"{PROVISIONAL_MARK.strip()}: provisional, fewer trainings than the official records"] \
        if "provisional" in table and table["provisional"].astype(bool).any() else []
    if marks:
        say(console, "; ".join(marks))
    if explain:
        say(console, f"mean: {AGGREGATE_RULE}")
        print_notes(notes, console)
