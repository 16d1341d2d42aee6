"""The static leaderboard site: ranked tables per zoo, entry pages with chart and provenance; works from file://."""
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

if TYPE_CHECKING:
    import pandas as pd

ASSETS = Path(__file__).with_name("assets")
ASSET_FILES = ("site.css", "site.js")
MARKER = ".genbench-site"
DASH = "\u2013"
# Scripts only from the site's own files (never inline), so escaped or not, record text cannot run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'")

# key, header, tooltip, first sort direction (higher is better: descending first)
SCORE_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("adj_r2", "adj. R\u00b2", "adjusted R\u00b2 of the linear fit of the gap, with its 95% bootstrap interval",
     "descending"),
    ("kfold_r2", "k-fold R\u00b2", "R\u00b2 of the k-fold held-out predictions of the gap (the ranking score), "
     "with its 95% bootstrap interval", "descending"),
    ("tau", "Kendall \u03c4", "Kendall rank correlation of the measure with the gap", "descending"),
    ("psi", "\u03a8", "granulated Kendall \u03c4 averaged over hyperparameter axes", "descending"),
    ("cmi", "CMI", "conditional mutual information with the gap, minimised over hyperparameter sets",
     "descending"),
    ("sign_error_worst", "sign-error (worst)", "robust sign-error: worst case over environments (lower is "
     "better)", "ascending"),
)
SCORE_LABELS = {
    "adj_r2": "adjusted R\u00b2", "kfold_r2": "k-fold R\u00b2", "mse": "MSE", "tau": "Kendall \u03c4",
    "psi": "\u03a8 (granulated \u03c4)", "cmi": "CMI", "cmi_pgdl": "CMI (PGDL)",
    "sign_error_worst": "sign-error (worst)", "sign_error_p90": "sign-error (90th percentile)",
    "sign_error_mean": "sign-error (mean)",
}
PROVENANCE_ORDER = ("genbench_version", "git_commit", "measure_version", "measure_source_hash", "device",
                    "seconds", "date", "command")


# ---------------------------------------------------------------- small helpers


def esc(x: Any) -> str:
    """HTML-escape any value as text (quotes too, so it is safe in attributes)."""
    return html.escape("" if x is None else str(x), quote=True)


def num(x: Any) -> float | None:
    """A finite float, or None for None, NaN, infinities and anything not a number."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt(x: Any) -> str:
    """A number for display: 3 decimals, 3 significant digits when very small or large, an en dash if missing."""
    v = num(x)
    if v is None:
        return DASH
    if v == 0:
        return "0"
    if abs(v) < 1e-2 or abs(v) >= 1e4:
        return f"{v:.3g}"
    return f"{v:.3f}"


def fmt_interval(iv: Any) -> str:
    """'[lo, hi]' for a pair of numbers, '' when there is no usable interval."""
    if not isinstance(iv, (list, tuple)) or len(iv) != 2:
        return ""
    lo, hi = num(iv[0]), num(iv[1])
    if lo is None and hi is None:
        return ""
    return f"[{fmt(lo)}, {fmt(hi)}]"


def slug(text: str) -> str:
    """A file-name-safe, collision-resistant form of `text` (unchanged when it is already safe)."""
    text = str(text)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", text) and ".." not in text:
        return text
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:60] or "entry"
    return f"{base}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def zoo_name(rec: Mapping[str, Any]) -> str:
    """The zoo a record belongs to ('unknown' when it does not say)."""
    z = rec.get("zoo")
    if isinstance(z, Mapping):
        return str(z.get("name") or "unknown")
    return str(z) if z else "unknown"


def is_ok(rec: Mapping[str, Any]) -> bool:
    """Whether the record is a successful evaluation."""
    return rec.get("status", "ok") == "ok"


def scores_of(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The record's scores dict (empty when absent)."""
    s = rec.get("scores")
    return s if isinstance(s, dict) else {}


def score(rec: Mapping[str, Any], key: str) -> float | None:
    """One score value of a record, None when missing or NaN."""
    vals = scores_of(rec).get("values")
    return num(vals.get(key)) if isinstance(vals, Mapping) else None


def interval(rec: Mapping[str, Any], key: str) -> Any:
    """One score interval of a record, None when missing."""
    ivs = scores_of(rec).get("intervals")
    return ivs.get(key) if isinstance(ivs, Mapping) else None


def _sort_attr(v: float | None) -> str:
    """The data-sort attribute of a numeric cell (empty: missing, sorted last)."""
    return "" if v is None else repr(float(v))


