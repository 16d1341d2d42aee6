"""The pieces of the page's hand-drawn SVG charts (the overview, the predicted-vs-true scatter, the learning
curves): a scale from data to pixels, a padded range, round ticks and their labels. Drawn without matplotlib so
that a site of a hundred entries is written in seconds and its pages stay small."""
from __future__ import annotations

import math
from collections.abc import Iterable


class Scale:
    """Data values onto pixels, [lo, hi] onto [p0, p1], linear or log10 (p1 < p0 for a y axis)."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float, *, log: bool = False) -> None:
        self.log, self.p0, self.p1 = log, p0, p1
        self.a, self.b = self._f(lo), self._f(hi)

    def _f(self, v: float) -> float:
        return math.log10(v) if self.log else float(v)

    def __call__(self, v: float) -> float:
        """The pixel of `v`, rounded to 0.01 px."""
        return round(self.p0 + (self._f(v) - self.a) / ((self.b - self.a) or 1.0) * (self.p1 - self.p0), 2)

    def inside(self, v: float) -> bool:
        """Whether `v` lies in the scale's range (and is positive on a log scale)."""
        if not math.isfinite(v) or (self.log and v <= 0):
            return False
        return min(self.a, self.b) - 1e-9 <= self._f(v) <= max(self.a, self.b) + 1e-9


def padded(values: Iterable[float], *, log: bool = False, pad: float = 0.06) -> tuple[float, float]:
    """A range holding the finite `values` (the positive ones on a log axis), widened by `pad` of its span on
    each side (in decades on a log axis); (1, 10) or (0, 1) when there are none."""
    v = [float(x) for x in values if math.isfinite(x) and (x > 0 or not log)]
    if not v:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = (math.log10(min(v)), math.log10(max(v))) if log else (min(v), max(v))
    d = pad * (hi - lo) or (0.15 if log else 0.1 * max(abs(hi), 1e-12))
    return (10 ** (lo - d), 10 ** (hi + d)) if log else (lo - d, hi + d)


def nice_step(span: float, ticks: int = 4) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks over `span`."""
    raw = span / ticks if span > 0 else 0.1
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def linear_ticks(lo: float, hi: float) -> list[float]:
    """Round ticks from lo to hi, four to six of them."""
    step = nice_step(hi - lo, 5)
    first = math.ceil(lo / step - 1e-9)
    return [float(f"{k * step:.10g}") for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def tick_text(v: float) -> str:
    """A tick's label: the value as %g, with a real minus sign."""
    return f"{v:g}".replace("-", "\u2212")
