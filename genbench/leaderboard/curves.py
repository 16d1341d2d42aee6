"""Learning-curve plots of a fragility audit (docs/fragility.md): the measure and the test error
against train size, one series per arm (the baseline and each twin), seed means with error bars of one seed
standard error, one column of panels per value of the other grid axes (e.g. each label-noise level). Drawn with
matplotlib (no pyplot); the input is the audit's seed means: a FragilityReport, the audit block of a result
record (its `means`), or the table itself."""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import GenbenchError

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
    colours = {a: BASE_COLOUR if a == BASE else TWIN_COLOURS[(i - (BASE in arms)) % len(TWIN_COLOURS)]
               for i, a in enumerate(arms)}
    mu = means["mu"].astype(float)
    log_mu = (form or "log") == "log" and bool((mu[np.isfinite(mu)] > 0).all())
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


def curve_svg(source: Any, *, measure: str = "measure", form: str | None = None) -> str:
    """The figure as an inline SVG element (no XML prologue), labelled for screen readers."""
    import matplotlib
    fig = curve_figure(source, measure=measure, form=form)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "genbench"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    label = f"learning curves of {measure} and of the test error against train size, per arm"
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def write_curve_plot(source: Any, path: str | Path, *, measure: str = "measure", form: str | None = None) -> Path:
    """Write the figure to `path`, SVG or PNG by its extension."""
    import matplotlib
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise GenbenchError(f"--plot {path}: the extension must be .svg or .png, got {path.suffix or 'none'!r}")
    fig = curve_figure(source, measure=measure, form=form)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "genbench"}):
        fig.savefig(path, format=fmt, dpi=150 if fmt == "png" else None,
                    metadata={"Date": None} if fmt == "svg" else {"Software": "genbench"})
    return path
