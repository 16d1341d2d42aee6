"""The static leaderboard site: ranked tables per zoo, entry pages with chart and provenance; works from file://.
It renders only: the order is ranking.py's, the record is read through schema.py, the numbers through format.py."""
from __future__ import annotations

import hashlib
import html
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring.spec import DEFAULT_SORT
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


def th(label: str, *, kind: str = "text", first: str = "ascending", tip: str = "", cls: str = "") -> str:
    """A sortable header cell."""
    attrs = f' data-type="{kind}" data-first="{first}" aria-sort="none"'
    if tip:
        attrs += f' title="{esc(tip)}"'
    if cls:
        attrs += f' class="{cls}"'
    return f'<th scope="col"{attrs}>{label}</th>'


def num_td(v: Any, lo: Any = None, hi: Any = None) -> str:
    """A numeric cell with its sort key, and its interval beneath when given."""
    ci = interval(lo, hi, digits=DIGITS, compact=True)
    ci_html = f'<span class="ci">{esc(ci)}</span>' if ci else ""
    return f'<td class="num" data-sort="{_sort_attr(finite(v))}">{esc(page_number(v))}{ci_html}</td>'


def refused_td(reason: str) -> str:
    """The cell of a refused score: a mark, never a number, with the reason in its title (sorted last)."""
    return (f'<td class="num" data-sort=""><span class="refused" tabindex="0" title="{esc("Refused: " + reason)}">'
            f"{REFUSED} refused</span></td>")


def score_td(rec: Record, key: str, with_interval: bool = True) -> str:
    """A record's score as a cell: the value with its interval (only a real one), or the refusal mark."""
    reason = rec.refusal(key)
    if reason:
        return refused_td(reason)
    return num_td(rec.score(key), *(rec.interval(key) if with_interval else ()))


def rank_td(v: Any) -> str:
    """A numeric cell showing a rank (an integer when it is one)."""
    return f'<td class="num" data-sort="{_sort_attr(finite(v))}">{esc(rank_text(v, DASH))}</td>'


def aliases_html(rec: Record) -> str:
    """The entries an entry stands for ('' when none)."""
    if not rec.aliases:
        return ""
    tip = "the same held-out predictions and scores on this zoo: shown once"
    return f'<span class="aliases" title="{esc(tip)}">also: {esc(", ".join(rec.aliases))}</span>'


def entry_td(r: Record, href: str) -> str:
    """The entry cell of a zoo table: name (linked), its marks, its submission's title and its aliases."""
    sub_title = str(r.submission.get("title") or "") if r.submission else ""
    sub_html = f'<span class="subtitle">{esc(sub_title)}</span>' if sub_title else ""
    return (f'<td data-sort="{esc(r.name.lower())}"><a class="entry" href="{esc(href)}">{esc(r.name)}</a>'
            f"{baseline_badge(r)}{local_badge(r.local)}{partial_badge(r)}{sub_html}{aliases_html(r)}</td>")


def zoo_row(r: Record, keys: list[str], href: str) -> str:
    """One ranked (or partial) record as a row of its zoo's table."""
    sub_title = str(r.submission.get("title") or "") if r.submission else ""
    search = " ".join([r.name, *r.aliases, str(r.kind or ""), str(r.citation or ""), sub_title,
                       "local" if r.local else "", "baseline" if r.baseline else ""]).lower()
    cls = ["partial"] if not r.zoo_complete else []
    if r.rank_group is not None:
        cls.append("group-even" if int(r.rank_group) % 2 == 0 else "group-odd")
    cls += ["local"] if r.local else []
    cls += ["baseline"] if r.baseline else []
    cells = [rank_td(r.rank), rank_td(r.rank_group), entry_td(r, href), f"<td>{esc(r.kind or DASH)}</td>"]
    cells += [score_td(r, key, key in WITH_INTERVAL) for key in keys]
    cells.append(f'<td data-sort="{esc(_verdict_key(r))}">{badge(r)}</td>')
    cells.append(f"<td>{esc(r.citation or DASH)}</td>")
    return (f'<tr class="{" ".join(cls)}" data-name="{esc(r.name)}" data-search="{esc(search)}">' + "".join(cells)
            + "</tr>")


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
            "Intervals are 95% bootstrap intervals over models, shown only where one exists. Click a header to sort, "
            "again to reverse; missing values (\u2013) and refused ones sort last.")


