"""The static leaderboard site: ranked tables per zoo, entry pages with chart and provenance; works from file://.
It renders only: the order is ranking.py's, the record is read through schema.py, the numbers through format.py."""
from __future__ import annotations

import hashlib
import html
import io
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..defaults import AGGREGATE_RULE
from ..scoring.spec import DEFAULT_SORT
from .export import alias_names, entry_name, entry_names, interval_columns, score_columns, submission_folder
from .format import DASH, DIGITS, REFUSED, interval, number, page_number, rank_text
from .ranking import MeanRank, by_zoo, empty_scores, group_rule, mean_ranks, partial_note, rank_records
from .schema import BASELINE_NOTE, SHOWN, WITH_INTERVAL, Record, finite, score_label, score_spec

if TYPE_CHECKING:
    import pandas as pd

ASSETS = Path(__file__).with_name("assets")
ASSET_FILES = ("site.css", "site.js")
MARKER = ".genbench-site"
# Scripts only from the site's own files (never inline), so escaped or not, record text cannot run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'")
PROVENANCE_ORDER = ("genbench_version", "git_commit", "measure_version", "measure_source_hash", "device",
                    "seconds", "date", "command")


# ---------------------------------------------------------------- small helpers


def esc(x: Any) -> str:
    """HTML-escape any value as text (quotes too, so it is safe in attributes)."""
    return html.escape("" if x is None else str(x), quote=True)


def slug(text: str) -> str:
    """A file-name-safe, collision-resistant form of `text` (unchanged when it is already safe)."""
    text = str(text)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", text) and ".." not in text:
        return text
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:60] or "entry"
    return f"{base}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def _sort_attr(v: float | None) -> str:
    """The data-sort attribute of a numeric cell (empty: missing, sorted last)."""
    return "" if v is None else repr(float(v))


def _first(score: str) -> str:
    """The first sort direction of a score's column: best first."""
    return "ascending" if score_spec(score).lower_is_better else "descending"


# ---------------------------------------------------------------- badges


def _known(x: Any) -> Any:
    return "?" if x is None else x


def partial_badge(rec: Record) -> str:
    """The 'partial zoo' mark of a record made on a partial zoo, its reason in its title ('' otherwise)."""
    note = partial_note(rec)
    if not note:
        return ""
    tip = (f"{note[0].upper()}{note[1:]}: its scores describe only the models the zoo held, so it is listed "
           "apart from the records made on every model of the zoo's recipe.")
    return f' <span class="badge badge-none badge-partial" tabindex="0" title="{esc(tip)}">partial zoo</span>'


def local_badge(local: bool) -> str:
    """The 'local' mark of the user's own record (not from the shipped folder: not verified); '' otherwise."""
    if not local:
        return ""
    tip = ("Your own record, read from a results folder other than the shipped one: not verified. "
           "`genbench leaderboard add RECORD` verifies it and adds it to the shipped folder.")
    return f' <span class="badge badge-local" tabindex="0" title="{esc(tip)}">local</span>'


def baseline_badge(rec: Record) -> str:
    """The 'baseline' mark of a baseline row, what a baseline is in its title ('' for a measure)."""
    if not rec.baseline:
        return ""
    tip = f"Baseline, not a measure: {rec.citation or rec.name}. {BASELINE_NOTE[0].upper()}{BASELINE_NOTE[1:]}."
    return f' <span class="badge badge-baseline" tabindex="0" title="{esc(tip)}">baseline</span>'


def verdict_class(verdict: str) -> str:
    """The badge class of an audit verdict: robust, fragile (any failed part), inconclusive (a part could not run
    and none failed), else unknown."""
    if verdict == "robust":
        return "badge-robust"
    if "fragile" in verdict or "blind" in verdict:
        return "badge-fragile"
    return "badge-inconclusive" if verdict.startswith("inconclusive") else "badge-unknown"


def badge(rec: Record) -> str:
    """The fragility badge of a record: the verdict coloured, every check with its threshold in its title."""
    if not rec.ok:
        tip = "Evaluation failed: " + str(rec.failure or "no reason recorded")
        return f'<span class="badge badge-failed" tabindex="0" title="{esc(tip)}">failed</span>'
    if rec.audit is None:
        tip = "No fragility audit in this record."
        return f'<span class="badge badge-none" tabindex="0" title="{esc(tip)}">not audited</span>'
    verdict = str(rec.verdict or "not auditable")
    lines = [f"Fragility audit on {rec.audit_zoo or 'the fragility zoo'}: {verdict}"]
    for c in rec.checks:
        state = {True: "FAILED", False: "passed"}.get(c.failed, "n/a")  # type: ignore[arg-type]
        line = (f"{state} {_known(c.label)} ({_known(c.part)}): {_known(c.statistic)} = {page_number(c.value)}, "
                f"fails when {_known(c.threshold)}")
        if c.detail:
            line += f"; {c.detail}"
        lines.append(line)
    lines += [f"could not run: {part}: {why}" for part, why in rec.audit_missing]
    lines += [f"note: {n}" for n in rec.audit_notes]
    return (f'<span class="badge {verdict_class(verdict)}" tabindex="0" title="{esc(chr(10).join(lines))}">'
            f"{esc(verdict)}</span>")


# ---------------------------------------------------------------- page pieces


