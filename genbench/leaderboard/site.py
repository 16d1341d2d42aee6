"""The static leaderboard site: ranked tables per zoo, entry pages with chart and provenance; works from file://.
It renders only: the order is standings.py's, the record is read through genbench.record, the numbers through
format.py.
The markup is in templates/ (Jinja2, autoescaped); this module computes what the templates show."""
from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ..defaults import AGGREGATE_RULE, DEMOGEN_ZOO
from ..errors import GenbenchError
from ..record import Record, finite
from ..scoring.spec import DEFAULT_SORT, score_label
from .columns import BASELINE_NOTE, SHOWN, score_spec
from .export import (AGAINST_NOTE, NO_CLAIM, NO_CLAIM_NOTE, alias_names, claim_text, entry_name, entry_names,
                     interval_columns, score_columns, submission_folder)
from .format import DASH, DIGITS, REFUSED, interval, number, page_number, page_score, rank_text
from .standings import by_zoo, empty_scores, group_rule, mean_ranks, partial_note, rank_records, zoo_label
from .svg import Scale, linear_ticks, nice_step, padded, tick_text
from .verdict import entry_verdict, groups_over_trainings, zoo_verdict

if TYPE_CHECKING:
    import pandas as pd

ASSETS = Path(__file__).with_name("assets")
TEMPLATES = Path(__file__).with_name("templates")
ASSET_FILES = ("site.css", "site.js")
MARKER = ".genbench-site"
# Scripts only from the site's own files (never inline), so escaped or not, record text cannot run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'")
PROVENANCE_ORDER = ("genbench_version", "git_commit", "measure_version", "measure_source_hash", "device",
                    "seconds", "date", "command")
LOCAL_TIP = ("Your own record, read from a results folder other than the shipped one: not verified. "
             "`genbench leaderboard add RECORD` verifies it and adds it to the shipped folder.")
ABLATION_SCORES = ("adj_r2", "kfold_r2", "mse")  # as demogen_table gives them: MSE in units of 1e-3
ABLATION_CAPTION = ("Measured values with 95% bootstrap intervals beside the values the paper reports for its CNN "
                    "on CIFAR-10 (Jiang et al. 2019); 'negative' where the paper reports a negative R\u00b2; MSE in "
                    "units of 10\u207b\u00b3.")
AGGREGATE_CAPTION = (f"Method: the {AGGREGATE_RULE} (the ranks of the tables above; test zoos, partial builds and "
                     "zoos of one's own never enter). Compare mean ranks together with the number of zoos. Sorted by "
                     "mean rank, then by name.")
AGGREGATE_BASELINE_TIP = ("Baseline, not a measure: shown as a reference. Its number is its mean place among the "
                          "measures (how many are ranked above it on a zoo, plus 0.5).")


# ---------------------------------------------------------------- templates


def _escape(value: Any) -> Any:
    """Autoescaping's finalize: text escaped as html.escape does it (&#x27; for ', None as ''); markup passes."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


@functools.cache
def environment() -> Environment:
    """The Jinja2 environment of the site's templates (autoescaped, strict about undefined names), made once."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      keep_trailing_newline=True, finalize=_escape)
    env.filters.update(num=page_number, sort_key=_sort_attr, rank_text=rank_text, breakable=breakable)
    env.globals.update(
        DASH=DASH, REFUSED=REFUSED, CSP=Markup(CSP), LOCAL_TIP=LOCAL_TIP, baseline_note=sentence(BASELINE_NOTE),
        provisional_tip=provisional_tip,
        AGAINST_TIP=sentence(AGAINST_NOTE), NO_CLAIM=NO_CLAIM, NO_CLAIM_TIP=sentence(NO_CLAIM_NOTE),
        claim_text=claim_text,
        AGGREGATE_BASELINE_TIP=AGGREGATE_BASELINE_TIP,
        ABLATION_CAPTION=ABLATION_CAPTION, AGGREGATE_CAPTION=AGGREGATE_CAPTION, page_rule=page_rule,
        ci=page_interval, page_score=page_score, number=number, finite=finite, score_label=score_label,
        score_spec=score_spec,
        first_sort=_first, entry_name=entry_name, submission_folder=submission_folder, safe_url=safe_url,
        also=also_text, partial_tip=partial_tip, baseline_tip=baseline_tip, audit_badge=audit_badge,
        row_classes=row_classes, row_search=row_search, verdict_key=_verdict_key, check_state=check_state)
    return env


