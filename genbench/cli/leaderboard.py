"""`genbench leaderboard`: the ranked table of every zoo in the terminal, as csv, json or markdown, or as a page."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ..defaults import SHIPPED_RESULTS
from ..errors import GenbenchError
from ..leaderboard.format import TEXT_FORMATS
from ..scoring.spec import DEFAULT_SORT
from .app import console, leaderboard_app

FORMATS = ("table", *TEXT_FORMATS)
STYLES = {"note": "dim", "warning": "yellow"}


@leaderboard_app.callback()
def leaderboard_cmd(ctx: typer.Context,
                    zoo: Optional[str] = typer.Option(None, "--zoo", help="one zoo (default: every zoo with records)"),
                    sort: str = typer.Option(DEFAULT_SORT, help="score to rank by, e.g. kfold_r2, adj_r2, tau, psi"),
                    fmt: str = typer.Option("table", "--format", help="table, csv, json or markdown"),
                    html: Optional[Path] = typer.Option(None, "--html", help="also write the static web page here"),
                    results: Optional[list[Path]] = typer.Option(None, "--results", help="a folder of records; "
                                                                 "repeat for several (default: the shipped "
                                                                 f"{SHIPPED_RESULTS} and $GENBENCH_HOME/results)"),
                    ) -> None:
    """Ranked table per zoo (rank groups: paired bootstrap of the k-fold R^2 difference with the group's leader;
    baseline rows marked, unnumbered; equivalent entries shown once) and the mean rank across zoos; the user's own
    records (any folder but the shipped one) are marked local, failed ones are listed below the ranking."""
    if ctx.invoked_subcommand is not None:
        return
    from ..leaderboard.columns import score_spec
    from ..leaderboard.export import export_text, leaderboard_table, view_notes
    from ..leaderboard.standings import rank_records
    from ..leaderboard.terminal import print_leaderboard, print_notes
    from ..record import shown_records

    if fmt not in FORMATS:
        raise GenbenchError(f"--format must be one of {FORMATS}, got {fmt!r}")
    score_spec(sort)  # an unknown score fails here, with a suggestion
    stderr = Console(stderr=True)  # notes go to stderr: stdout may be csv or json
    records = shown_records(results, zoo, say=lambda text, kind: stderr.print(text, style=STYLES[kind], markup=False,
                                                                              highlight=False))
    ranked = rank_records(records, sort)
    table, notes = leaderboard_table(records, sort, ranked=ranked), view_notes(ranked, sort, records=records)
    if fmt == "table":
        print_leaderboard(console, table, ranked, sort, notes)
    else:
        sys.stdout.write(export_text(table, fmt, notes))
        if fmt != "markdown":  # csv and json are data: what they need said goes to stderr
            print_notes(notes, stderr, per_zoo=True)
    if html is not None:
        from ..leaderboard import ablation_tables, write_site

        index = write_site(records, html, sort=sort, ablation=ablation_tables(records), progress=True)
        console.print(f"leaderboard page: {index}")
