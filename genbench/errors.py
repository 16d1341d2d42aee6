"""Errors a user can act on, and the "did you mean" suggestions that go with unknown names."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class GenbenchError(ValueError):
    """An error caused by the user's input; its message names the problem and the fix."""


def did_you_mean(name: str, known: Iterable[str], *, what: str, hint: str = "") -> GenbenchError:
    """Build an error for an unknown `name`, listing the closest of the `known` names."""
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    msg = f"unknown {what} {name!r}."
    if close:
        msg += " Did you mean " + " or ".join(repr(c) for c in close) + "?"
    elif known:
        msg += " Known: " + ", ".join(known) + "."
    else:
        msg += f" No {what}s are available."
    if hint:
        msg += " " + hint
    return GenbenchError(msg)