def render(template: str, **context: Any) -> str:
    """The template `template` rendered with `context`."""
    return environment().get_template(template).render(**context)


# ---------------------------------------------------------------- small helpers


def slug(text: str) -> str:
    """A file-name-safe, collision-resistant form of `text` (unchanged when it is already safe)."""
    text = str(text)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", text) and ".." not in text:
        return text
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:60] or "entry"
    return f"{base}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def sentence(text: str) -> str:
    """`text` with a capital first letter (the rest unchanged)."""
    return text[:1].upper() + text[1:]


def breakable(name: str) -> Markup:
    """A name escaped, with line-break opportunities after its dots and underscores (a narrow screen wraps it
    there, not mid-word)."""
    return Markup(re.sub(r"([._])", r"\1<wbr>", html.escape(name, quote=True)))


def page_interval(lo: Any, hi: Any) -> str:
    """An interval as the page shows it ('' when there is none)."""
    return interval(lo, hi, digits=DIGITS, compact=True)


def safe_url(url: Any) -> str | None:
    """The URL when it is http(s), else None (no javascript: links from records)."""
    u = str(url or "").strip()
    return u if re.match(r"https?://", u, re.I) else None


def _sort_attr(v: float | None) -> str:
    """The data-sort attribute of a numeric cell (empty: missing, sorted last)."""
    return "" if v is None else repr(float(v))


def _first(score: str) -> str:
    """The first sort direction of a score's column: best first."""
    return "ascending" if score_spec(score).lower_is_better else "descending"


def _known(x: Any) -> Any:
    return "?" if x is None else x


# ---------------------------------------------------------------- badges and row texts


def provisional_tip(rec: Record) -> str:
    """The title of the 'provisional' mark: on how many trainings the entry is scored and how to complete it."""
    note = next((str(n) for n in rec.notes if str(n).startswith("provisional:")), None)
    return sentence(note or f"provisional: scored on {rec.n_trainings} training(s) of {rec.zoo_name}, fewer than the "
                    "official records") + " It is ranked by the mean over its trainings, without a rank group."


def partial_tip(rec: Record) -> str:
    """The title of the 'partial zoo' mark: why the record is listed apart ('' for a record on a complete zoo)."""
    note = partial_note(rec)
    return (f"{sentence(note)}: its scores describe only the models the zoo held, so it is listed apart from the "
            "records made on every model of the zoo's recipe.") if note else ""


def baseline_tip(rec: Record) -> str:
    """The title of the 'baseline' mark: what a baseline is."""
    return f"Baseline, not a measure: {rec.citation or rec.name}. {sentence(BASELINE_NOTE)}."


def also_text(rec: Record, names: Mapping[tuple[str, str], str] | None) -> str:
    """The entries an entry stands for, named as entries, comma-separated."""
    return ", ".join(alias_names(rec, names or {}))


def verdict_class(verdict: str) -> str:
    """The badge class of an audit verdict: robust, fragile (any failed part), inconclusive (a part could not run
    and none failed), else unknown."""
    if verdict == "robust":
        return "badge-robust"
    if "fragile" in verdict or "blind" in verdict:
        return "badge-fragile"
    return "badge-inconclusive" if verdict.startswith("inconclusive") else "badge-unknown"


def audit_badge(rec: Record) -> tuple[str, str, str]:
    """The fragility badge of a record as (class, text, title): the verdict, every check with its threshold."""
    if not rec.ok:
        return "badge-failed", "failed", "Evaluation failed: " + str(rec.failure or "no reason recorded")
    if rec.audit is None:
        return "badge-none", "not audited", "No fragility audit in this record."
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
    return verdict_class(verdict), verdict, "\n".join(lines)


def check_state(failed: bool | None) -> str:
    """An audit check's result: failed, passed or n/a."""
    return {True: "failed", False: "passed"}.get(failed, "n/a")  # type: ignore[arg-type]


