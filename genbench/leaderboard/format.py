"""Numbers as people read them: the one formatter of scores, intervals and ranks for the terminal, the text
exports and the web page."""
from __future__ import annotations

from typing import Any

from ..record import finite
from ..text import interval_end

TABLE_DIGITS = 2   # decimals in the terminal's tables
DIGITS = 3         # decimals on the page, in the markdown export and in a submission's summary
MISSING = "-"      # a missing number in the terminal
DASH = "\u2013"    # a missing number on the page
TEXT_FORMATS = ("csv", "json", "markdown")  # what the leaderboard exports as text
REFUSED = "\u2014"  # a refused score (not reported, its reason in a footnote or tooltip), never a number
BASELINE_RANK = "base"  # the rank cell of a baseline row in the terminal and the markdown export


def _number(x: Any, compact: bool) -> float | None:
    if compact:
        return finite(x)
    return None if x is None or x != x else float(x)


def _digits(v: float, digits: int, compact: bool) -> str:
    if compact and v == 0:
        return "0"
    if compact and (abs(v) < 1e-2 or abs(v) >= 1e4):
        return f"{v:.{digits}g}"
    return f"{v:.{digits}f}"


def interval(lo: Any, hi: Any, *, digits: int = TABLE_DIGITS, compact: bool = False) -> str:
    """'[lo, hi]' when both ends are numbers, else ''; compact: both ends in the form the larger one needs (so
    [-0.002, 0.559], not [-0.00189, 0.559]); else `digits` decimals, more for an end near 0 (`interval_end`)."""
    ends = [_number(e, compact) for e in (lo, hi)]
    if None in ends:
        return ""
    if not compact:
        return "[" + ", ".join(interval_end(e, digits) for e in ends) + "]"  # type: ignore[arg-type]
    big = max(abs(e) for e in ends)  # type: ignore[arg-type]
    fixed = 1e-2 <= big < 1e4
    return "[" + ", ".join(f"{e:.{digits}f}" if fixed else _digits(e, digits, compact)  # type: ignore[arg-type]
                           for e in ends) + "]"


def number(v: Any, lo: Any = None, hi: Any = None, *, digits: int = TABLE_DIGITS, missing: str = MISSING,
           compact: bool = False) -> str:
    """`v` with `digits` decimals, then its interval when both ends are given; `missing` when `v` is None or NaN.
    compact (the page): 0 as '0', `digits` significant digits when very small or large, infinities missing."""
    x = _number(v, compact)
    if x is None:
        return missing
    ci = interval(lo, hi, digits=digits, compact=compact)
    return _digits(x, digits, compact) + (f" {ci}" if ci else "")


def page_number(v: Any) -> str:
    """A number as the page shows it: 3 decimals, 3 significant digits when very small or large, a dash if missing."""
    return number(v, digits=DIGITS, missing=DASH, compact=True)


def page_score(v: Any, lo: Any = None, hi: Any = None) -> tuple[str, str]:
    """A score and its interval as a leaderboard column of the page shows them: DIGITS fixed decimals (one form per
    column, never 0.00345 beside 0.014), a dash if missing; '' for a missing interval. An interval end that is not 0
    but would print as 0.000 gets the decimals that show its sign (`interval_end`): [0.0002, 0.014] adds to the
    recipe, [-0.0001, 0.014] does not."""
    def fixed(x: Any) -> str | None:
        f = finite(x)
        return None if f is None else f"{f + 0.0:.{DIGITS}f}".replace(f"-0.{'0' * DIGITS}", f"0.{'0' * DIGITS}")

    def end(x: Any) -> str | None:
        f = finite(x)
        return None if f is None else interval_end(f + 0.0, DIGITS)
    ends = [end(lo), end(hi)]
    return fixed(v) or DASH, "" if None in ends else f"[{ends[0]}, {ends[1]}]"


def rank_text(rank: Any, missing: str = MISSING) -> str:
    """A rank (or a mean rank, a baseline's place) as an integer when it is one, else with one decimal (17.5);
    `missing` for an unranked entry."""
    r = finite(rank)
    if r is None:
        return missing
    return str(int(r)) if r.is_integer() else f"{r:.1f}"


class Footnotes:
    """Numbered reasons of the refused cells of one table: a cell shows REFUSED[n], the table's foot says why."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, reason: str) -> str:
        """The marker of a refused cell (one number per distinct reason)."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"{REFUSED}[{self.reasons.index(reason) + 1}]"

    def lines(self) -> list[str]:
        """The footnotes, one per reason."""
        return [f"{REFUSED}[{i}] refused: {r}" for i, r in enumerate(self.reasons, 1)]


def score_cell(v: Any, lo: Any = None, hi: Any = None, *, refused: Any = None, notes: Footnotes | None = None,
               digits: int = TABLE_DIGITS) -> str:
    """A score as a table cell: the number with its interval (when both ends are given), or the refusal marker
    with a footnote when the score is refused."""
    if isinstance(refused, str) and refused:
        return notes.mark(refused) if notes is not None else REFUSED
    return number(v, lo, hi, digits=digits)
