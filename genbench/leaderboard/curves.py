"""Learning-curve plots of a fragility audit (docs/fragility.md): the measure and the test error
against train size, one series per arm (the baseline and each twin), seed means with error bars of one seed
standard error, one column of panels per value of the other grid axes (e.g. each label-noise level). Drawn with
matplotlib (no pyplot); the input is the audit's seed means: a FragilityReport, the audit block of a result
record (its `means`), or the table itself."""
from __future__ import annotations

import html
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import GenbenchError
from ..fileio import atomic_write
from .svg import Scale, linear_ticks, padded, tick_text

BASE = "base"
CURVE_AXIS = "train_size"
STAT_COLS = ("n", "mu", "mu_se", "n_err", "err", "err_se")
BASE_COLOUR = "#1b1f24"
TWIN_COLOURS = ("#1f5fbf", "#d9480f", "#2b8a3e", "#9c36b5", "#c2255c", "#0b7285", "#e67700", "#5c677d")
ROWS = (("mu", "mu_se"), ("err", "err_se"))
FORMATS = ("svg", "png")


def means_frame(source: Any) -> pd.DataFrame:
    """The seed means as a table (arm, grid axes, n, mu, mu_se, n_err, err, err_se) from a FragilityReport, an
    audit block ({"means": {column: [...]}}), a column mapping, or a DataFrame; empty when there are none."""
    if isinstance(source, pd.DataFrame):
        return source
    means = getattr(source, "means", None)
    if isinstance(means, pd.DataFrame):
        return means
    if isinstance(source, Mapping):
        block = source.get("means") if "means" in source else source
        if isinstance(block, Mapping) and block:
            try:
                return pd.DataFrame({k: list(v) for k, v in block.items()})
            except (TypeError, ValueError):
                return pd.DataFrame()
    return pd.DataFrame()


def has_curves(means: pd.DataFrame) -> bool:
    """Whether the means hold a learning curve: a train-size axis and the arm and statistic columns."""
    return (not means.empty and CURVE_AXIS in means and "arm" in means
            and all(c in means for c in ("mu", "mu_se", "err", "err_se")))


def arms_of(means: pd.DataFrame) -> list[str]:
    """The arms in plotting order: the baseline, then the twins by name."""
    arms = [str(a) for a in dict.fromkeys(means["arm"])]
    return ([BASE] if BASE in arms else []) + sorted(a for a in arms if a != BASE)


def context_axes(means: pd.DataFrame) -> list[str]:
    """The grid axes other than train size (one panel column per combination of their values)."""
    return [c for c in means.columns if c not in ("arm", CURVE_AXIS, *STAT_COLS)]


def panels(means: pd.DataFrame) -> list[dict[str, Any]]:
    """Each panel column's fixed values of the other axes, in sorted order ([{}] without other axes)."""
    ctx = context_axes(means)
    if not ctx:
        return [{}]
    keys = means[ctx].drop_duplicates().sort_values(ctx)
    return [dict(zip(ctx, row)) for row in keys.itertuples(index=False, name=None)]


def series(means: pd.DataFrame, arm: str, panel: Mapping[str, Any], stat: str) -> pd.DataFrame:
    """One plotted series: train size, the seed mean of `stat` (mu or err) and its standard error, sorted by
    train size, only where the mean is finite."""
    sel = means["arm"].astype(str) == arm
    for k, v in panel.items():
        sel &= means[k] == v
    s = means.loc[sel, [CURVE_AXIS, stat, f"{stat}_se"]].astype(float).sort_values(CURVE_AXIS)
    s = s[np.isfinite(s[stat])]
    return s.rename(columns={stat: "mean", f"{stat}_se": "se"}).reset_index(drop=True)


def gid(stat: str, arm: str, i: int) -> str:
    """The id of one plotted series (an SVG group id): 'curve-mu-base-0', 'curve-err-lr_x3-2'."""
    return f"curve-{stat}-{arm}-{i}"


