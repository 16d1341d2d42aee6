"""The `genbench` command's typer apps, the root and its groups, and the one console; cli/'s modules add commands."""
from __future__ import annotations

import os
import re
from typing import Any

import click
import typer
import typer.rich_utils
from rich.console import Console
from rich.text import Text
from typer.core import TyperArgument, TyperGroup, TyperOption

WORKFLOW = ("zoo", "measures", "evaluate", "score", "audit", "submit", "leaderboard", "verify")
"""The commands in the order of the work: get a zoo, write a measure, evaluate, score, audit, submit, rank, verify."""


class WorkflowGroup(TyperGroup):
    """The root group: its commands listed in the order of the workflow (WORKFLOW), not of registration."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (WORKFLOW.index(n) if n in WORKFLOW else len(WORKFLOW), names.index(n)))


def _flag_type(self: TyperOption, ctx: click.Context) -> str | None:
    """A boolean flag takes no value, so its help shows no type (typer would print `--no-audit <bool>`); an option
    taken several times shows its one value's type, `--zoo <str> (repeatable)`, not `<list[str]>`."""
    if self.is_flag:
        return None
    shown = _value_type(self, ctx)
    one = _one_of_list(shown)
    return shown if one is None else f"{one} (repeatable)"


def _argument_type(self: TyperArgument, ctx: click.Context) -> str | None:
    """An argument of several values shows one value's type (its name already ends in '...')."""
    shown = _argument_value_type(self, ctx)
    return _one_of_list(shown) or shown


def _one_of_list(shown: str | None) -> str | None:
    """'<str>' for typer's '<list[str]>', None for any other type."""
    found = re.fullmatch(r"<list\[(\w+)\]>", shown or "")
    return f"<{found.group(1).lower()}>" if found else None


def _usage_name(self: TyperArgument) -> str:
    """An argument in the usage line as click writes it, RECIPE, [PATTERN] or RECORDS... (typer writes {recipe})."""
    name = self.display_name_raw.upper()
    return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")


_value_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]
_argument_value_type = TyperArgument.display_type_rich
TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign]
TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
_help_text = typer.rich_utils._make_rich_text


def _folding_help_text(**kwargs: Any) -> Any:
    """Help text that wraps a word longer than its column onto the next line (typer's cuts it with an ellipsis)."""
    text = _help_text(**kwargs)
    if isinstance(text, Text):
        text.overflow = "fold"
    return text


typer.rich_utils._make_rich_text = _folding_help_text

app = typer.Typer(help="genbench: which generalization measures predict the generalization gap?",
                  epilog="The workflow: genbench zoo build demogen-nin-mnist1d; genbench submit submissions/NAME; "
                         "genbench leaderboard --mine.",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=WorkflowGroup)
zoo_app = typer.Typer(help="Build, inspect and verify model zoos.", no_args_is_help=True)
app.add_typer(zoo_app, name="zoo")
measures_app = typer.Typer(help="List the registered measures and run their conformance suite.", no_args_is_help=True)
app.add_typer(measures_app, name="measures")
leaderboard_app = typer.Typer(help="Rank the scored measures (the table, a web page), compute and publish result "
                                   "records.", invoke_without_command=True)
app.add_typer(leaderboard_app, name="leaderboard")


def drop_bad_width() -> None:
    """Forget a COLUMNS that is no positive width (COLUMNS=0 made rich wrap every line, errors included, to nothing)
    so the console measures the terminal instead."""
    width = os.environ.get("COLUMNS")
    if width is not None and not (width.strip().isdigit() and int(width) > 0):
        del os.environ["COLUMNS"]


drop_bad_width()
console = Console()