def row_classes(r: Record) -> str:
    """The classes of a zoo table's row: partial, its rank group's parity, local, baseline."""
    cls = ["partial"] if not r.zoo_complete else []
    if r.rank_group is not None:
        cls.append("group-even" if int(r.rank_group) % 2 == 0 else "group-odd")
    cls += ["local"] if r.local else []
    cls += ["baseline"] if r.baseline else []
    return " ".join(cls)


def row_search(r: Record, names: Mapping[tuple[str, str], str] | None) -> str:
    """What the table's filter matches a row by: its names, aliases, kind, citation, title and marks."""
    sub_title = str(r.submission.get("title") or "") if r.submission else ""
    return " ".join([entry_name(r), r.name, *r.aliases, *alias_names(r, names or {}), str(r.kind or ""),
                     str(r.citation or ""), sub_title, "local" if r.local else "",
                     "baseline" if r.baseline else ""]).lower()


def _verdict_key(r: Record) -> str:
    """Sort key of the fragility column: the verdict text (failed and unaudited records sort as words too)."""
    if not r.ok:
        return "~failed"
    return str(r.verdict or "not auditable") if r.audit is not None else "~not audited"


# ---------------------------------------------------------------- the index


@dataclass(frozen=True)
class ZooView:
    """What the index shows of one zoo: its chart, its table's columns and rows (with their pages), its failures."""

    zoo: str
    anchor: str
    tid: str
    sort: str
    scores: list[str]
    with_interval: set[str]
    rows: list[tuple[Record, str]]
    failed: list[tuple[Record, str]]
    subs: bool
    hidden: Mapping[str, str]  # the empty score columns worth a note, and why (a score of some zoos only needs none)
    caption: str
    chart: Markup
    verdict: str = ""  # the sentence the zoo's section opens with
    label: str = ""    # "test zoo", "not an official zoo", or "" for an official one
    refusals: dict[str, list[str]] | None = None  # why a shown score is refused -> the cells ("entry: score")
    groups: str = ""  # how the rank groups hold over the trainings ('' when not scored over trainings)


def zoo_view(zoo: str, recs: list[Record], links: Mapping[tuple[str, int], str], tid: str,
             sort: str = DEFAULT_SORT) -> ZooView:
    """One zoo's part of the index, without the score columns no entry has a value for; the ranking score's
    column first, a Submission column when an entry was submitted."""
    hidden = empty_scores((r for r in recs if r.zoo_complete), [k for k in SHOWN if k != sort])
    linked = [(r, links[(zoo, i)]) for i, r in enumerate(recs)]
    rows = [(r, href) for r, href in linked if r.ok]
    return ZooView(zoo=zoo, anchor=f"zoo-{slug(zoo)}", tid=tid, sort=sort, scores=score_columns(sort, hidden),
                   with_interval=set(interval_columns(sort)), rows=rows,
                   failed=[(r, href) for r, href in linked if not r.ok],
                   subs=any(submission_folder(r) for r, _ in rows),
                   hidden={k: why for k, why in hidden.items() if why is not None}, caption=zoo_caption(recs, sort),
                   chart=overview_chart(zoo, [r for r, _ in rows], [href for _, href in rows], tid, sort),
                   verdict=zoo_verdict(zoo, recs).sentence() if rows else "", label=zoo_label(zoo),
                   refusals=refusals([r for r, _ in rows], score_columns(sort, hidden)),
                   groups=groups_over_trainings(recs))


def refusals(rows: Sequence[Record], keys: Sequence[str]) -> dict[str, list[str]]:
    """The reasons of the refused cells a zoo's table shows, each with its cells ('baseline.hparams: adj R²'),
    said beneath the table (a tooltip alone is not seen on a touch screen or a printout)."""
    out: dict[str, list[str]] = {}
    for r in rows:
        for k in keys:
            if r.refusal(k):
                out.setdefault(str(r.refusal(k)), []).append(f"{entry_name(r)}: {score_spec(k).header}")
    return out


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


def ablation_view(key: str, df: pd.DataFrame, tid: str) -> dict[str, Any]:
    """One DEMOGEN ablation table: measured scores with intervals beside the paper's values."""
    labels = [(k, score_spec(k).header + (" \u00d710\u207b\u00b3" if k == "mse" else "")) for k in ABLATION_SCORES]
    return {"key": key, "tid": tid, "labels": labels, "rows": df.to_dict("records")}