def hidden_note(hidden: Mapping[str, str]) -> str:
    """Why the zoo's table lacks some score columns ('' when it shows them all)."""
    if not hidden:
        return ""
    items = "".join(f'<li data-score="{esc(k)}"><strong>{esc(score_label(k))}</strong>: no entry has a value on this '
                    f"zoo{'; ' + esc(why) if why else ''}</li>" for k, why in hidden.items())
    return f'<div class="hidden-columns"><p>Columns not shown on this zoo:</p><ul>{items}</ul></div>'


def zoo_table(zoo: str, recs: list[Record], links: Mapping[tuple[str, int], str], tid: str,
              sort: str = DEFAULT_SORT) -> str:
    """The ranked, sortable, filterable table of one zoo, without the score columns no entry has a value for."""
    hidden = empty_scores((r for r in recs if r.zoo_complete), SHOWN)
    keys = [k for k in SHOWN if k not in hidden]
    head = "".join([
        th("Rank", kind="num", tip=f"rank on this zoo by {score_label(sort)} (baselines get none)", cls="num"),
        th("Group", kind="num", tip=page_rule(sort), cls="num"),
        th("Entry"), th("Kind"),
        *(th(esc(score_spec(k).header), kind="num", first=_first(k), tip=score_spec(k).help, cls="num")
          for k in keys),
        th("Fragility", tip="verdict of the fragility audit; hover a badge for its checks"),
        th("Citation"),
    ])
    rows = [zoo_row(r, keys, links[(zoo, i)]) for i, r in enumerate(recs) if r.ok]  # failed ones: failed_list
    return (
        f'<div class="filter-bar"><input type="search" class="row-filter" id="{tid}-filter" '
        f'data-table="{tid}" data-count="{tid}-count" placeholder="filter by name, kind or citation" '
        f'aria-label="filter the entries of {esc(zoo)}"><span class="muted" id="{tid}-count"></span></div>\n'
        f'<div class="table-wrap"><table class="sortable-table leaderboard" id="{tid}" data-zoo="{esc(zoo)}">'
        f"<caption>{esc(zoo_caption(recs, sort))}</caption><thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(rows) + "\n</tbody></table></div>" + hidden_note(hidden) + failed_list(zoo, recs, links)
    )


def failed_list(zoo: str, recs: list[Record], links: Mapping[tuple[str, int], str]) -> str:
    """The failed entries of one zoo, apart from the ranking: one line each with its reason ('' when none)."""
    items = [f'<li data-name="{esc(r.name)}"><a class="entry" href="{esc(links[(zoo, i)])}">{esc(r.name)}</a>'
             f'{local_badge(r.local)}: <span class="reason">{esc(r.failure or "no reason recorded")}</span></li>'
             for i, r in enumerate(recs) if not r.ok]
    if not items:
        return ""
    return (f'<div class="failed-entries" data-zoo="{esc(zoo)}"><h3>Failed on {esc(zoo)} (not ranked)</h3>'
            f'<ul>{"".join(items)}</ul></div>')


def _verdict_key(r: Record) -> str:
    """Sort key of the fragility column: the verdict text (failed and unaudited records sort as words too)."""
    if not r.ok:
        return "~failed"
    return str(r.verdict or "not auditable") if r.audit is not None else "~not audited"


