"""The `genbench` command (typer): one module per command group, each command parsing its options, calling one
public function and printing; `python -m genbench` via __main__.py."""
from __future__ import annotations

import sys

from rich.console import Console

from ..errors import GenbenchError
from ..harness.malloc import keep_freed_memory
from . import zoo, measures, leaderboard, entries, analysis, submit  # noqa: F401,E401  (registers the commands, in order)
from .app import app, console

__all__ = ["app", "console", "main"]


def main() -> None:
    """Entry point: user errors become one readable line and exit status 2; Ctrl-C one line and status 130."""
    keep_freed_memory()
    try:
        app()
    except GenbenchError as e:
        from ..text import safe_text  # an error may quote untrusted text (a record's, a submission's): escaped
        Console(stderr=True).print(f"[bold red]error:[/bold red] {safe_text(e, limit=4000, newlines=True)}",
                                   highlight=False)
        sys.exit(2)
    except (KeyboardInterrupt, SystemExit) as e:  # Ctrl-C: typer exits 130 without a word; one line says what is kept
        if isinstance(e, SystemExit) and e.code != 130:
            raise
        Console(stderr=True).print(_said(e), style="yellow", highlight=False, markup=False)
        sys.exit(130)


def _said(e: BaseException) -> str:
    """What an interruption keeps: the line of a command that said it (errors.Interrupted, which typer turns into a
    SystemExit whose context chain holds it), else the general one."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(getattr(seen, "said", None), str):
            return seen.said
        seen = seen.__context__
    return INTERRUPTED


INTERRUPTED = ("interrupted: every file is written whole, so nothing half-written is left; a zoo build keeps the "
               "models it finished and an evaluation the values it computed: run the same command again to go on "
               "(an import starts over)")