def index_page(zoos: Mapping[str, list[Record]], links: Mapping[tuple[str, int], str],
               ablation: Mapping[str, pd.DataFrame] | None, title: str, sort: str = DEFAULT_SORT,
               names: Mapping[tuple[str, str], str] | None = None) -> str:
    """The front page: per zoo, the overview chart and the ranked table; then what a baseline row is (once), the
    aggregate and the ablation tables. `names`: (zoo, record name) -> entry, for the aliases."""
    names = {**entry_names(r for recs in zoos.values() for r in recs), **(names or {})}
    rows = mean_ranks([r for recs in zoos.values() for r in recs])  # complete official zoos only
    return render(
        "index.html", title=title, root="", names=names,
        zoos=[zoo_view(z, recs, links, f"table-{slug(z)}", sort) for z, recs in zoos.items()],
        n_records=sum(len(v) for v in zoos.values()), n_local=sum(r.local for v in zoos.values() for r in v),
        baselines=any(r.baseline for recs in zoos.values() for r in recs),
        mean_ranks=rows if any(row.zoos > 1 for row in rows) else [],  # an entry on two official zoos, as the CLI
        aggregated=[z for z in zoos if any(z in row.ranks for row in rows)],
        rank_links={(z, r.name): links[(z, i)] for z, recs in zoos.items() for i, r in enumerate(recs) if r.ok},
        entry_of={k[1]: v for k, v in names.items()},
        ablation=[ablation_view(k, df, f"ablation-{slug(k)}") for k, df in (ablation or {}).items()],
        ablation_zoo=DEMOGEN_ZOO)


# ---------------------------------------------------------------- the chart


PLOT_H, PLOT_TOP, AXIS_W, SLOT_MIN = 100, 10, 50, 26  # px: plot height, its top margin, y-axis width, mark width
NAME_TOP, NUM_H = 16, 14  # px: where the marks' numbers begin below the plot, their line's height
REFERENCE_BASELINE = "baseline.hparams"  # the baseline row the chart draws a line for (BASELINE_NOTE names it)


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
    step = nice_step(hi - lo)
    lo, hi = math.floor(lo / step + 1e-6) * step, math.ceil(hi / step - 1e-6) * step
    return lo, (hi if hi > lo else lo + step), step


def _tick(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / 10 ** math.floor(
        math.log10(step)), 3) == 2.5 else 0)
    return f"{v:.{decimals}f}".replace("-", "\u2212")


def _mark(r: Record, v: float | None, elo: float | None, ehi: float | None, y: Callable[[float], float], lo: float,
          hi: float, sort: str) -> dict[str, Any]:
    """One row's mark on the overview chart: its label, group, title and what to draw (y: value -> pixel)."""
    group = "" if r.rank_group is None else rank_text(r.rank_group)
    ci = page_interval(elo, ehi)
    tip = (f"{'baseline' if r.baseline else 'rank ' + rank_text(r.rank, DASH)} \u00b7 {entry_name(r)}: "
           f"{score_spec(sort).label} "
           f"{page_number(v)}{' ' + ci if ci else ''}{f', rank group {group}' if group else ''}"
           f"{'' if r.zoo_complete else ' (' + partial_note(r) + ')'}"
           f"{' (refused: ' + str(r.refusal(sort)) + ')' if r.refusal(sort) else ''}")
    bars = (y(ehi), y(elo)) if elo is not None and ehi is not None else None
    clipped = [(y(e) + 6 * s, y(e)) for e, s in ((elo, -1), (ehi, 1)) if bars and (e < lo if s < 0 else e > hi)
               and (v is None or lo <= v <= hi)]  # an interval's end off the chart: a triangle at its edge
    if v is not None and not lo <= v <= hi:  # off the chart: a triangle at its edge, pointing the way
        edge, way = (PLOT_TOP + PLOT_H, 1) if v < lo else (PLOT_TOP, -1)
        point = {"shape": "off", "edge": edge, "base": edge - 9 * way}
    else:
        point = {"shape": "none" if v is None else "diamond" if r.baseline else "circle",
                 "cy": None if v is None else y(v)}
    num = "B" if r.baseline else rank_text(r.rank, DASH)  # the mark's number: its rank, as the table's Rank column
    return {"rec": r, "group": group, "label": entry_name(r), "num": num, "tip": tip, "bars": bars, "clipped": clipped,
            "point": point}