# ---------------------------------------------------------------- ranking and grouping


def group_by_zoo(records: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records per zoo in display order; a zoo without ranks is ranked by k-fold R^2, failed records last."""
    zoos: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        zoos.setdefault(zoo_name(rec), []).append(dict(rec))
    for name, recs in zoos.items():
        ok = [r for r in recs if is_ok(r)]
        bad = sorted((r for r in recs if not is_ok(r)), key=lambda r: str(r.get("name", "")))
        for r in bad:
            r["rank"], r["rank_group"] = None, None
        if not any(num(r.get("rank")) is not None for r in ok):
            ok.sort(key=lambda r: (score(r, "kfold_r2") is None, -(score(r, "kfold_r2") or 0.0),
                                   str(r.get("name", ""))))
            prev, rank = object(), 0
            for i, r in enumerate(ok, 1):
                k = score(r, "kfold_r2")
                if k is None or k != prev:
                    rank, prev = i, k
                r["rank"] = rank
        ok.sort(key=lambda r: (num(r.get("rank")) is None, num(r.get("rank")) or 0.0, str(r.get("name", ""))))
        zoos[name] = ok + bad
    return zoos


def aggregate(zoos: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per entry name: its rank in each zoo and the mean over the zoos where it has a successful record."""
    rows: dict[str, dict[str, Any]] = {}
    for zoo, recs in zoos.items():
        for r in recs:
            rank = num(r.get("rank"))
            if not is_ok(r) or rank is None:
                continue
            row = rows.setdefault(str(r.get("name")), {"name": str(r.get("name")), "kind": r.get("kind"),
                                                        "ranks": {}})
            row["ranks"][zoo] = rank
    for row in rows.values():
        row["mean_rank"] = sum(row["ranks"].values()) / len(row["ranks"])
        row["n_zoos"] = len(row["ranks"])
    return sorted(rows.values(), key=lambda r: (r["mean_rank"], -r["n_zoos"], r["name"]))


# ---------------------------------------------------------------- badges


def badge(rec: Mapping[str, Any]) -> str:
    """The fragility badge of a record: the verdict coloured, every check with its threshold in its title."""
    if not is_ok(rec):
        tip = "Evaluation failed: " + str(rec.get("failure") or "no reason recorded")
        return f'<span class="badge badge-failed" tabindex="0" title="{esc(tip)}">failed</span>'
    audit = rec.get("audit")
    if not isinstance(audit, Mapping):
        tip = "No fragility audit in this record."
        return f'<span class="badge badge-none" tabindex="0" title="{esc(tip)}">not audited</span>'
    verdict = str(audit.get("verdict") or "not auditable")
    lines = [f"Fragility audit on {audit.get('zoo') or 'the fragility zoo'}: {verdict}"]
    for c in audit.get("checks") or []:
        if not isinstance(c, Mapping):
            continue
        state = {True: "FAILED", False: "passed"}.get(c.get("failed"), "n/a")
        line = (f"{state} {c.get('label', '?')} ({c.get('part', '?')}): {c.get('statistic', '?')} = "
                f"{fmt(c.get('value'))}, fails when {c.get('threshold', '?')}")
        if c.get("detail"):
            line += f"; {c['detail']}"
        lines.append(line)
    lines += [f"note: {n}" for n in audit.get("notes") or []]
    cls = ("badge-robust" if verdict == "robust" else
           "badge-fragile" if ("fragile" in verdict or "blind" in verdict) else "badge-unknown")
    return f'<span class="badge {cls}" tabindex="0" title="{esc(chr(10).join(lines))}">{esc(verdict)}</span>'


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


def num_td(v: Any, iv: Any = None) -> str:
    """A numeric cell with its sort key, and its interval beneath when given."""
    ci = fmt_interval(iv) if iv is not None else ""
    ci_html = f'<span class="ci">{esc(ci)}</span>' if ci else ""
    return f'<td class="num" data-sort="{_sort_attr(num(v))}">{esc(fmt(v))}{ci_html}</td>'


def rank_td(v: Any) -> str:
    """A numeric cell showing a rank (an integer when it is one)."""
    r = num(v)
    return f'<td class="num" data-sort="{_sort_attr(r)}">{esc(DASH if r is None else fmt_rank(r))}</td>'


def zoo_table(zoo: str, recs: list[dict[str, Any]], links: Mapping[tuple[str, int], str], tid: str) -> str:
    """The ranked, sortable, filterable table of one zoo."""
    head = "".join([
        th("Rank", kind="num", tip="rank on this zoo (primary score: k-fold R\u00b2)", cls="num"),
        th("Group", kind="num", tip="rank group from the ranking step: entries that cannot be told apart",
           cls="num"),
        th("Entry"), th("Kind"),
        *(th(esc(lab), kind="num", first=first, tip=tip, cls="num") for _, lab, tip, first in SCORE_COLUMNS),
        th("Fragility", tip="verdict of the fragility audit; hover a badge for its checks"),
        th("Citation"),
    ])
    rows = []
    for i, r in enumerate(recs):
        name = str(r.get("name", "?"))
        sub = r.get("submission") if isinstance(r.get("submission"), Mapping) else None
        sub_title = str(sub.get("title") or "") if sub else ""
        search = " ".join([name, str(r.get("kind") or ""), str(r.get("citation") or ""), sub_title]).lower()
        group = num(r.get("rank_group"))
        cls = ["failed"] if not is_ok(r) else []
        if group is not None:
            cls.append("group-even" if int(group) % 2 == 0 else "group-odd")
        cells = [rank_td(r.get("rank")), rank_td(group)]
        sub_html = f'<span class="subtitle">{esc(sub_title)}</span>' if sub_title else ""
        cells.append(f'<td data-sort="{esc(name.lower())}"><a class="entry" href="{esc(links[(zoo, i)])}">'
                     f"{esc(name)}</a>{sub_html}</td>")
        cells.append(f"<td>{esc(r.get('kind') or DASH)}</td>")
        for key, *_ in SCORE_COLUMNS:
            cells.append(num_td(score(r, key), interval(r, key) if key in ("adj_r2", "kfold_r2") else None))
        cells.append(f'<td data-sort="{esc(_verdict_key(r))}">{badge(r)}</td>')
        cells.append(f"<td>{esc(r.get('citation') or DASH)}</td>")
        rows.append(f'<tr class="{" ".join(cls)}" data-name="{esc(name)}" data-search="{esc(search)}">'
                    + "".join(cells) + "</tr>")
    n_ok = sum(is_ok(r) for r in recs)
    caption = (f"{n_ok} ranked entr{'y' if n_ok == 1 else 'ies'}"
               f"{f', {len(recs) - n_ok} failed' if len(recs) > n_ok else ''}. Ranked by k-fold R\u00b2; "
               "intervals are 95% bootstrap intervals over models. Click a header to sort, again to reverse; "
               "missing values (\u2013) sort last.")
    return (
        f'<div class="filter-bar"><input type="search" class="row-filter" id="{tid}-filter" '
        f'data-table="{tid}" data-count="{tid}-count" placeholder="filter by name, kind or citation" '
        f'aria-label="filter the entries of {esc(zoo)}"><span class="muted" id="{tid}-count"></span></div>\n'
        f'<div class="table-wrap"><table class="sortable-table leaderboard" id="{tid}" data-zoo="{esc(zoo)}">'
        f"<caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(rows) + "\n</tbody></table></div>"
    )


def _verdict_key(r: Mapping[str, Any]) -> str:
    """Sort key of the fragility column: the verdict text (failed and unaudited records sort as words too)."""
    if not is_ok(r):
        return "~failed"
    a = r.get("audit")
    return str(a.get("verdict") or "not auditable") if isinstance(a, Mapping) else "~not audited"


def aggregate_table(rows: list[dict[str, Any]], zoos: list[str], links: Mapping[tuple[str, str], str]) -> str:
    """The mean-rank-across-zoos table, with its method in the caption."""
    head = "".join([th("Entry"), th("Kind"),
                    *(th(esc(z), kind="num", tip=f"rank on {z}", cls="num") for z in zoos),
                    th("Zoos", kind="num", first="descending", tip="zoos with a successful record", cls="num"),
                    th("Mean rank", kind="num", tip="mean of the per-zoo ranks", cls="num")])
    body = []
    for row in rows:
        cells = [f'<td data-sort="{esc(row["name"].lower())}">{esc(row["name"])}</td>',
                 f"<td>{esc(row.get('kind') or DASH)}</td>"]
        for z in zoos:
            rank = row["ranks"].get(z)
            if rank is None:
                cells.append(f'<td class="num" data-sort="">{DASH}</td>')
            else:
                href = links.get((z, row["name"]))
                txt = esc(fmt_rank(rank))
                inner = f'<a href="{esc(href)}">{txt}</a>' if href else txt
                cells.append(f'<td class="num" data-sort="{_sort_attr(rank)}">{inner}</td>')
        cells.append(f'<td class="num" data-sort="{row["n_zoos"]}">{row["n_zoos"]}</td>')
        cells.append(f'<td class="num" data-sort="{_sort_attr(row["mean_rank"])}">{row["mean_rank"]:.2f}</td>')
        body.append(f'<tr data-name="{esc(row["name"])}">' + "".join(cells) + "</tr>")
    caption = ("Method: for each entry, the arithmetic mean of its per-zoo ranks (the ranks of the tables "
               "above, primary score k-fold R\u00b2) over the zoos where it has a successful record; failed "
               "and missing entries are left out of a zoo rather than penalised, so compare mean ranks together "
               "with the number of zoos. Sorted by mean rank, then by more zoos, then by name.")
    return (f'<div class="table-wrap"><table class="sortable-table aggregate" id="aggregate">'
            f"<caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>\n<tbody>\n"
            + "\n".join(body) + "\n</tbody></table></div>")


def fmt_rank(rank: float) -> str:
    """A rank as an integer when it is one."""
    return str(int(rank)) if float(rank).is_integer() else fmt(rank)


def ablation_table(key: str, df: pd.DataFrame, tid: str) -> str:
    """One DEMOGEN ablation table: measured scores with intervals beside the paper's values."""
    cols = (("adj_r2", "adj. R\u00b2"), ("kfold_r2", "k-fold R\u00b2"), ("mse", "MSE \u00d710\u207b\u00b3"))
    head = [th("Setting"), th("Measure")]
    for k, lab in cols:
        first = "ascending" if k == "mse" else "descending"
        head.append(th(esc(lab), kind="num", first=first, tip=f"measured {lab}, 95% interval beneath",
                       cls="num"))
        head.append(th(f"paper {esc(lab)}", kind="num", first=first, tip="Jiang et al. 2019, CNN on CIFAR-10",
                       cls="num"))
    body = []
    for row in df.to_dict("records"):
        cells = [f"<td>{esc(row.get('setting', DASH))}</td>", f"<td>{esc(row.get('measure', DASH))}</td>"]
        for k, _ in cols:
            cells.append(num_td(row.get(k), [row.get(f"{k}_lo"), row.get(f"{k}_hi")]))
            paper = num(row.get(f"paper_{k}"))
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


def chart_points(rec: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    """The (true gap, held-out prediction) pairs of a record where both are finite."""
    vals = rec.get("values")
    if not isinstance(vals, Mapping):
        return [], []
    gap, pred = vals.get("gap"), vals.get("prediction")
    if not isinstance(gap, list) or not isinstance(pred, list) or len(gap) != len(pred):
        return [], []
    pairs = [(num(g), num(p)) for g, p in zip(gap, pred)]
    pairs = [(g, p) for g, p in pairs if g is not None and p is not None]
    return [g for g, _ in pairs], [p for _, p in pairs]


# ---------------------------------------------------------------- the entry page


def dl(items: Iterable[tuple[str, Any]]) -> str:
    """A definition list of (label, value) with escaped values (missing as an en dash)."""
    rows = [f"<dt>{esc(k)}</dt><dd>{esc(DASH if v is None or v == '' else v)}</dd>" for k, v in items]
    return '<dl class="meta">' + "".join(rows) + "</dl>"


def safe_url(url: Any) -> str | None:
    """The URL when it is http(s), else None (no javascript: links from records)."""
    u = str(url or "").strip()
    return u if re.match(r"https?://", u, re.I) else None


def entry_page(rec: Mapping[str, Any], zoo: str, index_href: str) -> str:
    """The page of one entry on one zoo."""
    name = str(rec.get("name", "?"))
    zinfo = rec.get("zoo") if isinstance(rec.get("zoo"), Mapping) else {"name": zoo}
    parts = [f'<header class="page"><p><a href="{esc(index_href)}">\u2190 leaderboard</a></p>'
             f'<h1 id="entry-name">{esc(name)}</h1>'
             f'<p class="sub">{esc(zoo)} \u00b7 {esc(rec.get("kind") or DASH)} \u00b7 '
             f'{esc(rec.get("citation") or DASH)} \u00b7 {badge(rec)}</p></header>']
    if not is_ok(rec):
        parts.append('<section class="failure" id="failure"><h2>Evaluation failed</h2>'
                     f'<p>{esc(rec.get("failure") or "no reason recorded")}</p>'
                     "<p>No scores or chart are shown for a failed record.</p></section>")
    sub = rec.get("submission")
    if isinstance(sub, Mapping):
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
        ("measure", rec.get("measure")), ("kind", rec.get("kind")), ("citation", rec.get("citation")),
        ("built-in", {True: "yes", False: "no"}.get(rec.get("builtin"), rec.get("builtin"))),
        ("status", rec.get("status", "ok")), ("rank", fmt_rank(rec["rank"]) if num(rec.get("rank")) is not None
                                              else None),
        ("rank group", fmt_rank(rec["rank_group"]) if num(rec.get("rank_group")) is not None else None),
        ("schema", rec.get("schema")),
    ]) + "</section>")
    s = scores_of(rec)
    if is_ok(rec) and s:
        parts.append(scores_section(s))
        gap, pred = chart_points(rec)
        if len(gap) >= 2:
            k = score(rec, "kfold_r2")
            parts.append('<section id="chart-section"><h2>Predicted against true gap</h2>'
                         f'<figure class="chart" id="chart">{chart_svg(gap, pred)}<figcaption>'
                         f"{esc(name)} on {esc(zoo)}: each point is one model, its k-fold held-out prediction "
                         f"of the gap against the true gap ({len(gap)} models, k-fold R\u00b2 = {esc(fmt(k))}); "
                         "the dashed line is y = x.</figcaption></figure></section>")
        else:
            parts.append('<section id="chart-section"><h2>Predicted against true gap</h2><p class="muted">'
                         "This record holds no k-fold held-out predictions, so there is nothing to plot.</p>"
                         "</section>")
    parts.append(audit_section(rec.get("audit")))
    notes = [*(s.get("notes") or [])] if s else []
    if notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{esc(n)}</li>" for n in notes)
                     + "</ul></section>")
    prov = rec.get("provenance") if isinstance(rec.get("provenance"), Mapping) else {}
    cmd = prov.get("command")
    parts.append('<section id="reproduce"><h2>Reproduce</h2>' + (
        f'<pre class="command" id="command"><code>{esc(cmd)}</code></pre>' if cmd else
        '<p class="muted">The record does not state its command.</p>') + "</section>")
    keys = [k for k in PROVENANCE_ORDER if k in prov] + sorted(k for k in prov if k not in PROVENANCE_ORDER)
    zoo_items = [(f"zoo {k}", zinfo.get(k)) for k in ("name", "version", "revision", "table_sha256")]
    zoo_items += [(f"zoo {k}", v) for k, v in zinfo.items() if k not in {"name", "version", "revision",
                                                                         "table_sha256"}]
    parts.append('<section id="provenance"><h2>Provenance</h2>'
                 + dl([(k, prov.get(k)) for k in keys] + zoo_items) + "</section>")
    return page(f"{name} on {zoo}", "\n".join(parts), "../../")