def page(title: str, body: str, root: str) -> str:
    """A complete HTML document; `root` is the relative path to the site root ('' or '../../')."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n"
        f'<link rel="stylesheet" href="{root}assets/site.css">\n'
        f'<script src="{root}assets/site.js" defer></script>\n'
        f"</head>\n<body>\n<main>\n{body}\n"
        '<footer>Generated by genbench. Static page: no server and no network needed.</footer>\n'
        "</main>\n</body>\n</html>\n"
    )


def th(label: str, *, kind: str = "text", first: str = "ascending", tip: str = "", cls: str = "",
       col: str = "") -> str:
    """A sortable header cell (`col`: the column's key, which its cells carry too and the column switches name)."""
    attrs = f' data-type="{kind}" data-first="{first}" aria-sort="none"'
    if tip:
        attrs += f' title="{esc(tip)}"'
    if cls:
        attrs += f' class="{cls}"'
    if col:
        attrs += f' data-col="{esc(col)}"'
    return f'<th scope="col"{attrs}>{label}</th>'


def _col(col: str) -> str:
    return f' data-col="{esc(col)}"' if col else ""


def num_td(v: Any, lo: Any = None, hi: Any = None, col: str = "") -> str:
    """A numeric cell with its sort key, and its interval beside it (beneath it on a narrow screen) when given."""
    ci = interval(lo, hi, digits=DIGITS, compact=True)
    ci_html = f' <span class="ci">{esc(ci)}</span>' if ci else ""
    return (f'<td class="num"{_col(col)} data-sort="{_sort_attr(finite(v))}"><span class="v">{esc(page_number(v))}'
            f"</span>{ci_html}</td>")


def refused_td(reason: str, col: str = "") -> str:
    """The cell of a refused score: a mark, never a number, with the reason in its title (sorted last)."""
    return (f'<td class="num"{_col(col)} data-sort=""><span class="refused" tabindex="0" '
            f'title="{esc("Refused: " + reason)}">{REFUSED} refused</span></td>')


def score_td(rec: Record, key: str, with_interval: bool = True) -> str:
    """A record's score as a cell: the value with its interval (only a real one), or the refusal mark."""
    reason = rec.refusal(key)
    if reason:
        return refused_td(reason, key)
    return num_td(rec.score(key), *(rec.interval(key) if with_interval else (None, None)), col=key)


def rank_td(v: Any, col: str = "", text: str | None = None) -> str:
    """A numeric cell showing a rank (an integer when it is one), or `text`."""
    return (f'<td class="num"{_col(col)} data-sort="{_sort_attr(finite(v))}">'
            f"{esc(text if text is not None else rank_text(v, DASH))}</td>")


def aliases_html(rec: Record, names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The entries an entry stands for, named as entries ('' when none)."""
    if not rec.aliases:
        return ""
    tip = "the same held-out predictions and scores on this zoo: shown once"
    also = ", ".join(alias_names(rec, names or {}))
    return f'<span class="aliases" title="{esc(tip)}: {esc(also)}">also: {esc(also)}</span>'


def entry_td(r: Record, href: str, names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The entry cell of a zoo table: the entry (its measure, linked), its local and partial marks and its aliases
    (a baseline's mark is in its Kind cell)."""
    name = entry_name(r)
    return (f'<td class="entry-cell" data-col="entry" data-sort="{esc(name.lower())}"><a class="entry" '
            f'href="{esc(href)}">{breakable(name)}</a>{local_badge(r.local)}{partial_badge(r)}'
            f"{aliases_html(r, names)}</td>")


def breakable(name: str) -> str:
    """A name escaped, with line-break opportunities after its dots and underscores (a narrow screen wraps it
    there, not mid-word)."""
    return re.sub(r"([._])", r"\1<wbr>", esc(name))


def submission_td(r: Record) -> str:
    """A submitted entry's folder (submissions/NAME) and title, clipped to the column, whole in its title."""
    folder = submission_folder(r)
    if not folder:
        return f'<td data-col="submission" data-sort="">{DASH}</td>'
    title = str((r.submission or {}).get("title") or "")
    tip = f"submissions/{folder}" + (f": {title}" if title else "")
    return (f'<td data-col="submission" data-sort="{esc(folder.lower())}"><span class="clip" tabindex="0" '
            f'title="{esc(tip)}"><span class="folder">{esc(folder)}</span> <span class="subtitle">{esc(title)}</span>'
            "</span></td>")


def citation_td(r: Record) -> str:
    """The citation clipped to the column (whole in its title and on the entry page), linked to the submission's
    paper when it gives an http(s) one."""
    text = str(r.citation or "")
    if not text:
        return f'<td data-col="citation" data-sort="">{DASH}</td>'
    url = safe_url((r.submission or {}).get("paper_url"))
    inner = f'<a href="{esc(url)}" rel="noopener noreferrer">{esc(text)}</a>' if url else esc(text)
    return (f'<td data-col="citation" data-sort="{esc(text.lower())}"><span class="clip" tabindex="0" '
            f'title="{esc(text)}">{inner}</span></td>')


def zoo_row(r: Record, keys: list[str], href: str, names: Mapping[tuple[str, str], str] | None = None,
            subs: bool = False, with_iv: Iterable[str] = WITH_INTERVAL) -> str:
    """One ranked (or partial) record as a row of its zoo's table."""
    sub_title = str(r.submission.get("title") or "") if r.submission else ""
    search = " ".join([entry_name(r), r.name, *r.aliases, *alias_names(r, names or {}), str(r.kind or ""),
                       str(r.citation or ""), sub_title, "local" if r.local else "",
                       "baseline" if r.baseline else ""]).lower()
    cls = ["partial"] if not r.zoo_complete else []
    if r.rank_group is not None:
        cls.append("group-even" if int(r.rank_group) % 2 == 0 else "group-odd")
    cls += ["local"] if r.local else []
    cls += ["baseline"] if r.baseline else []
    with_iv = set(with_iv)
    cells = [rank_td(r.rank, "rank"), rank_td(r.rank_group, "group"), entry_td(r, href, names)]
    cells += [score_td(r, key, key in with_iv) for key in keys]
    kind = baseline_badge(r).strip() if r.baseline else esc(r.kind or DASH)  # a baseline: the mark that says so
    cells.append(f'<td data-col="kind" data-sort="{esc(str(r.kind or "").lower())}">{kind}</td>')
    cells.append(f'<td data-col="fragility" data-sort="{esc(_verdict_key(r))}">{badge(r)}</td>')
    if subs:
        cells.append(submission_td(r))
    cells.append(citation_td(r))
    return (f'<tr class="{" ".join(cls)}" data-name="{esc(r.name)}" data-entry="{esc(entry_name(r))}" '
            f'data-search="{esc(search)}">' + "".join(cells) + "</tr>")


def page_rule(sort: str) -> str:
    """The rank-group rule as the page states it (R\u00b2 for R^2)."""
    return group_rule(sort).replace("R^2", "R\u00b2")


def zoo_caption(recs: list[Record], sort: str) -> str:
    """What a zoo's table holds and how it is ranked, with the group rule."""
    n_ok = sum(r.ok for r in recs)
    n_local = sum(r.ok and r.local for r in recs)
    n_partial = sum(r.ok and not r.zoo_complete for r in recs)
    n_base = sum(r.ok and r.baseline for r in recs)
    n_ranked = n_ok - n_partial - n_base
    return (f"{n_ranked} ranked entr{'y' if n_ranked == 1 else 'ies'}"
            f"{f', {n_base} baseline row(s), unnumbered' if n_base else ''}"
            f"{f', {len(recs) - n_ok} failed (listed below the table)' if len(recs) > n_ok else ''}"
            f"{f', {n_local} local (your own records, not verified)' if n_local else ''}"
            f"{f', {n_partial} unranked: scored on a partial zoo' if n_partial else ''}. "
            f"Ranked by {score_label(sort)}; {page_rule(sort)}. "
            "Intervals are 95% bootstrap intervals over models, shown only where one exists. An entry is named by "
            "its measure; a submitted one's folder is in the Submission column. Click a header to sort (the chart "
            "follows), again to reverse; missing values (\u2013) and refused ones sort last; Columns hides columns.")


def hidden_note(hidden: Mapping[str, str]) -> str:
    """Why the zoo's table lacks some score columns ('' when it shows them all)."""
    if not hidden:
        return ""
    items = "".join(f'<li data-score="{esc(k)}"><strong>{esc(score_label(k))}</strong>: no entry has a value on this '
                    f"zoo{'; ' + esc(why) if why else ''}</li>" for k, why in hidden.items())
    return f'<div class="hidden-columns"><p>Columns not shown on this zoo:</p><ul>{items}</ul></div>'


def column_menu(tid: str, columns: list[tuple[str, str]]) -> str:
    """The control that hides and shows a table's columns (`columns`: key, label; rank, group and entry stay)."""
    boxes = "".join(f'<label><input type="checkbox" data-col="{esc(k)}" checked> {label}</label>'
                    for k, label in columns)
    return (f'<details class="columns" data-table="{tid}"><summary title="hide or show columns (remembered in this '
            f'browser)">Columns</summary><div class="column-menu">{boxes}</div></details>')


def zoo_table(zoo: str, recs: list[Record], links: Mapping[tuple[str, int], str], tid: str,
              sort: str = DEFAULT_SORT, names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The overview chart and the ranked, sortable, filterable table of one zoo, without the score columns no entry
    has a value for; the ranking score's column first, a Submission column when an entry was submitted."""
    hidden = empty_scores((r for r in recs if r.zoo_complete), [k for k in SHOWN if k != sort])
    keys = score_columns(sort, hidden)
    with_iv = interval_columns(sort)
    shown = [(i, r) for i, r in enumerate(recs) if r.ok]  # failed ones: failed_list
    subs = any(submission_folder(r) for _, r in shown)
    scores = [(k, th(esc(score_spec(k).header), kind="num", first=_first(k), tip=score_spec(k).help, cls="num",
                     col=k)) for k in keys]
    head = "".join([
        th("Rank", kind="num", tip=f"rank on this zoo by {score_label(sort)} (baselines get none)", cls="num",
           col="rank"),
        th("Group", kind="num", tip=page_rule(sort), cls="num", col="group"),
        th("Entry", tip="the measure; follow it for its chart, provenance and command", col="entry"),
        *(h for _, h in scores), th("Kind", col="kind"),
        th("Fragility", tip="verdict of the fragility audit; hover a badge for its checks", col="fragility"),
        *([th("Submission", tip="the submission's folder (submissions/NAME) and title; none for a built-in measure",
              col="submission")] if subs else []),
        th("Citation", tip="hover for the whole citation; the entry's page has it too", col="citation"),
    ])
    menu = [*((k, esc(score_spec(k).header)) for k in keys), ("kind", "Kind"), ("fragility", "Fragility"),
            *([("submission", "Submission")] if subs else []), ("citation", "Citation")]
    rows = [zoo_row(r, keys, links[(zoo, i)], names, subs, with_iv) for i, r in shown]
    chart = overview_chart(zoo, [r for _, r in shown], [links[(zoo, i)] for i, _ in shown], tid, sort)
    return (
        chart +
        f'<div class="filter-bar"><input type="search" class="row-filter" id="{tid}-filter" '
        f'data-table="{tid}" data-count="{tid}-count" placeholder="filter by name, kind or citation" '
        f'aria-label="filter the entries of {esc(zoo)}"><span class="muted" id="{tid}-count"></span>'
        f"{column_menu(tid, menu)}</div>\n"
        f'<div class="table-wrap" tabindex="0" aria-label="the entries of {esc(zoo)} (scrolls sideways on a narrow '
        f'screen)"><table class="sortable-table leaderboard" id="{tid}" data-zoo="{esc(zoo)}" '
        f'aria-describedby="{tid}-note"><thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(rows)
        + f'\n</tbody></table></div><p class="table-note" id="{tid}-note">{esc(zoo_caption(recs, sort))}</p>'
        + hidden_note(hidden) + failed_list(zoo, recs, links)
    )


def failed_list(zoo: str, recs: list[Record], links: Mapping[tuple[str, int], str]) -> str:
    """The failed entries of one zoo, apart from the ranking: one line each with its reason ('' when none)."""
    items = []
    for i, r in enumerate(recs):
        if r.ok:
            continue
        folder = submission_folder(r)
        sub = f' <span class="muted">(submission {esc(folder)})</span>' if folder else ""
        items.append(f'<li data-name="{esc(r.name)}"><a class="entry" href="{esc(links[(zoo, i)])}">'
                     f"{esc(entry_name(r))}</a>{sub}{local_badge(r.local)}: "
                     f'<span class="reason">{esc(r.failure or "no reason recorded")}</span></li>')
    if not items:
        return ""
    return (f'<div class="failed-entries" data-zoo="{esc(zoo)}"><h3>Failed on {esc(zoo)} (not ranked)</h3>'
            f'<ul>{"".join(items)}</ul></div>')


def _verdict_key(r: Record) -> str:
    """Sort key of the fragility column: the verdict text (failed and unaudited records sort as words too)."""
    if not r.ok:
        return "~failed"
    return str(r.verdict or "not auditable") if r.audit is not None else "~not audited"


def mean_rank_table(rows: list[MeanRank], zoos: list[str], links: Mapping[tuple[str, str], str],
                    names: Mapping[str, str] | None = None) -> str:
    """The mean-rank-across-zoos table (entries named by `names`: record name -> entry), with its method in the
    caption."""
    names = names or {}
    head = "".join([th("Entry"), th("Kind"),
                    *(th(esc(z), kind="num", tip=f"rank on {z}", cls="num") for z in zoos),
                    th("Zoos", kind="num", first="descending", tip="zoos with a successful record", cls="num"),
                    th("Mean rank", kind="num", tip="mean of the per-zoo ranks", cls="num")])
    body = []
    for row in rows:
        name = names.get(row.entry, row.entry)
        cells = [f'<td data-sort="{esc(name.lower())}">{esc(name)}{local_badge(row.local)}</td>',
                 f"<td>{esc(row.kind or DASH)}</td>"]
        for z in zoos:
            rank = row.ranks.get(z)
            if rank is None:
                cells.append(f'<td class="num" data-sort="">{DASH}</td>')
            else:
                href = links.get((z, row.entry))
                txt = esc(rank_text(rank))
                inner = f'<a href="{esc(href)}">{txt}</a>' if href else txt
                cells.append(f'<td class="num" data-sort="{_sort_attr(rank)}">{inner}</td>')
        cells.append(f'<td class="num" data-sort="{row.zoos}">{row.zoos}</td>')
        cells.append(f'<td class="num" data-sort="{_sort_attr(row.mean_rank)}">{number(row.mean_rank)}</td>')
        body.append(f'<tr data-name="{esc(row.entry)}">' + "".join(cells) + "</tr>")
    caption = (f"Method: the {AGGREGATE_RULE} (the ranks of the tables above; test zoos, partial builds and zoos "
               "of one's own never enter). Compare mean ranks together with the number of zoos; baseline rows have "
               "no rank and are left out. Sorted by mean rank, then by name.")
    return (f'<div class="table-wrap"><table class="sortable-table aggregate" id="aggregate">'
            f"<caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>\n<tbody>\n"
            + "\n".join(body) + "\n</tbody></table></div>")


def ablation_table(key: str, df: pd.DataFrame, tid: str) -> str:
    """One DEMOGEN ablation table: measured scores with intervals beside the paper's values."""
    cols = ("adj_r2", "kfold_r2", "mse")  # as demogen_table gives them: MSE in units of 1e-3
    head = [th("Setting"), th("Measure")]
    for k in cols:
        lab = score_spec(k).header + (" \u00d710\u207b\u00b3" if k == "mse" else "")
        head.append(th(esc(lab), kind="num", first=_first(k), tip=f"measured {lab}, 95% interval beneath",
                       cls="num"))
        head.append(th(f"paper {esc(lab)}", kind="num", first=_first(k),
                       tip="Jiang et al. 2019, CNN on CIFAR-10", cls="num"))
    body = []
    for row in df.to_dict("records"):
        cells = [f"<td>{esc(row.get('setting', DASH))}</td>", f"<td>{esc(row.get('measure', DASH))}</td>"]
        for k in cols:
            cells.append(num_td(row.get(k), row.get(f"{k}_lo"), row.get(f"{k}_hi")))
            paper = finite(row.get(f"paper_{k}"))
            if paper is None:
                cells.append('<td class="num" data-sort=""><span class="paper-negative" '
                             'title="reported as negative in the paper">negative</span></td>')
            else:
                cells.append(num_td(paper))
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = ("Measured values with 95% bootstrap intervals beside the values the paper reports for its CNN "
               "on CIFAR-10 (Jiang et al. 2019); 'negative' where the paper reports a negative R\u00b2; MSE in "
               "units of 10\u207b\u00b3.")
    return (f"<h3>{esc(key)}</h3>\n<div class=\"table-wrap\"><table class=\"sortable-table ablation\" "
            f'id="{tid}"><caption>{esc(caption)}</caption><thead><tr>{"".join(head)}</tr></thead>\n<tbody>\n'
            + "\n".join(body) + "\n</tbody></table></div>")


# ---------------------------------------------------------------- the chart


PLOT_H, PLOT_TOP, AXIS_W, SLOT_MIN = 132, 10, 50, 26  # px: plot height, its top margin, y-axis width, mark width
REFERENCE_BASELINE = "baseline.hparams"  # the baseline row the chart draws a line for (BASELINE_NOTE names it)


def _nice_step(span: float) -> float:
    """A round tick step giving about four ticks over `span`."""
    raw = span / 4 if span > 0 else 0.1
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def chart_domain(points: list[tuple[float | None, float | None, float | None]]) -> tuple[float, float, float]:
    """The y range and tick step of the overview chart: the points (but far outliers: beyond three interquartile
    ranges of the quartiles), and the intervals as far as half the points' spread beyond them; what lies outside is
    drawn at the edge and marked. Widened to whole ticks."""
    vals = sorted(v for v, _, _ in points if v is not None)
    q1, q3 = vals[(len(vals) - 1) // 4], vals[(3 * (len(vals) - 1) + 3) // 4]
    iqr = max(q3 - q1, 0.05 * max(abs(q1), abs(q3)), 1e-12)
    inner = [v for v in vals if q1 - 3 * iqr <= v <= q3 + 3 * iqr] or vals
    pad = max(0.5 * (inner[-1] - inner[0]), 0.25 * max(abs(inner[0]), abs(inner[-1]))) or 0.1
    lo = max(min([inner[0], *(e for _, e, _ in points if e is not None)]), inner[0] - pad)
    hi = min(max([inner[-1], *(e for _, _, e in points if e is not None)]), inner[-1] + pad)
    step = _nice_step(hi - lo)
    lo, hi = math.floor(lo / step + 1e-6) * step, math.ceil(hi / step - 1e-6) * step
    return lo, (hi if hi > lo else lo + step), step


def _tick(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / 10 ** math.floor(
        math.log10(step)), 3) == 2.5 else 0)
    return f"{v:.{decimals}f}".replace("-", "\u2212")


def overview_chart(zoo: str, rows: list[Record], hrefs: list[str], tid: str, sort: str = DEFAULT_SORT) -> str:
    """The index's picture of one zoo's ranking: the ranking score of every row of its table with its 95% interval
    (an inline SVG, no script needed to draw it), in the table's order (site.js re-orders it when the table is
    sorted or filtered), the rank groups as shaded bands, the baselines as diamonds with a dashed line at
    REFERENCE_BASELINE's value; each mark links to the entry's page, its title gives the numbers. '' when no row
    has the score."""
    spec = score_spec(sort)
    points = [(r.score(sort), *r.interval(sort)) for r in rows]
    if not any(v is not None for v, _, _ in points):
        return ""
    lo, hi, step = chart_domain(points)
    bottom = PLOT_TOP + PLOT_H

    def y(v: float) -> float:
        return round(PLOT_TOP + (hi - min(max(v, lo), hi)) / (hi - lo) * PLOT_H, 1)

    n = len(rows)
    ticks = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]
    height = bottom + 30
    axis = "".join(f'<text x="{AXIS_W - 6}" y="{y(t) + 4}" text-anchor="end">{_tick(t, step)}</text>' for t in ticks)
    grid = "".join(f'<line class="{"zero" if abs(t) < step / 1e6 else "grid"}" x1="0" x2="100%" y1="{y(t)}" '
                   f'y2="{y(t)}"/>' for t in ticks)
    ref = next((r for r in rows if r.baseline and r.name == REFERENCE_BASELINE and r.score(sort) is not None), None)
    if ref is not None:
        grid += (f'<line class="reference" x1="0" x2="100%" y1="{y(ref.score(sort))}" y2="{y(ref.score(sort))}">'
                 f"<title>{esc(ref.name)}: {esc(spec.label)} {esc(page_number(ref.score(sort)))} (a measure below "
                 "this line adds nothing the training recipe did not say)</title></line>")
    marks, prev = [], None
    for i, (r, href, (v, elo, ehi)) in enumerate(zip(rows, hrefs, points)):
        group = "" if r.rank_group is None else rank_text(r.rank_group)
        label = "base" if r.baseline else rank_text(r.rank, DASH)
        cls = ["mark", "baseline" if r.baseline else "measure"]
        cls += [] if r.rank_group is None else ["g-even" if int(r.rank_group) % 2 == 0 else "g-odd"]
        cls += ["first"] if i == 0 else ["run-start"] if group != prev else []
        cls += [] if r.zoo_complete else ["partial"]
        prev = group
        ci = interval(elo, ehi, digits=DIGITS, compact=True)
        tip = (f"{'baseline' if r.baseline else 'rank ' + label} \u00b7 {entry_name(r)}: {spec.label} "
               f"{page_number(v)}{' ' + ci if ci else ''}{f', rank group {group}' if group else ''}"
               f"{'' if r.zoo_complete else ' (' + partial_note(r) + ')'}"
               f"{' (refused: ' + str(r.refusal(sort)) + ')' if r.refusal(sort) else ''}")
        draw = ""
        if elo is not None and ehi is not None:
            draw += f'<line class="ci" x1="0" x2="0" y1="{y(ehi)}" y2="{y(elo)}"/>'
            draw += "".join(f'<path class="clipped" d="M-4,{y(e) + 6 * s} L4,{y(e) + 6 * s} L0,{y(e)} Z"/>'
                            for e, s in ((elo, -1), (ehi, 1)) if (e < lo if s < 0 else e > hi)
                            and (v is None or lo <= v <= hi))
        if v is not None and not lo <= v <= hi:  # off the chart: a triangle at its edge, pointing the way
            edge, way = (bottom, 1) if v < lo else (PLOT_TOP, -1)
            draw += f'<path class="pt off" d="M-6,{edge - 9 * way} L6,{edge - 9 * way} L0,{edge} Z"/>'
        elif v is not None:
            cy = y(v)
            draw += (f'<path class="pt" d="M0,{cy - 6} L6,{cy} L0,{cy + 6} L-6,{cy} Z"/>' if r.baseline else
                     f'<circle class="pt" cx="0" cy="{cy}" r="4"/>')
        else:
            draw += f'<text class="none" x="0" y="{bottom - 6}" text-anchor="middle">{DASH}</text>'
        marks.append(
            f'<svg class="{" ".join(cls)}" x="{100 * i / n:.4f}%" width="{100 / n:.4f}%" height="{height}" '
            f'overflow="visible" data-name="{esc(r.name)}" data-group="{esc(group)}">'
            f'<rect class="band" x="0" y="{PLOT_TOP}" width="100%" height="{PLOT_H}"/>'
            f'<line class="gsep" x1="0" x2="0" y1="{PLOT_TOP - 4}" y2="{bottom + 26}"/>'
            f'<a href="{esc(href)}"><title>{esc(tip)}</title>'
            f'<rect class="hit" x="0" y="{PLOT_TOP}" width="100%" height="{PLOT_H + 16}"/>'
            f'<svg x="50%" overflow="visible">{draw}</svg></a>'
            f'<text class="rank" x="50%" y="{bottom + 13}" text-anchor="middle">{esc(label)}</text>'
            f'<text class="glabel" x="50%" y="{bottom + 26}" text-anchor="middle">{"g" + esc(group) if group else ""}'
            "</text></svg>")
    what = f"{spec.label}{' (lower is better)' if spec.lower_is_better else ''}"
    caption = (f"{what} with 95% intervals, in the table's order (sort or filter the table: the chart follows). "
               "Bands: rank groups; \u25c6 baseline rows" + (f"; dashed: {REFERENCE_BASELINE}" if ref is not None
                                                             else "")
               + "; \u25b2 an interval (or, larger, a value) off the chart. Hover a mark for its numbers.")
    return (f'<figure class="overview" id="overview-{tid}" data-table="{tid}"><div class="overview-plot">'
            f'<svg class="overview-axis" width="{AXIS_W}" height="{height}" aria-hidden="true">{axis}'
            f'<text class="axis-label" x="2" y="{bottom + 13}">{esc(spec.header)}</text></svg>'
            f'<div class="overview-scroll"><svg class="overview-marks" width="100%" height="{height}" '
            f'style="min-width: {n * SLOT_MIN}px" role="img" aria-label="{esc(what)} of the {n} entries of '
            f'{esc(zoo)} with 95% intervals">{grid}{"".join(marks)}</svg></div></div>'
            f"<figcaption>{esc(caption)}</figcaption></figure>\n")


def chart_svg(gap: list[float], pred: list[float]) -> str:
    """Inline SVG scatter of held-out prediction against true gap with the y = x line (matplotlib, no pyplot)."""
    import matplotlib
    from matplotlib.figure import Figure

    lo, hi = min(min(gap), min(pred)), max(max(gap), max(pred))
    pad = (hi - lo) * 0.05 or max(abs(hi), 1.0) * 0.05
    lo, hi = lo - pad, hi + pad
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "genbench", "font.size": 9}):
        fig = Figure(figsize=(4.8, 4.6))
        fig.subplots_adjust(left=0.16, bottom=0.12, right=0.97, top=0.97)  # fixed: tight_layout costs a draw
        ax = fig.add_subplot()
        ax.plot([lo, hi], [lo, hi], color="#7a8591", lw=1, ls="--", label="y = x", gid="identity")
        pts = ax.scatter(gap, pred, s=16, alpha=0.75, color="#1f5fbf", edgecolors="none",
                         label=f"{len(gap)} models")
        pts.set_gid("points")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel("true generalization gap")
        ax.set_ylabel("predicted gap (k-fold held-out)")
        ax.grid(True, color="#e3e7eb", lw=0.6)
        ax.legend(loc="upper left", frameon=False)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    return svg.replace("<svg ", '<svg role="img" aria-label="predicted against true generalization gap" ', 1)