def _mark_classes(r: Record, i: int, group: str, prev: str | None) -> str:
    """The classes of a chart mark: baseline or measure, its rank group's parity, where a run of a group starts."""
    cls = ["mark", "baseline" if r.baseline else "measure"]
    cls += [] if r.rank_group is None else ["g-even" if int(r.rank_group) % 2 == 0 else "g-odd"]
    cls += ["first"] if i == 0 else ["run-start"] if group != prev else []
    cls += [] if r.zoo_complete else ["partial"]
    return " ".join(cls)


def overview_chart(zoo: str, rows: list[Record], hrefs: list[str], tid: str, sort: str = DEFAULT_SORT) -> Markup:
    """The index's picture of one zoo's ranking: the ranking score of every row of its table with its 95% interval
    (an inline SVG, no script needed to draw it), in the table's order (site.js re-orders it when the table is
    sorted or filtered), the rank groups as shaded bands, the baselines as diamonds with a dashed line at
    REFERENCE_BASELINE's value, each mark numbered beneath by its rank as the table's Rank column shows it (B: a
    baseline; horizontal, readable, and the chart stays short); each mark links to the entry's page, its title gives
    its name and numbers. '' when no row has the score."""
    spec = score_spec(sort)
    points = [(r.score(sort), *r.interval(sort)) for r in rows]
    if not any(v is not None for v, _, _ in points):
        return Markup("")
    lo, hi, step = chart_domain(points)

    def y(v: float) -> float:
        return round(PLOT_TOP + (hi - min(max(v, lo), hi)) / (hi - lo) * PLOT_H, 1)

    n = len(rows)
    ticks = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]
    ref = next((r for r in rows if r.baseline and r.name == REFERENCE_BASELINE and r.score(sort) is not None), None)
    marks: list[dict[str, Any]] = []
    for i, (r, href, (v, elo, ehi)) in enumerate(zip(rows, hrefs, points)):
        mark = _mark(r, v, elo, ehi, y, lo, hi, sort)
        prev = marks[-1]["group"] if marks else None
        marks.append({**mark, "href": href, "x": f"{100 * i / n:.4f}", "cls": _mark_classes(r, i, mark["group"], prev)})
    ref_line = None if ref is None else {"name": ref.name, "y": y(ref.score(sort)),
                                         "value": page_number(ref.score(sort))}
    what = f"{spec.label}{' (lower is better)' if spec.lower_is_better else ''}"
    caption = (f"{what} with 95% intervals in the table's order (it follows the table's sorting and filter). "
               "Bands: rank groups; \u25c6 baselines" + (f"; dashed: {REFERENCE_BASELINE}" if ref is not None else "")
               + "; \u25b2 off the chart. Each mark is numbered by its rank (B: a baseline); hover or focus a mark "
               "for its name and numbers.")
    return Markup(render(
        "overview.html", zoo=zoo, tid=tid, spec=spec, what=what, caption=caption, marks=marks, n=n,
        width=f"{100 / n:.4f}", ticks=[(y(t), _tick(t, step), abs(t) < step / 1e6) for t in ticks],
        ref=ref_line,
        top=PLOT_TOP, plot_h=PLOT_H, bottom=PLOT_TOP + PLOT_H, name_top=PLOT_TOP + PLOT_H + NAME_TOP,
        height=PLOT_TOP + PLOT_H + NAME_TOP + NUM_H,
        axis_w=AXIS_W, slot_min=SLOT_MIN))


CHART_SIDE, CHART_LEFT, CHART_TOP = 360, 58, 12  # px: the scatter's square plot, its left and top margins