def _label(panel: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}" for k, v in panel.items())


def _round(v: float) -> float:
    return float(f"{v:.2g}")


def _ticks(axis: Any, at: list[float], rounded: bool = True) -> None:
    """Fixed ticks labelled as plain numbers (%g), no minor labels (log axes over less than a decade otherwise
    label their minor ticks in scientific notation)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    axis.set_major_locator(FixedLocator(sorted({_round(v) if rounded else v for v in at})))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())


def _span(means: pd.DataFrame, panel: Mapping[str, Any], stat: str) -> tuple[float, float]:
    """The range of a panel's seed means of `stat` over every arm (NaN when none is positive)."""
    sel = np.ones(len(means), bool)
    for k, v in panel.items():
        sel &= (means[k] == v).to_numpy()
    v = means.loc[sel, stat].astype(float)
    v = v[np.isfinite(v) & (v > 0)]
    return (float(v.min()), float(v.max())) if len(v) else (np.nan, np.nan)


def _styles(means: pd.DataFrame, arms: list[str], form: str | None) -> tuple[dict[str, str], bool]:
    """Each arm's colour (the baseline black, the twins in turn) and whether the measure's row is on a log axis
    (its form is log and every seed mean is positive): the same for the figure and the page's SVG."""
    colours = {a: BASE_COLOUR if a == BASE else TWIN_COLOURS[(i - (BASE in arms)) % len(TWIN_COLOURS)]
               for i, a in enumerate(arms)}
    mu = means["mu"].astype(float)
    return colours, (form or "log") == "log" and bool((mu[np.isfinite(mu)] > 0).all())


def curve_figure(source: Any, *, measure: str = "measure", form: str | None = None) -> Any:
    """The figure: row 1 the measure, row 2 the test error, against train size on log-log axes (the measure on
    a linear axis when it takes values <= 0 or `form` is 'linear'); a column per panel; one series per arm,
    seed means with bars of one seed standard error."""
    import matplotlib
    from matplotlib.figure import Figure

    means = means_frame(source)
    if not has_curves(means):
        raise GenbenchError("no learning curves to plot: the audit has no seed means per train size (the zoo needs "
                            "a 'train_size' axis; records made before the means were recorded hold none)")
    arms, cols = arms_of(means), panels(means)
    colours, log_mu = _styles(means, arms, form)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "genbench", "font.size": 8}):
        fig = Figure(figsize=(1.2 + 2.6 * len(cols), 5.0))
        fig.subplots_adjust(left=0.5 / (1.2 + 2.6 * len(cols)) + 0.06, right=0.98, bottom=0.18, top=0.9,
                            wspace=0.3, hspace=0.12)
        axes = fig.subplots(2, len(cols), squeeze=False, sharex=True)
        for j, panel in enumerate(cols):
            for r, (stat, _) in enumerate(ROWS):
                ax = axes[r][j]
                for arm in arms:
                    s = series(means, arm, panel, stat)
                    if s.empty:
                        continue
                    se = s["se"].where(np.isfinite(s["se"]), 0.0)
                    line, caps, bars = ax.errorbar(s[CURVE_AXIS], s["mean"], yerr=se, color=colours[arm],
                                                   marker="o", ms=3.5, lw=1.3, capsize=2,
                                                   label=arm if (j == 0 and r == 0) else None)
                    line.set_gid(gid(stat, arm, j))
                    for b in bars:
                        b.set_gid(gid(stat, arm, j) + "-bars")
                ax.set_xscale("log")
                _ticks(ax.xaxis, sorted(float(v) for v in means[CURVE_AXIS].unique()), rounded=False)
                if stat == "err" or log_mu:
                    ax.set_yscale("log")
                    lo, hi = _span(means, panel, stat)
                    if np.isfinite(lo) and lo > 0:
                        _ticks(ax.yaxis, list(np.geomspace(lo, hi, 4)) if hi > lo else [lo])
                ax.grid(True, which="both", color="#e3e7eb", lw=0.5)
                if r == 0 and panel:
                    ax.set_title(_label(panel), fontsize=8)
                if r == 1:
                    ax.set_xlabel("train size")
            axes[0][j].set_ylabel(measure if j == 0 else "")
            axes[1][j].set_ylabel("test error" if j == 0 else "")
        fig.legend(loc="lower center", ncol=min(len(arms), 6), frameon=False,
                   title="arm (seed mean \u00b1 1 SE)", title_fontsize=8)
    return fig


