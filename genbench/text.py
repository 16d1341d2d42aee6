"""One sanitiser for every untrusted string that reaches a terminal: a submission's metadata, a record's fields, a
measure's output or error. Control and bidirectional characters are shown escaped, never acted on; rich markup is
shown literally; the length is capped with a count of what was cut."""
from __future__ import annotations

import unicodedata

TEXT_LIMIT = 200   # characters of one untrusted field shown on a terminal line
REASON_LIMIT = 600  # characters of a failure's reason on the terminal: genbench's own reasons fit whole
EXCERPT_LIMIT = 60  # characters of a file's or a field's content an error message quotes
# Characters that act on a terminal or hide text rather than show it: every control (C0 but tab and newline, DEL, C1)
# and format character (the bidirectional marks, embeddings, overrides and isolates, the zero-width ones, the tag
# characters), the line and paragraph separators, and what no font draws (unassigned, private use, surrogates).
_HIDDEN = frozenset(("Cc", "Cf", "Cn", "Co", "Cs", "Zl", "Zp"))


def _shown(ch: str) -> str:
    """A character that must not act on a terminal, written as its escape (`\\x1b`, `\\u202e`, `\\U000e0041`)."""
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _safe_char(ch: str, newlines: bool) -> str:
    if ch == "\t" or (ch == "\n" and newlines):
        return ch
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    return _shown(ch) if unicodedata.category(ch) in _HIDDEN else ch


def plain_text(value: object, *, limit: int | None = TEXT_LIMIT, newlines: bool = False) -> str:
    """`value` as text that is safe to print: unsafe characters escaped (newlines too unless `newlines`), other
    non-printable characters (unassigned, private use, surrogates) escaped, the length capped at `limit` with
    '... (N more characters)'. No rich markup is escaped here: use `safe_text` for what rich renders."""
    s = str(value)
    cut = 0
    if limit is not None and len(s) > limit:
        cut, s = len(s) - limit, s[:limit]
    s = "".join(c if c.isascii() and c.isprintable() else _safe_char(c, newlines) for c in s)
    return s + (f"... ({cut} more characters)" if cut else "")


def safe_text(value: object, *, limit: int | None = TEXT_LIMIT, newlines: bool = False) -> str:
    """`plain_text(value)` with rich markup escaped, for a string printed through a rich console or table."""
    from rich.markup import escape
    return escape(plain_text(value, limit=limit, newlines=newlines))


def excerpt(value: object, limit: int = EXCERPT_LIMIT) -> str:
    """A short, escaped quotation of untrusted content for an error message: its repr (quoted, control characters
    escaped) capped at `limit` characters."""
    return plain_text(repr(value), limit=limit)


def interval_end(e: float, digits: int) -> str:
    """An interval's end with `digits` decimals, or with as many more as show its sign when `digits` would print a
    number that is not 0 as 0.000 or -0.000: whether an interval reaches 0 is what a reader reads it for."""
    shown, more = f"{e:.{digits}f}", digits
    while e != 0 and float(shown) == 0 and more < 15:
        more += 1
        shown = f"{e:.{more}f}"
    return shown
