"""Errors a user can act on, and the "did you mean" suggestions that go with unknown names."""
from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any


class GenbenchError(ValueError):
    """An error caused by the user's input; its message names the problem and the fix."""


def did_you_mean(name: str, known: Iterable[str], *, what: str, hint: str = "") -> GenbenchError:
    """Build an error for an unknown `name`, listing the closest of the `known` names (at most 20 of them); a name
    that is no string is said to be one."""
    if not isinstance(name, str):
        return GenbenchError(f"a {what.rstrip(':')} is a string, got {type(name).__name__} {name!r}")
    known = sorted(set(known))
    lowered = {k.lower(): k for k in known}  # NORM.PATH is norm.path
    close = [lowered[name.lower()]] if name.lower() in lowered else \
        [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)]
    msg = f"unknown {what} {name!r}."
    if close:
        msg += " Did you mean " + " or ".join(repr(c) for c in close) + "?"
    elif len(known) > 20:  # a zoo's model ids: hundreds
        msg += f" Known: {len(known)} of them, e.g. " + ", ".join(known[:5]) + "."
    elif known:
        msg += " Known: " + ", ".join(known) + "."
    else:
        msg += f" No {what}s are available."
    if hint:
        msg += " " + hint
    return GenbenchError(msg)


def is_positive(value: Any) -> bool:
    """Whether `value` is a positive, finite number: not 0, negative, nan, inf, None or a bool."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def check_seconds(what: str, value: Any) -> None:
    """Refuse a time budget that is not a positive finite number (None: no budget); a zero, negative or nan budget
    would turn every model into a failure."""
    if value is not None and not is_positive(value):
        raise GenbenchError(f"{what} must be a positive finite number of seconds, got {value!r}")


def check_count(what: str, value: Any) -> None:
    """Refuse a count (resamples, folds, repeats) that is not an integer of at least 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise GenbenchError(f"{what} must be at least 1, got {value!r}")


def check_n_boot(what: str, value: Any) -> None:
    """Refuse a count of bootstrap resamples below 1 or above the most genbench draws (each resample is a row of
    weights over the models, held in memory), before any work."""
    from .defaults import MAX_N_BOOT, N_BOOT
    check_count(what, value)
    if value > MAX_N_BOOT:
        raise GenbenchError(f"{what} is at most {MAX_N_BOOT} (each resample is a row of weights over the models, held "
                            f"in memory; the default is {N_BOOT}), got {value!r}")


def check_seed(what: str, value: Any) -> None:
    """Refuse a seed that is not a whole number (it seeds torch's generators, which take integers only)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise GenbenchError(f"{what} must be a whole number, got {value!r}")


def string_list(value: Any) -> list[str] | None:
    """`value` as a list of strings (a lone string is a list of one), or None when it is not one: the names and glob
    patterns the public functions take."""
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else None
    return items if items is not None and all(isinstance(v, str) for v in items) else None


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C a command has already explained (what it keeps): the CLI prints `said` instead of its general line."""

    def __init__(self, said: str):
        super().__init__(said)
        self.said = said