# ---------------------------------------------------------------- the entry page


def dl(items: Iterable[tuple[str, Any]]) -> str:
    """A definition list of (label, value) with escaped values (missing as an en dash)."""
    rows = [f"<dt>{esc(k)}</dt><dd>{esc(DASH if v is None or v == '' else v)}</dd>" for k, v in items]
    return '<dl class="meta">' + "".join(rows) + "</dl>"


def safe_url(url: Any) -> str | None:
    """The URL when it is http(s), else None (no javascript: links from records)."""
    u = str(url or "").strip()
    return u if re.match(r"https?://", u, re.I) else None


def entry_page(rec: Record, zoo: str, index_href: str, names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The page of one entry on one zoo (named by its measure, its submission folder beside it)."""
    name = entry_name(rec)
    folder = submission_folder(rec)
    zinfo = rec.zoo or {"name": zoo}
    sub = f" \u00b7 submission {esc(folder)}" if folder else ""
    parts = [f'<header class="page"><p><a href="{esc(index_href)}">\u2190 leaderboard</a></p>'
             f'<h1 id="entry-name">{esc(name)}</h1>'
             f'<p class="sub">{esc(zoo)} \u00b7 {esc(rec.kind or DASH)}{sub} \u00b7 '
             f'<span class="citation">{esc(rec.citation or DASH)}</span> \u00b7 '
             f"{badge(rec)}{baseline_badge(rec)}{local_badge(rec.local)}</p>"
             f"{aliases_html(rec, names)}</header>"]
    if rec.baseline:
        parts.append('<section class="baseline" id="baseline"><h2>Baseline</h2>'
                     f"<p>{esc(rec.citation or rec.name)}.</p><p>{esc(BASELINE_NOTE[0].upper() + BASELINE_NOTE[1:])}."
                     "</p></section>")
    if not rec.zoo_complete:
        note = partial_note(rec)
        parts.append('<section class="partial" id="partial"><h2>Scored on a partial zoo</h2>'
                     f"<p>{esc(note[0].upper() + note[1:])}: the zoo lacked some of the models its recipe makes when "
                     "this record was made, so its scores describe the models it held only and are not comparable "
                     "with records made on the complete zoo.</p></section>")
    if not rec.ok:
        parts.append('<section class="failure" id="failure"><h2>Evaluation failed</h2>'
                     f'<p>{esc(rec.failure or "no reason recorded")}</p>'
                     "<p>No scores or chart are shown for a failed record.</p></section>")
    sub = rec.submission
    if sub is not None:
        url = safe_url(sub.get("paper_url"))
        items = [("title", sub.get("title")), ("authors", ", ".join(map(str, sub.get("authors") or [])) or None),
                 ("contact", sub.get("contact")), ("licence", sub.get("licence")), ("entry measure",
                                                                                    sub.get("entry"))]
        extra = {k: v for k, v in sub.items() if k not in {"title", "authors", "contact", "licence", "entry",
                                                            "paper_url"}}
        items += [(k, v) for k, v in extra.items()]
        paper = (f'<p>Paper: <a href="{esc(url)}" rel="noopener noreferrer">{esc(url)}</a></p>' if url else
                 f"<p>Paper: {esc(sub.get('paper_url') or DASH)}</p>")
        parts.append(f'<section id="submission"><h2>Submission</h2>'
                     f'<p class="submission-title">{esc(sub.get("title") or DASH)}</p>{dl(items)}{paper}</section>')
    parts.append('<section id="record"><h2>Record</h2>' + dl([
        ("measure", rec.measure), ("submission folder", f"submissions/{folder}" if folder else None),
        ("record", f"{rec.zoo_name}/{rec.name}.json"), ("kind", rec.kind), ("citation", rec.citation),
        ("built-in", {True: "yes", False: "no"}.get(rec.builtin, rec.builtin)),  # type: ignore[arg-type]
        ("baseline", "yes" if rec.baseline else "no"),
        ("also (equivalent entries)", ", ".join(alias_names(rec, names or {}))),
        ("status", rec.status), ("rank", "none (a baseline row)" if rec.baseline else rank_text(rec.rank, DASH)),
        ("rank group", rank_text(rec.rank_group, DASH)), ("schema", rec.schema),
    ]) + "</section>")
    if rec.ok and rec.scores:
        parts.append(scores_section(rec))
        gap, pred = rec.predicted_gaps()
        if len(gap) >= 2:
            parts.append('<section id="chart-section"><h2>Predicted against true gap</h2>'
                         f'<figure class="chart" id="chart">{chart_svg(gap, pred)}<figcaption>'
                         f"{esc(name)} on {esc(zoo)}: each point is one model, its k-fold held-out prediction "
                         f"of the gap against the true gap ({len(gap)} models, k-fold R\u00b2 = "
                         f"{esc(page_number(rec.score('kfold_r2')))}); the dashed line is y = x.</figcaption>"
                         "</figure></section>")
        else:
            parts.append('<section id="chart-section"><h2>Predicted against true gap</h2><p class="muted">'
                         "This record holds no k-fold held-out predictions, so there is nothing to plot.</p>"
                         "</section>")
    parts.append(audit_section(rec))
    if rec.notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{esc(n)}</li>" for n in rec.notes)
                     + "</ul></section>")
    prov = rec.provenance
    parts.append('<section id="reproduce"><h2>Reproduce</h2>' + (
        f'<pre class="command" id="command"><code>{esc(rec.command)}</code></pre>' if rec.command else
        '<p class="muted">The record does not state its command.</p>') + "</section>")
    keys = [k for k in PROVENANCE_ORDER if k in prov] + sorted(k for k in prov if k not in PROVENANCE_ORDER)
    zoo_items = [(f"zoo {k}", zinfo.get(k)) for k in ("name", "version", "revision", "table_sha256")]
    zoo_items += [(f"zoo {k}", v) for k, v in zinfo.items() if k not in {"name", "version", "revision",
                                                                         "table_sha256"}]
    parts.append('<section id="provenance"><h2>Provenance</h2>'
                 + dl([(k, prov.get(k)) for k in keys] + zoo_items) + "</section>")
    return page(f"{name} on {zoo}", "\n".join(parts), "../../")


def scores_section(rec: Record) -> str:
    """The table of every score with its interval (or its refusal), the fit's settings, the refused scores with
    their reasons, how CMI is signed, and the spread of the repeated k-fold scores over the shuffles."""
    rows = []
    for k in rec.score_keys():
        reason = rec.refusal(k)
        iv = interval(*rec.interval(k), digits=DIGITS, compact=True)
        value = refused_td(reason) if reason else num_td(rec.score(k))
        rows.append(f'<tr data-score="{esc(k)}"><td>{esc(score_label(k))}</td>{value}'
                    f'<td class="num">{esc(iv or DASH)}</td></tr>')
    fit = rec.fit
    meta = dl([("models scored", fit.n), ("models dropped", fit.dropped),
               ("unconverged models scored", rec.unconverged), ("target", fit.target),
               ("transform (declared)", fit.transform), ("transform used", transform_text(rec)),
               ("cross-validation", kfold_text(rec)), ("bootstrap", bootstrap_text(rec)),
               ("intercept", page_number(fit.intercept)),
               ("coefficients", ", ".join(page_number(c) for c in fit.coef or []) or None)])
    return ('<section id="scores"><h2>Scores</h2>' + meta +
            '<div class="table-wrap"><table class="sortable-table scores" id="scores-table"><thead><tr>'
            + th("Score") + th("Value", kind="num", cls="num") + '<th class="num" data-nosort>95% interval</th>'
            + f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            + '<p class="muted">An interval is shown only where the resamples give a real one (none for a '
            "degenerate bootstrap distribution or a refused score).</p>"
            + cmi_note(rec) + refused_list(rec) + spread_table(rec) + "</section>")


def transform_text(rec: Record) -> str | None:
    """The phi used: on all models, and how many training folds chose each."""
    used = rec.transform_used
    folds = used.get("folds")
    parts = [f"all models: {used['all']}"] if used.get("all") else []
    if isinstance(folds, Mapping) and folds:
        parts.append("training folds: " + ", ".join(f"{k} {v}" for k, v in folds.items()))
    return "; ".join(parts) or None


def kfold_text(rec: Record) -> str | None:
    """The repeated k-fold cross-validation behind k-fold R\u00b2 and MSE."""
    kf = rec.kfold
    if not kf:
        return None
    seeds = kf.get("seeds") or []
    shuffles = f", shuffle seeds {seeds[0]}..{seeds[-1]}" if seeds else ""
    repeats = kf.get("repeats", len(seeds) or "?")
    return f"{kf.get('k', '?')}-fold, {repeats} shuffles{shuffles}; pooled held-out R\u00b2"


def bootstrap_text(rec: Record) -> str | None:
    """The paired bootstrap's settings."""
    bs = rec.bootstrap
    if not bs:
        return None
    return (f"{bs.get('n_boot', '?')} resamples of models, seed {bs.get('seed', '?')}, the same for every entry on "
            "this zoo (paired)")


def cmi_note(rec: Record) -> str:
    """How the record's CMI is signed ('' when it has none)."""
    if rec.score("cmi") is None and not rec.refusal("cmi"):
        return ""
    unsigned = next((n for n in rec.notes if "unsigned" in str(n).lower() and "cmi" in str(n).lower()), None)
    if unsigned:
        text = f"{unsigned}: it says how strongly, not which way, the measure goes with the gap."
    else:
        claim = {"smaller_gap": "a higher value means a smaller gap"}.get(str(rec.higher_means),
                                                                        "a higher value means a larger gap")
        text = (f"CMI is signed by the measure's declared direction ({claim}): negative when the association runs "
                "against what the measure claims (CMI itself is blind to the sign).")
    return f'<p class="cmi-sign" id="cmi-sign">{esc(text)}</p>'


def refused_list(rec: Record) -> str:
    """The refused scores, each with why ('' when none)."""
    if not rec.refused:
        return ""
    items = "".join(f'<li data-score="{esc(k)}"><strong>{esc(score_label(k))}</strong>: {esc(why or "refused")}</li>'
                    for k, why in rec.refused.items())
    return f'<div id="refused"><h3>Refused scores (not reported)</h3><ul>{items}</ul></div>'


def spread_table(rec: Record) -> str:
    """The repeated k-fold scores of each shuffle, and their range ('' when the record holds none)."""
    spread = rec.spread
    r2, mse = list(spread.get("kfold_r2") or []), list(spread.get("mse") or [])
    n = max(len(r2), len(mse))
    if not n:
        return ""
    seeds = list(rec.kfold.get("seeds") or range(n))
    rows = "".join(f"<tr><td>{esc(seeds[i] if i < len(seeds) else i)}</td>"
                   f"{num_td(r2[i] if i < len(r2) else None)}{num_td(mse[i] if i < len(mse) else None)}</tr>"
                   for i in range(n))
    finite_r2 = [v for v in map(finite, r2) if v is not None]
    summary = (f"k-fold R\u00b2 from {page_number(min(finite_r2))} to {page_number(max(finite_r2))} over {n} "
               f"shuffles (the score is their mean, {page_number(rec.score('kfold_r2'))})" if finite_r2 else "")
    return ('<div id="spread"><h3>Spread over the shuffles of the k-fold split</h3>'
            f'<p class="muted">{esc(summary)}</p><div class="table-wrap"><table class="sortable-table spread" '
            'id="spread-table"><thead><tr>' + th("Shuffle seed", kind="num") + th("k-fold R\u00b2", kind="num",
                                                                                 cls="num")
            + th("MSE", kind="num", cls="num") + f"</tr></thead><tbody>{rows}</tbody></table></div></div>")


def audit_section(rec: Record) -> str:
    """The fragility audit: verdict, every check with statistic, value and threshold, the parts that could not run
    (and why), and its notes."""
    if rec.audit is None:
        return '<section id="audit"><h2>Fragility audit</h2><p class="muted">Not audited.</p></section>'
    rows = []
    for c in rec.checks:
        state = {True: "failed", False: "passed"}.get(c.failed, "n/a")  # type: ignore[arg-type]
        rows.append(f'<tr class="check-{state.replace("/", "")}"><td>{esc(c.part)}</td>'
                    f"<td>{esc(c.label)}</td><td>{esc(c.statistic)}</td>{num_td(c.value)}"
                    f"<td>{esc(c.threshold)}</td><td>{esc(state)}</td><td>{esc(c.detail)}</td></tr>")
    head = (th("Part") + th("Label") + th("Statistic") + th("Value", kind="num", cls="num")
            + th("Fails when") + th("Result") + th("Detail"))
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.audit_notes)
    missing = "".join(f'<li data-part="{esc(part)}"><strong>{esc(part)}</strong>: {esc(why or DASH)}</li>'
                      for part, why in rec.audit_missing)
    return ('<section id="audit"><h2>Fragility audit</h2>'
            f"<p>Verdict on {esc(rec.audit_zoo or DASH)}: {badge(rec)}</p>"
            + (f'<div id="audit-missing"><p>Parts that could not run (so the verdict cannot be robust):</p>'
               f"<ul>{missing}</ul></div>" if missing else "")
            + f'<div class="table-wrap"><table class="sortable-table checks" id="checks"><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            + (f"<ul>{notes}</ul>" if notes else "") + learning_curves_html(rec) + "</section>")


def learning_curves_html(rec: Record) -> str:
    """The audit's learning curves (the measure and the test error against train size, per arm, seed means with
    one-standard-error bars) as an inline SVG, from the seed means in the record's audit block; a line saying
    why there is none when the record holds no means (made before they were recorded) or no train-size axis."""
    from .curves import curve_svg, has_curves, means_frame
    audit = rec.audit or {}
    means = means_frame(audit)
    if not has_curves(means):
        why = ("this record's audit holds no seed means per train size (it was made before they were recorded; "
               "re-running the entry adds them)" if means.empty else
               "the audit zoo has no train-size axis, so there is no learning curve")
        return f'<p class="muted" id="learning-curves-none">No learning curves: {esc(why)}.</p>'
    measure = str(audit.get("measure") or rec.measure or "measure")
    arms = means["arm"].astype(str).unique()
    return ('<figure class="chart curves" id="learning-curves">'
            f'{curve_svg(means, measure=measure, form=audit.get("form"))}<figcaption>Learning curves on '
            f"{esc(rec.audit_zoo or DASH)}: {esc(measure)} (top) and the test error (bottom) against train size, "
            f"one series per arm ({esc(', '.join(sorted(arms, key=lambda a: (a != 'base', a))))}), seed means with "
            "bars of one seed standard error; one column per value of the other grid axes.</figcaption></figure>")


# ---------------------------------------------------------------- the site


def index_page(zoos: Mapping[str, list[Record]], links: Mapping[tuple[str, int], str],
               ablation: Mapping[str, pd.DataFrame] | None, title: str, sort: str = DEFAULT_SORT,
               names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The front page: per zoo, the overview chart and the ranked table; then what a baseline row is (once), the
    aggregate and the ablation tables. `names`: (zoo, record name) -> entry, for the aliases."""
    names = {**entry_names(r for recs in zoos.values() for r in recs), **(names or {})}
    ids = {z: f"zoo-{slug(z)}" for z in zoos}
    nav = [f'<a href="#{ids[z]}">{esc(z)}</a>' for z in zoos]
    rows = mean_ranks([r for recs in zoos.values() for r in recs])  # complete official zoos only
    aggregated = [z for z in zoos if any(z in row.ranks for row in rows)]
    shown = any(row.zoos > 1 for row in rows)  # an entry ranked on two official zoos: as in the terminal
    if shown:
        nav.append('<a href="#aggregate-section">across zoos</a>')
    if ablation:
        nav.append('<a href="#ablation">DEMOGEN ablations</a>')
    n = sum(len(v) for v in zoos.values())
    n_local = sum(r.local for v in zoos.values() for r in v)
    local = f" ({n_local} of them local: your own, not verified)" if n_local else ""
    parts = [f'<header class="page"><h1>{esc(title)}</h1><p class="sub">{n} records on {len(zoos)} '
             f'zoo{"s" if len(zoos) != 1 else ""}{local}. Hover a badge or a chart mark for its details; follow an '
             'entry for its chart, provenance and the command that reproduces it.</p>'
             f'<nav class="zoos" aria-label="zoos">{"".join(nav)}</nav></header>']
    if not zoos:
        parts.append('<p class="muted">No records.</p>')
    for z, recs in zoos.items():
        parts.append(f'<section class="zoo" id="{ids[z]}"><h2>{esc(z)}</h2>'
                     + zoo_table(z, recs, links, f"table-{slug(z)}", sort, names) + "</section>")
    if any(r.baseline for recs in zoos.values() for r in recs):
        parts.append(f'<p class="baseline-note" id="baseline-note"><span class="badge badge-baseline">baseline</span> '
                     f"{esc(BASELINE_NOTE[0].upper() + BASELINE_NOTE[1:])}.</p>")
    if shown:
        by_name = {(z, r.name): links[(z, i)] for z, recs in zoos.items() for i, r in enumerate(recs) if r.ok}
        parts.append('<section id="aggregate-section"><h2>Across the official zoos</h2>'
                     + mean_rank_table(rows, aggregated, by_name, {k[1]: v for k, v in names.items()}) + "</section>")
    if ablation:
        tables = [ablation_table(k, df, f"ablation-{slug(k)}") for k, df in ablation.items()]
        parts.append('<section id="ablation"><h2>DEMOGEN ablations</h2>' + "\n".join(tables) + "</section>")
    return page(title, "\n".join(parts), "")


def _replace_dir(tmp: Path, out: Path) -> None:
    """Move the built site `tmp` to `out`, replacing an earlier site there."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.replace(out, old / "site")
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / "site", out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_site(records: Iterable[Mapping[str, Any]], out: str | Path, *, sort: str = DEFAULT_SORT,
               ablation: Mapping[str, pd.DataFrame] | None = None, title: str = "genbench leaderboard") -> Path:
    """Write the static leaderboard site of `records`, ranked by `sort`, into `out` (built beside it, then
    swapped in); return index.html."""
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise FileExistsError(f"{out} exists and is not a genbench site (no {MARKER} file); refusing to replace "
                              "it: choose an empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    records = list(records)
    names = entry_names(records)
    zoos = by_zoo(rank_records(records, sort))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        (tmp / "assets").mkdir()
        for name in ASSET_FILES:
            shutil.copyfile(ASSETS / name, tmp / "assets" / name)
        links: dict[tuple[str, int], str] = {}
        for z, recs in zoos.items():
            zdir = tmp / "entries" / slug(z)
            zdir.mkdir(parents=True)
            used: set[str] = set()
            for i, rec in enumerate(recs):
                base = slug(rec.name)
                fname, k = base, 1
                while fname.lower() in used:
                    k += 1
                    fname = f"{base}-{k}"
                used.add(fname.lower())
                links[(z, i)] = f"entries/{slug(z)}/{fname}.html"
                text = entry_page(rec, z, f"../../index.html#zoo-{slug(z)}", names)
                (zdir / f"{fname}.html").write_text(text, encoding="utf-8")
        (tmp / "index.html").write_text(index_page(zoos, links, ablation, title, sort, names), encoding="utf-8")
        (tmp / MARKER).write_text("This directory is generated by genbench.leaderboard.site.write_site.\n")
        os.chmod(tmp, 0o755)
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