def mean_rank_table(rows: list[MeanRank], zoos: list[str], links: Mapping[tuple[str, str], str]) -> str:
    """The mean-rank-across-zoos table, with its method in the caption."""
    head = "".join([th("Entry"), th("Kind"),
                    *(th(esc(z), kind="num", tip=f"rank on {z}", cls="num") for z in zoos),
                    th("Zoos", kind="num", first="descending", tip="zoos with a successful record", cls="num"),
                    th("Mean rank", kind="num", tip="mean of the per-zoo ranks", cls="num")])
    body = []
    for row in rows:
        cells = [f'<td data-sort="{esc(row.entry.lower())}">{esc(row.entry)}{local_badge(row.local)}</td>',
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
    caption = ("Method: for each entry, the arithmetic mean of its per-zoo ranks (the ranks of the tables "
               "above) over the zoos where it has a successful record; failed and missing entries are left out "
               "of a zoo rather than penalised, so compare mean ranks together with the number of zoos; baseline "
               "rows have no rank and are left out. Sorted by mean rank, then by name.")
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


def entry_page(rec: Record, zoo: str, index_href: str) -> str:
    """The page of one entry on one zoo."""
    name = rec.name
    zinfo = rec.zoo or {"name": zoo}
    parts = [f'<header class="page"><p><a href="{esc(index_href)}">\u2190 leaderboard</a></p>'
             f'<h1 id="entry-name">{esc(name)}</h1>'
             f'<p class="sub">{esc(zoo)} \u00b7 {esc(rec.kind or DASH)} \u00b7 '
             f'{esc(rec.citation or DASH)} \u00b7 {badge(rec)}{baseline_badge(rec)}{local_badge(rec.local)}</p>'
             f"{aliases_html(rec)}</header>"]
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
        ("measure", rec.measure), ("kind", rec.kind), ("citation", rec.citation),
        ("built-in", {True: "yes", False: "no"}.get(rec.builtin, rec.builtin)),  # type: ignore[arg-type]
        ("baseline", "yes" if rec.baseline else "no"), ("also (equivalent entries)", ", ".join(rec.aliases)),
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
            + (f"<ul>{notes}</ul>" if notes else "") + "</section>")


# ---------------------------------------------------------------- the site


def index_page(zoos: Mapping[str, list[Record]], links: Mapping[tuple[str, int], str],
               ablation: Mapping[str, pd.DataFrame] | None, title: str, sort: str = DEFAULT_SORT) -> str:
    """The front page: one ranked table per zoo (with what a baseline row is, once), the aggregate and the
    ablation tables."""
    ids = {z: f"zoo-{slug(z)}" for z in zoos}
    nav = [f'<a href="#{ids[z]}">{esc(z)}</a>' for z in zoos]
    if len(zoos) > 1:
        nav.append('<a href="#aggregate-section">across zoos</a>')
    if ablation:
        nav.append('<a href="#ablation">DEMOGEN ablations</a>')
    n = sum(len(v) for v in zoos.values())
    n_local = sum(r.local for v in zoos.values() for r in v)
    local = f" ({n_local} of them local: your own, not verified)" if n_local else ""
    parts = [f'<header class="page"><h1>{esc(title)}</h1><p class="sub">{n} records on {len(zoos)} '
             f'zoo{"s" if len(zoos) != 1 else ""}{local}. Hover a fragility badge to see its checks; follow an entry '
             'for its chart, provenance and the command that reproduces it.</p>'
             f'<nav class="zoos" aria-label="zoos">{"".join(nav)}</nav></header>']
    if any(r.baseline for recs in zoos.values() for r in recs):
        parts.append(f'<p class="baseline-note" id="baseline-note"><span class="badge badge-baseline">baseline</span> '
                     f"{esc(BASELINE_NOTE[0].upper() + BASELINE_NOTE[1:])}.</p>")
    if not zoos:
        parts.append('<p class="muted">No records.</p>')
    for z, recs in zoos.items():
        parts.append(f'<section class="zoo" id="{ids[z]}"><h2>{esc(z)}</h2>'
                     + zoo_table(z, recs, links, f"table-{slug(z)}", sort) + "</section>")
    if len(zoos) > 1:
        by_name = {(z, r.name): links[(z, i)] for z, recs in zoos.items() for i, r in enumerate(recs) if r.ok}
        rows = mean_ranks([r for recs in zoos.values() for r in recs])
        parts.append('<section id="aggregate-section"><h2>Across zoos</h2>'
                     + mean_rank_table(rows, list(zoos), by_name) + "</section>")
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
                text = entry_page(rec, z, f"../../index.html#zoo-{slug(z)}")
                (zdir / f"{fname}.html").write_text(text, encoding="utf-8")
        (tmp / "index.html").write_text(index_page(zoos, links, ablation, title, sort), encoding="utf-8")
        (tmp / MARKER).write_text("This directory is generated by genbench.leaderboard.site.write_site.\n")
        os.chmod(tmp, 0o755)
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