def scores_section(s: Mapping[str, Any]) -> str:
    """The table of every score with its interval, and the fit's settings."""
    values = s.get("values") if isinstance(s.get("values"), Mapping) else {}
    ivs = s.get("intervals") if isinstance(s.get("intervals"), Mapping) else {}
    keys = [k for k in SCORE_LABELS if k in values or k in ivs]
    keys += sorted(k for k in set(values) | set(ivs) if k not in SCORE_LABELS)
    rows = "".join(f"<tr><td>{esc(SCORE_LABELS.get(k, k))}</td>{num_td(values.get(k))}"
                   f'<td class="num">{esc(fmt_interval(ivs.get(k)) or DASH)}</td></tr>' for k in keys)
    meta = dl([("models scored", s.get("n")), ("models dropped", s.get("dropped")), ("target", s.get("target")),
               ("transform", s.get("transform")),
               ("intercept", fmt(s.get("intercept")) if "intercept" in s else None),
               ("coefficients", ", ".join(fmt(c) for c in s.get("coef") or []) or None)])
    return ('<section id="scores"><h2>Scores</h2>' + meta +
            '<div class="table-wrap"><table class="sortable-table scores" id="scores-table"><thead><tr>'
            + th("Score") + th("Value", kind="num", cls="num") + '<th class="num" data-nosort>95% interval</th>'
            + f"</tr></thead><tbody>{rows}</tbody></table></div></section>")