def chart_svg(gap: list[float], pred: list[float]) -> Markup:
    """Inline SVG scatter of held-out prediction against true gap with the dashed y = x line, on equal axes (drawn
    here, see svg.py)."""
    lo, hi = padded([*gap, *pred], pad=0.05)
    x0, y0, side = CHART_LEFT, CHART_TOP, CHART_SIDE
    xs, ys = Scale(lo, hi, x0, x0 + side), Scale(lo, hi, y0 + side, y0)
    w, h = x0 + side + 12, y0 + side + 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
           'aria-label="predicted against true generalization gap" font-size="11" font-family="sans-serif">'
           f'<rect x="{x0}" y="{y0}" width="{side}" height="{side}" fill="#fff" stroke="#9aa4ae"/>']
    for t in linear_ticks(lo, hi):
        out.append(f'<line x1="{xs(t)}" x2="{xs(t)}" y1="{y0}" y2="{y0 + side}" stroke="#e3e7eb"/>'
                   f'<line x1="{x0}" x2="{x0 + side}" y1="{ys(t)}" y2="{ys(t)}" stroke="#e3e7eb"/>'
                   f'<text class="xtick" x="{xs(t)}" y="{y0 + side + 14}" text-anchor="middle">{tick_text(t)}</text>'
                   f'<text class="ytick" x="{x0 - 4}" y="{ys(t)}" dy="0.35em" text-anchor="end">{tick_text(t)}</text>')
    out.append(f'<g id="identity"><path d="M{xs(lo)},{ys(lo)}L{xs(hi)},{ys(hi)}" stroke="#7a8591" '
               'stroke-dasharray="5 3" fill="none"/></g><g id="points" fill="#1f5fbf" fill-opacity="0.75">'
               + "".join(f'<circle cx="{xs(g)}" cy="{ys(p)}" r="2.6"/>' for g, p in zip(gap, pred)) + "</g>"
               f'<text x="{x0 + side / 2}" y="{h - 6}" text-anchor="middle">true generalization gap</text>'
               f'<text transform="translate(14,{y0 + side / 2}) rotate(-90)" text-anchor="middle">predicted gap '
               '(k-fold held-out)</text>'
               f'<g class="legend"><line x1="{x0 + 10}" x2="{x0 + 30}" y1="{y0 + 14}" y2="{y0 + 14}" stroke="#7a8591" '
               f'stroke-dasharray="5 3"/><text x="{x0 + 36}" y="{y0 + 14}" dy="0.35em">y = x</text>'
               f'<circle cx="{x0 + 20}" cy="{y0 + 30}" r="2.6" fill="#1f5fbf"/><text x="{x0 + 36}" y="{y0 + 30}" '
               f'dy="0.35em">{len(gap)} models</text></g></svg>')
    return Markup("".join(out))


# ---------------------------------------------------------------- the entry page


