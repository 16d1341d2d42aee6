"""genbench.text, the one sanitiser of untrusted text on a terminal: each class of character that acts on a terminal
or hides text is planted and comes out escaped, rich markup comes out literally, and the length is capped."""
from __future__ import annotations

import unicodedata

import pytest
from rich.console import Console

from genbench.text import EXCERPT_LIMIT, excerpt, plain_text, safe_text

# one of each class: (the character, its escape)
PLANTED = {
    "C0 escape (CSI start)": ("\x1b", "\\x1b"),
    "C0 bell": ("\x07", "\\x07"),
    "carriage return": ("\r", "\\r"),
    "backspace": ("\x08", "\\x08"),
    "DEL": ("\x7f", "\\x7f"),
    "C1 CSI": ("\x9b", "\\x9b"),
    "C1 next line": ("\x85", "\\x85"),
    "bidi override RLO": ("\u202e", "\\u202e"),
    "bidi embedding LRE": ("\u202a", "\\u202a"),
    "bidi isolate RLI": ("\u2067", "\\u2067"),
    "arabic letter mark": ("\u061c", "\\u061c"),
    "zero-width space": ("\u200b", "\\u200b"),
    "byte order mark": ("\ufeff", "\\ufeff"),
    "line separator": ("\u2028", "\\u2028"),
    "paragraph separator": ("\u2029", "\\u2029"),
    "tag character": ("\U000e0041", "\\U000e0041"),
    "private use": ("\ue000", "\\ue000"),
    "unassigned": ("\U0010fffe", "\\U0010fffe"),
    "surrogate": ("\ud800", "\\ud800"),
}


@pytest.mark.parametrize("cls", sorted(PLANTED))
def test_each_class_of_character_is_shown_escaped_never_acted_on(cls):
    ch, escaped = PLANTED[cls]
    for show in (plain_text, safe_text):
        out = show(f"a{ch}b")
        assert ch not in out and out == f"a{escaped}b", (cls, out)
        assert all(unicodedata.category(c)[0] != "C" or c == "\t" for c in out)


def test_newlines_are_escaped_unless_allowed_and_printable_text_is_kept():
    assert plain_text("one\ntwo") == "one\\ntwo" and plain_text("one\ntwo", newlines=True) == "one\ntwo"
    kept = "Ünïcödé — 名前 ε≤δ tab\there"
    assert plain_text(kept) == kept and safe_text(kept) == kept


def test_rich_markup_is_shown_literally_by_safe_text():
    console = Console(record=True, width=200, color_system="truecolor", force_terminal=True)
    planted = "[bold red]title[/bold red] [link=https://evil.example]click[/link] \x1b[2J"
    console.print(safe_text(planted))
    shown = console.export_text(styles=False)
    assert "[bold red]title[/bold red]" in shown and "[link=https://evil.example]click[/link]" in shown
    assert "\\x1b[2J" in shown
    styled = console.export_text(styles=True)
    assert "\x1b[1m" not in styled and "\x1b]8;" not in styled  # no bold, no hyperlink: the markup did not act


def test_the_length_is_capped_with_a_count_of_what_was_cut():
    out = plain_text("x" * 1000, limit=50)
    assert out == "x" * 50 + "... (950 more characters)"
    assert plain_text("x" * 1000, limit=None) == "x" * 1000
    assert len(plain_text("\x1b" * 10_000)) < 4 * 200 + 40  # capped before escaping: at most 4 characters each


def test_an_excerpt_is_short_quoted_and_escaped():
    out = excerpt("secret line\x1b]0;pwned\x07" + "y" * 500)
    assert out.startswith("'secret line\\x1b]0;pwned\\x07") and len(out) <= EXCERPT_LIMIT + 30
    assert "\x1b" not in out and "\x07" not in out and "more characters" in out


def test_a_records_command_line_names_only_the_settings_that_are_not_the_default():
    from genbench.record import command_line
    base = "genbench leaderboard run norm.params --zoo z"
    assert command_line(base, ("--n-boot", 1000, 1000), ("--allow-partial", False, False)) == base
    assert command_line(base, ("--no-audit", True, False), ("--n-boot", 20, 1000), ("--budget-s", 30.0, 300.0),
                        ("--budget-s", 0.5, 300.0)) == f"{base} --no-audit --n-boot 20 --budget-s 30 --budget-s 0.5"
    assert command_line(base, ("--audit-zoo", "my zoo", "auto")) == f"{base} --audit-zoo 'my zoo'"