def audit_section(audit: Any) -> str:
    """The fragility audit: verdict, every check with statistic, value and threshold, and its notes."""
    if not isinstance(audit, Mapping):
        return '<section id="audit"><h2>Fragility audit</h2><p class="muted">Not audited.</p></section>'
    rows = []
    for c in audit.get("checks") or []:
        if not isinstance(c, Mapping):
            continue
        state = {True: "failed", False: "passed"}.get(c.get("failed"), "n/a")
        rows.append(f'<tr class="check-{state.replace("/", "")}"><td>{esc(c.get("part"))}</td>'
                    f"<td>{esc(c.get('label'))}</td><td>{esc(c.get('statistic'))}</td>{num_td(c.get('value'))}"
                    f"<td>{esc(c.get('threshold'))}</td><td>{esc(state)}</td><td>{esc(c.get('detail'))}</td></tr>")
    head = (th("Part") + th("Label") + th("Statistic") + th("Value", kind="num", cls="num")
            + th("Fails when") + th("Result") + th("Detail"))
    notes = "".join(f"<li>{esc(n)}</li>" for n in audit.get("notes") or [])
    return ('<section id="audit"><h2>Fragility audit</h2>'
            f"<p>Verdict on {esc(audit.get('zoo') or DASH)}: <strong>{esc(audit.get('verdict') or DASH)}</strong>"
            f'</p><div class="table-wrap"><table class="sortable-table checks" id="checks"><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            + (f"<ul>{notes}</ul>" if notes else "") + "</section>")


# ---------------------------------------------------------------- the site


def index_page(zoos: Mapping[str, list[dict[str, Any]]], links: Mapping[tuple[str, int], str],
               ablation: Mapping[str, pd.DataFrame] | None, title: str) -> str:
    """The front page: one ranked table per zoo, the aggregate and the ablation tables."""
    ids = {z: f"zoo-{slug(z)}" for z in zoos}
    nav = [f'<a href="#{ids[z]}">{esc(z)}</a>' for z in zoos]
    if len(zoos) > 1:
        nav.append('<a href="#aggregate-section">across zoos</a>')
    if ablation:
        nav.append('<a href="#ablation">DEMOGEN ablations</a>')
    n = sum(len(v) for v in zoos.values())
    parts = [f'<header class="page"><h1>{esc(title)}</h1><p class="sub">{n} records on {len(zoos)} '
             f'zoo{"s" if len(zoos) != 1 else ""}. Hover a fragility badge to see its checks; follow an entry '
             'for its chart, provenance and the command that reproduces it.</p>'
             f'<nav class="zoos" aria-label="zoos">{"".join(nav)}</nav></header>']
    if not zoos:
        parts.append('<p class="muted">No records.</p>')
    for z, recs in zoos.items():
        parts.append(f'<section class="zoo" id="{ids[z]}"><h2>{esc(z)}</h2>'
                     + zoo_table(z, recs, links, f"table-{slug(z)}") + "</section>")
    if len(zoos) > 1:
        by_name = {(z, str(r.get("name"))): links[(z, i)] for z, recs in zoos.items()
                   for i, r in enumerate(recs) if is_ok(r)}
        parts.append('<section id="aggregate-section"><h2>Across zoos</h2>'
                     + aggregate_table(aggregate(zoos), list(zoos), by_name) + "</section>")
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


def write_site(records: list[dict], out: str | Path, *, ablation: dict[str, pd.DataFrame] | None = None,
               title: str = "genbench leaderboard") -> Path:
    """Write the static leaderboard site into `out` (built beside it, then swapped in); return index.html."""
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise FileExistsError(f"{out} exists and is not a genbench site (no {MARKER} file); refusing to replace "
                              "it: choose an empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    zoos = group_by_zoo(records)
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
                base = slug(str(rec.get("name", "entry")))
                fname, k = base, 1
                while fname.lower() in used:
                    k += 1
                    fname = f"{base}-{k}"
                used.add(fname.lower())
                links[(z, i)] = f"entries/{slug(z)}/{fname}.html"
                text = entry_page(rec, z, f"../../index.html#zoo-{slug(z)}")
                (zdir / f"{fname}.html").write_text(text, encoding="utf-8")
        (tmp / "index.html").write_text(index_page(zoos, links, ablation, title), encoding="utf-8")
        (tmp / MARKER).write_text("This directory is generated by genbench.leaderboard.site.write_site.\n")
        os.chmod(tmp, 0o755)
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
