"""Every command's help ends with an example (issue 40, item 10), found by walking the registered commands so a new
command without one fails here; `zoo info` never cuts a zoo's name or folder (item 9)."""
from __future__ import annotations

import re

import pytest
import typer

from genbench.cli import app
from test_views import run


def commands(group, path: tuple[str, ...] = ()) -> list:
    """Every command under `group` (groups included) as (the words that call it, the command); typer's own click
    classes, so a group is told by its `commands`."""
    out = []
    for name, cmd in group.commands.items():
        out.append(((*path, name), cmd))
        if hasattr(cmd, "commands"):
            out += commands(cmd, (*path, name))
    return out


ALL = commands(typer.main.get_command(app))


def test_the_walk_finds_every_command():
    names = {" ".join(p) for p, _ in ALL}
    assert {"zoo import pgdl", "leaderboard failed", "submit", "measures check", "verify"} <= names
    assert len(names) >= 25


@pytest.mark.parametrize("words", [p for p, c in ALL if not hasattr(c, "commands") or c.invoke_without_command],
                         ids=" ".join)
def test_every_command_has_an_example(monkeypatch, words):
    text = run(monkeypatch, [*words, "--help"], 100).output
    assert "Example: genbench " in text or "Examples: genbench " in text, text[-400:]
    example = text[text.index("Example"):]
    assert " ".join(words) in " ".join(example.split()), "the example runs another command"


def measures_named(epilog: str) -> list[str]:
    """The measure names and patterns ('family.variant', globs allowed) an example runs, files left out."""
    tokens = (t.strip("'\"") for t in re.findall(r"[\w.*/'\"-]+", epilog))
    return [t for t in tokens if re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z0-9_*]+", t)
            and not re.search(r"\.(py|json|ya?ml|html|parquet|csv|png|md|txt|svg|h5)$", t)]


@pytest.mark.parametrize("words", [p for p, c in ALL if measures_named(c.epilog or "")], ids=" ".join)
def test_every_measure_an_example_names_is_registered(words):
    """An example that runs `genbench audit margin.output` (no such measure) fails here."""
    from genbench.measures import list_measures
    epilog = dict(ALL)[words].epilog
    assert all(list_measures(name) for name in measures_named(epilog)), epilog
    assert measures_named("Example: genbench audit margin.output --zoo x; see measure.py") == ["margin.output"]
    assert not list_measures("margin.output")  # the planted name is one the check refuses


def test_a_command_without_an_example_is_caught(monkeypatch):
    """The guard, planted: a command registered without an epilog fails the check the test above makes."""
    extra = typer.Typer()

    @extra.command("bare")
    def bare() -> None:
        """Do nothing."""

    @extra.command("other")
    def other() -> None:
        """Do nothing else."""

    found = commands(typer.main.get_command(extra))
    assert [p for p, c in found if not c.epilog] == [("bare",), ("other",)]


@pytest.mark.parametrize("width", [80, 68])
def test_zoo_info_never_cuts_the_name_or_folder(monkeypatch, digits_zoo, width):
    out = run(monkeypatch, ["zoo", "info", str(digits_zoo.root)], width).output
    lines = out.splitlines()
    assert any(digits_zoo.name in line for line in lines), out
    assert any(str(digits_zoo.root) in line for line in lines), out  # a long folder on one (soft-wrapped) line
