"""The `genbench` command's typer apps, the root and its groups, and the one console; cli/'s modules add commands."""
from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(help="genbench: which generalization measures predict the generalization gap?",
                  no_args_is_help=True, pretty_exceptions_enable=False)
zoo_app = typer.Typer(help="Build, inspect and verify model zoos.", no_args_is_help=True)
app.add_typer(zoo_app, name="zoo")
measures_app = typer.Typer(help="List the registered measures and run their conformance suite.", no_args_is_help=True)
app.add_typer(measures_app, name="measures")
leaderboard_app = typer.Typer(help="Rank the scored measures (the table, a web page), compute and publish result "
                                   "records.", invoke_without_command=True)
app.add_typer(leaderboard_app, name="leaderboard")
console = Console()