# ---------------------------------------------------------------- the page's SVG (drawn here: fast and small)

PANEL_W, PANEL_H = 200, 130           # px: one panel's plot area
LEFT, RIGHT, TOP, GAP_X, GAP_Y = 70, 14, 24, 52, 18  # px: margins, and the gaps between panels
BOTTOM, LEGEND_H = 40, 34             # px: below the lower row (ticks, the x label), the legend under it


def page_svg(source: Any, *, measure: str = "measure", form: str | None = None) -> str:
    """The learning curves as the entry page shows them: the figure of curve_figure (same panels, arms, colours,
    axes and seed-mean points, series ids from gid) drawn as a small SVG without matplotlib, so that a site of a
    hundred audited entries is written in seconds. Each axis's ticks are labelled with their values."""
    means = means_frame(source)
    if not has_curves(means):
        raise GenbenchError("no learning curves to plot: the audit has no seed means per train size")
    arms, cols = arms_of(means), panels(means)
    colours, log_mu = _styles(means, arms, form)
    sizes = sorted(float(v) for v in means[CURVE_AXIS].unique())
    width = LEFT + len(cols) * PANEL_W + (len(cols) - 1) * GAP_X + RIGHT
    height = TOP + 2 * PANEL_H + GAP_Y + BOTTOM + LEGEND_H
    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="curves" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="learning curves of {e(measure)} and of the test error against '
           'train size, per arm" font-size="10" font-family="sans-serif">']
    ctx = context_axes(means)
    split = {(str(k[0]), *k[1:]): g.sort_values(CURVE_AXIS) for k, g in means.groupby(["arm", *ctx], sort=False)}

    def seq(arm: str, panel: Mapping[str, Any], stat: str) -> dict[str, np.ndarray]:
        g = split.get((arm, *(panel[c] for c in ctx)))
        if g is None:
            return {"x": np.array([]), "mean": np.array([]), "se": np.array([])}
        m = g[stat].to_numpy(float)
        keep = np.isfinite(m)
        se = g[f"{stat}_se"].to_numpy(float)[keep]
        return {"x": g[CURVE_AXIS].to_numpy(float)[keep], "mean": m[keep], "se": np.where(np.isfinite(se), se, 0.0)}

    for j, panel in enumerate(cols):
        x0 = LEFT + j * (PANEL_W + GAP_X)
        xs = Scale(*padded(sizes, log=True), x0, x0 + PANEL_W, log=True)
        for r, (stat, _) in enumerate(ROWS):
            y0 = TOP + r * (PANEL_H + GAP_Y)
            log = stat == "err" or log_mu
            data = {a: seq(a, panel, stat) for a in arms}
            ends = [v for s in data.values() for m, se in zip(s["mean"], s["se"])
                    for v in (m, m - se if m - se > 0 or not log else m, m + se)]
            lo, hi = padded(ends, log=log)
            ys = Scale(lo, hi, y0 + PANEL_H, y0, log=log)
            inner = [v for s in data.values() for v in s["mean"] if np.isfinite(v) and (v > 0 or not log)]
            ticks = ([_round(v) for v in np.geomspace(min(inner), max(inner), 4)] if log and inner and
                     max(inner) > min(inner) else [_round(inner[0])] if log and inner else linear_ticks(lo, hi))
            out.append(f'<g class="panel" data-stat="{stat}" data-panel="{j}" data-log="{str(log).lower()}">'
                       f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="#fff" stroke="#9aa4ae"/>')
            for t in sorted(set(ticks)):
                if ys.inside(t):
                    out.append(f'<line class="grid" x1="{x0}" x2="{x0 + PANEL_W}" y1="{ys(t)}" y2="{ys(t)}" '
                               f'stroke="#e3e7eb"/><text class="ytick" x="{x0 - 4}" '
                               f'y="{ys(t)}" dy="0.35em" text-anchor="end">{tick_text(t)}</text>')
            for t in sizes:
                out.append(f'<line class="grid" x1="{xs(t)}" x2="{xs(t)}" y1="{y0}" y2="{y0 + PANEL_H}" '
                           f'stroke="#e3e7eb"/>')
                if r == 1:
                    out.append(f'<text class="xtick" x="{xs(t)}" y="{y0 + PANEL_H + 13}" '
                               f'text-anchor="middle">{tick_text(t)}</text>')
            for arm in arms:
                s, c = data[arm], colours[arm]
                pts = [(xs(x), ys(m)) for x, m in zip(s["x"], s["mean"]) if ys.inside(m)]
                bars = " ".join(f"M{xs(x)},{ys(max(m - d, lo) if log else m - d)}V{ys(min(m + d, hi))}"
                                for x, m, d in zip(s["x"], s["mean"], s["se"]) if d > 0 and ys.inside(m))
                if bars:
                    out.append(f'<path id="{gid(stat, arm, j)}-bars" d="{bars}" stroke="{c}" fill="none"/>')
                if pts:
                    out.append(f'<path id="{gid(stat, arm, j)}" class="series" data-arm="{e(arm)}" d="M'
                               + "L".join(f"{x},{y}" for x, y in pts) + f'" stroke="{c}" stroke-width="1.3" '
                               'fill="none"/>' + "".join(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{c}"/>'
                                                         for x, y in pts))
            if r == 0 and panel:
                out.append(f'<text class="title" x="{x0 + PANEL_W / 2}" y="{y0 - 8}" text-anchor="middle">'
                           f'{e(_label(panel))}</text>')
            if j == 0:
                label = e(measure if stat == "mu" else "test error")
                out.append(f'<text class="ylabel" transform="translate(14,{y0 + PANEL_H / 2}) rotate(-90)" '
                           f'text-anchor="middle">{label}</text>')
            out.append("</g>")
    xl = TOP + 2 * PANEL_H + GAP_Y
    out.append(f'<text class="xlabel" x="{LEFT + (width - LEFT - RIGHT) / 2}" y="{xl + 30}" '
               'text-anchor="middle">train size</text>')
    ly, step = xl + BOTTOM + 20, max(90, max(len(a) for a in arms) * 6 + 34)
    lx = (width - step * len(arms)) / 2
    out.append(f'<text class="legend-title" x="{width / 2}" y="{ly - 12}" text-anchor="middle" fill="#5c677d">'
               'arm (seed mean \u00b1 1 SE)</text>')
    for i, arm in enumerate(arms):
        x = lx + i * step
        out.append(f'<g class="legend" data-arm="{e(arm)}"><line x1="{x}" x2="{x + 18}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colours[arm]}" stroke-width="1.3"/><circle cx="{x + 9}" cy="{ly}" r="2.5" '
                   f'fill="{colours[arm]}"/><text x="{x + 24}" y="{ly}" dy="0.35em">{e(arm)}</text></g>')
    return "".join(out) + "</svg>"


def write_curve_plot(source: Any, path: str | Path, *, measure: str = "measure", form: str | None = None) -> Path:
    """Write the figure to `path` atomically (a run killed while writing leaves the old plot), SVG or PNG by its
    extension."""
    import matplotlib
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise GenbenchError(f"--plot {path}: the extension must be .svg or .png, got {path.suffix or 'none'!r}")
    fig = curve_figure(source, measure=measure, form=form)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "genbench"}):
        atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150 if fmt == "png" else None,
                                                   metadata={"Date": None} if fmt == "svg" else {"Software": "genbench"}))
    return path