def submission_items(sub: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The submission's metadata as (label, value): title, authors, licence, entry, then the rest, as text; the
    contact address is never published."""
    items = [("title", sub.get("title")), ("authors", ", ".join(map(str, sub.get("authors") or [])) or None),
             ("licence", sub.get("licence")), ("entry measure", sub.get("entry"))]
    rest = [(k, v if isinstance(v, str) or v is None else ", ".join(map(str, v)) if isinstance(v, (list, tuple))
             else json.dumps(v)) for k, v in sub.items()
            if k not in {"title", "authors", "contact", "licence", "entry", "paper_url"}]
    return items + rest


def record_items(rec: Record, names: Mapping[tuple[str, str], str] | None) -> list[tuple[str, Any]]:
    """What the record says of itself as (label, value)."""
    folder = submission_folder(rec)
    return [
        ("measure", rec.measure), ("submission folder", f"submissions/{folder}" if folder else None),
        ("record", f"{rec.zoo_name}/{rec.name}.json"), ("kind", rec.kind), ("citation", rec.citation),
        ("built-in", {True: "yes", False: "no"}.get(rec.builtin, rec.builtin)),  # type: ignore[arg-type]
        ("baseline", "yes" if rec.baseline else "no"), ("also (equivalent entries)", also_text(rec, names)),
        ("status", rec.status), ("rank", "none (a baseline row)" if rec.baseline else rank_text(rec.rank, DASH)),
        ("rank group", rank_text(rec.rank_group, DASH)), ("schema", rec.schema),
    ]


def fit_items(rec: Record) -> list[tuple[str, Any]]:
    """How the scores were fitted as (label, value)."""
    fit = rec.fit
    return [("models scored", fit.n), ("models dropped", fit.dropped),
            ("unconverged models scored", rec.unconverged), ("target", fit.target),
            ("transform (declared)", fit.transform), ("transform used", transform_text(rec)),
            ("cross-validation", kfold_text(rec)), ("bootstrap", bootstrap_text(rec)),
            ("intercept", page_number(fit.intercept)),
            ("coefficients", ", ".join(page_number(c) for c in fit.coef or []) or None)]


def provenance_items(rec: Record, zoo: str) -> list[tuple[str, Any]]:
    """The record's provenance, then its zoo's, as (label, value)."""
    prov = rec.provenance
    zinfo = rec.zoo or {"name": zoo}
    keys = [k for k in PROVENANCE_ORDER if k in prov] + sorted(k for k in prov if k not in PROVENANCE_ORDER)
    first = ("name", "version", "revision", "table_sha256")
    return ([(k, prov.get(k)) for k in keys] + [(f"zoo {k}", zinfo.get(k)) for k in first]
            + [(f"zoo {k}", v) for k, v in zinfo.items() if k not in first])


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


def cmi_text(rec: Record) -> str:
    """How the record's CMI is signed ('' when it has none)."""
    if rec.score("cmi") is None and not rec.refusal("cmi"):
        return ""
    unsigned = next((n for n in rec.notes if "unsigned" in str(n).lower() and "cmi" in str(n).lower()), None)
    if unsigned:
        return f"{unsigned}: it says how strongly, not which way, the measure goes with the gap."
    claim = {"smaller_gap": "a higher value means a smaller gap"}.get(str(rec.higher_means),
                                                                    "a higher value means a larger gap")
    return (f"CMI is signed by the measure's declared direction ({claim}): negative when the association runs "
            "against what the measure claims (CMI itself is blind to the sign).")


def spread_view(rec: Record) -> dict[str, Any] | None:
    """The repeated k-fold scores of each shuffle as (seed, k-fold R\u00b2, MSE) rows, and their range (None
    when the record holds none)."""
    spread = rec.spread
    r2, mse = list(spread.get("kfold_r2") or []), list(spread.get("mse") or [])
    n = max(len(r2), len(mse))
    if not n:
        return None
    seeds = list(rec.kfold.get("seeds") or range(n))
    rows = [(seeds[i] if i < len(seeds) else i, r2[i] if i < len(r2) else None, mse[i] if i < len(mse) else None)
            for i in range(n)]
    finite_r2 = [v for v in map(finite, r2) if v is not None]
    summary = (f"k-fold R\u00b2 from {page_number(min(finite_r2))} to {page_number(max(finite_r2))} over {n} "
               f"shuffles (the score is their mean, {page_number(rec.score('kfold_r2'))})" if finite_r2 else "")
    return {"rows": rows, "summary": summary}


@functools.lru_cache(maxsize=64)
def _curve_markup(means: str, measure: str, form: str | None) -> Markup:
    """The learning curves of one audit's seed means (JSON), drawn once: the records of one measure on several
    zoos carry the same audit. page_svg escapes the SVG's text (the measure, the arms, the panels' labels)."""
    from .curves import means_frame, page_svg
    return Markup(page_svg(means_frame({"means": json.loads(means)}), measure=measure, form=form))


def learning_curves(rec: Record) -> dict[str, Any]:
    """The audit's learning curves (the measure and the test error against train size, per arm, seed means with
    one-standard-error bars) as an inline SVG, from the seed means in the record's audit block; or why there is
    none when the record holds no means (made before they were recorded) or no train-size axis."""
    from .curves import has_curves, means_frame
    audit = rec.audit or {}
    means = means_frame(audit)
    if not has_curves(means):
        return {"why": ("this record's audit holds no seed means per train size (it was made before they were "
                        "recorded; re-running the entry adds them)" if means.empty else
                        "the audit zoo has no train-size axis, so there is no learning curve")}
    measure = str(audit.get("measure") or rec.measure or "measure")
    arms = means["arm"].astype(str).unique()
    return {"svg": _curve_markup(json.dumps(audit.get("means"), sort_keys=True), measure, audit.get("form")),
            "measure": measure,
            "arms": ", ".join(sorted(arms, key=lambda a: (a != "base", a)))}


def scores_view(rec: Record) -> dict[str, Any] | None:
    """The scores section's parts: the fit's settings, how CMI is signed, the spread over the k-fold shuffles, the
    chart of predicted against true gap (None for a failed record or one without scores)."""
    if not (rec.ok and rec.scores):
        return None
    gap, pred = rec.predicted_gaps()
    return {"fit": fit_items(rec), "cmi": cmi_text(rec), "spread": spread_view(rec), "n_gap": len(gap),
            "chart": chart_svg(gap, pred) if len(gap) >= 2 else None}


def entry_verdict_lines(rec: Record, ranked: Sequence[Record]) -> list[str]:
    """The verdict an entry page opens with (a measure's: rank, the recipe, what it adds, its direction; a
    baseline's: what it is; none for a failed record)."""
    if not rec.ok:
        return []
    if rec.baseline:
        return [f"a baseline row (a reference, not ranked): k-fold R\u00b2 {page_number(rec.score('kfold_r2'))}"]
    return entry_verdict(rec, ranked)


def entry_page(rec: Record, zoo: str, index_href: str, names: Mapping[tuple[str, str], str] | None = None,
               ranked: Sequence[Record] = ()) -> str:
    """The page of one entry on one zoo (named by its measure, its submission folder beside it): its verdict among
    the zoo's `ranked` records and its chart first, the record's fields last."""
    name = entry_name(rec)
    sub = rec.submission
    return render(
        "entry.html", title=f"{name} on {zoo}", root="../../", rec=rec, zoo=zoo, name=name, names=names,
        verdict=entry_verdict_lines(rec, ranked),
        index_href=index_href, folder=submission_folder(rec), partial=sentence(partial_note(rec)), sub=sub,
        sub_items=submission_items(sub) if sub is not None else [],
        paper_url=safe_url(sub.get("paper_url")) if sub is not None else None, record_items=record_items(rec, names),
        scores=scores_view(rec), curves=learning_curves(rec) if rec.audit is not None else None,
        provenance=provenance_items(rec, zoo))


# ---------------------------------------------------------------- the site


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


PAGE_SUFFIXES = (".html", ".htm")  # a path ending so names one page: the site is a folder


def check_site_folder(out: str | Path) -> None:
    """Refuse a folder for the site that holds something else: a file there, a path that names a page (x.html), or
    a folder with files and without the MARKER of a site genbench wrote (which it replaces)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GenbenchError(f"{out} is a file, not a folder for the site: name a new or empty folder, or one holding "
                            "a site genbench wrote")
    if out.suffix.lower() in PAGE_SUFFIXES and not out.is_dir():
        raise GenbenchError(f"{out} names a web page, but the site is a folder (index.html, assets/ and entries/ are "
                            f"written inside it): name a folder, e.g. {out.with_suffix('')}")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise GenbenchError(f"{out} holds files and is not a genbench site (no {MARKER} file); refusing to replace "
                            "it: name a new or empty folder")


def write_site(records: Iterable[Mapping[str, Any]], out: str | Path, *, sort: str = DEFAULT_SORT,
               ablation: Mapping[str, pd.DataFrame] | None = None, title: str = "genbench leaderboard",
               progress: bool = False) -> Path:
    """Write the static leaderboard site of `records`, ranked by `sort`, into `out` (built beside it, then
    swapped in); return index.html. progress: a bar of the entry pages on stderr."""
    from tqdm.auto import tqdm

    out = Path(out).resolve()
    check_site_folder(out)
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
        bar = tqdm(total=sum(map(len, zoos.values())), desc="leaderboard page", unit="entry", disable=not progress)
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
                text = entry_page(rec, z, f"../../index.html#zoo-{slug(z)}", names, ranked=recs)
                (zdir / f"{fname}.html").write_text(text, encoding="utf-8")
                bar.update()
        bar.close()
        (tmp / "index.html").write_text(index_page(zoos, links, ablation, title, sort, names), encoding="utf-8")
        (tmp / MARKER).write_text("This directory is generated by genbench.leaderboard.site.write_site.\n")
        os.chmod(tmp, 0o755)
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
