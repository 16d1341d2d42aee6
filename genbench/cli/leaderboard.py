"""`genbench leaderboard`: the ranked table of every zoo in the terminal, as csv, json or markdown, or as a page."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ..defaults import BUDGET_S, N_BOOT, SHIPPED_RESULTS
from ..errors import GenbenchError
from ..leaderboard.format import TEXT_FORMATS
from ..scoring.spec import DEFAULT_SORT
from ..text import safe_text
from .app import console, leaderboard_app
from .options import Device, Submissions

FORMATS = ("table", *TEXT_FORMATS)
STYLES = {"note": "dim", "warning": "yellow"}


EXAMPLE = ("Examples: genbench leaderboard (the official zoos); genbench leaderboard --mine (your own records); "
           "genbench leaderboard --zoo mnist1d-demogen (one zoo, every column); genbench leaderboard --html site "
           "(the web page)")


@leaderboard_app.callback(epilog=EXAMPLE)
def leaderboard_cmd(ctx: typer.Context,
                    zoo: Optional[str] = typer.Option(None, "--zoo", help="one zoo, its full table (default: the "
                                                      "official zoos at a glance)"),
                    every: bool = typer.Option(False, "--all", help="every zoo's full table, official or not"),
                    mine: bool = typer.Option(False, "--mine", help="only your own (local) records, ranked among "
                                              "all"),
                    explain: bool = typer.Option(False, "--explain", help="the long legend under the view: what "
                                                 "groups, baselines, claims and fragility labels mean (--all and "
                                                 "--zoo always print it)"),
                    sort: str = typer.Option(DEFAULT_SORT, help="score to rank by, e.g. kfold_r2, adj_r2, tau, psi"),
                    fmt: Optional[str] = typer.Option(None, "--format", help="table, csv, json or markdown "
                                                      "(default: table, none with --html)"),
                    html: Optional[Path] = typer.Option(None, "--html", help="write the static web page here"),
                    results: Optional[list[Path]] = typer.Option(None, "--results", help="a folder of records; "
                                                                 "repeat for several (default: the shipped "
                                                                 f"{SHIPPED_RESULTS} and $GENBENCH_HOME/results)"),
                    ) -> None:
    """Ranked tables (rank groups: paired bootstrap of the k-fold R^2 difference with the group's leader; baseline
    rows marked, unnumbered; equivalent entries shown once; tied scores share a rank, =N) and the mean rank across
    the official zoos. By default the official zoos at a glance; --all or --zoo NAME the full tables. Your own
    records (any folder but the shipped one) are marked local; failed ones are listed below the ranking."""
    if ctx.invoked_subcommand is not None:
        return
    from ..defaults import OFFICIAL_ZOOS
    from ..leaderboard.columns import score_spec
    from ..leaderboard.export import alias_notes, export_text, leaderboard_table, view_notes
    from ..leaderboard.standings import rank_records
    from ..leaderboard.terminal import official_view, print_leaderboard, print_notes, say
    from ..record import shown_records

    fmt = fmt or (None if html is not None else "table")
    if fmt is not None and fmt not in FORMATS:
        raise GenbenchError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if every and zoo is not None:
        raise GenbenchError("--all shows every zoo; --zoo NAME one of them: give one of the two")
    score_spec(sort)  # an unknown score fails here, with a suggestion
    if html is not None:  # before the records are read and the table printed
        from ..leaderboard.site import check_site_folder
        from ..paths import check_writable
        check_writable(html.parent)
        check_site_folder(html)
    stderr = Console(stderr=True)  # notes go to stderr: stdout may be csv or json
    records = shown_records(results, zoo, say=lambda text, kind: stderr.print(text, style=STYLES[kind], markup=False,
                                                                              highlight=False))
    ranked = rank_records(records, sort)
    table, notes = leaderboard_table(records, sort, ranked=ranked), view_notes(ranked, sort, records=records)
    if mine and not table.empty:
        if not table["local"].any():
            from ..paths import results_dir
            held = [] if results else sorted(results_dir().glob(f"{zoo or '*'}/*.json"))
            say(console, f"no local records shown: your {len(held)} record(s) in {results_dir()} repeat shipped records "
                "(shown in their place) or could not be read (the notes above say which)" if held else
                "no local records: `genbench submit submissions/NAME` writes yours to $GENBENCH_HOME/results")
            return
        table = table[table["local"].astype(bool)]
        notes.aliases = alias_notes([r for r in ranked if r.local], records)  # of the rows shown
    official = [z for z in OFFICIAL_ZOOS if not table.empty and (table["zoo"] == z).any()]
    if fmt == "table":
        if official and not (zoo or every or mine):
            official_view(console, table, ranked, sort, notes, official, explain=explain)
            others = [str(z) for z in dict.fromkeys(table["zoo"]) if z not in official]
            if others:
                local = table[table["local"].astype(bool) & table["zoo"].isin(others)]
                say(console, f"also: {', '.join(others)} (not official): --all shows every zoo, --zoo NAME one"
                    + (f"; {len(local)} of your local records are there: --mine" if len(local) else ""))
        else:
            print_leaderboard(console, table, ranked, sort, notes, explain=explain or every or bool(zoo),
                              local_only=mine, **({"off_official": _off_official()} if mine else {}))
    elif fmt is not None:
        sys.stdout.write(export_text(table, fmt, notes))
        if fmt != "markdown":  # csv and json are data: what they need said goes to stderr
            print_notes(notes, stderr, per_zoo=True)
    if html is not None:
        from ..leaderboard import ablation_tables, write_site

        index = write_site(records, html, sort=sort, ablation=ablation_tables(records), progress=True)
        console.print(f"leaderboard page: {index}", markup=False, highlight=False)


def _off_official() -> str:
    """What --mine says when none of the user's records is on an official zoo: how to score there, and how to get
    the official zoos not built here first (submit would otherwise score on the demo zoo again)."""
    from ..entries.submit.zoos import missing_line, official_built
    from ..leaderboard.terminal import MINE_OFF_OFFICIAL
    built, missing = official_built()
    if built:
        return MINE_OFF_OFFICIAL + (f" ({', '.join(built)}); {missing_line(tuple(missing))}" if missing else "")
    return (f"across the official zoos: none of your records is on one, and no official zoo is built here "
            f"(`genbench submit FOLDER` would score on the demo zoo again); {missing_line(tuple(missing))}, then "
            "`genbench submit FOLDER` scores on them")


@leaderboard_app.command("private", epilog="Example: genbench leaderboard private "
                         "leaderboard/results/demogen-nin-mnist1d/my_measure.json")
def leaderboard_private(records: list[Path] = typer.Argument(..., help="result record files, e.g. the shipped "
                                                             f"{SHIPPED_RESULTS}/ZOO/NAME.json"),
                        device: Device = None, submissions: Submissions = None,
                        max_n_boot: int = typer.Option(N_BOOT, "--max-n-boot", help="the most bootstrap resamples "
                                                       "a record may ask for"),
                        max_budget_s: float = typer.Option(BUDGET_S, "--max-budget-s", help="the longest per-model "
                                                           "budget a submission's record may ask for, in seconds"),
                        ) -> None:
    """Score records already added on the private training of their zoo's grid (maintainers only: it needs the
    secret, $GENBENCH_PRIVATE_TRAINING) and write into each its private block: aggregate scores and a salted
    commitment to the private zoo, nothing per model. A submission is re-run in its sandbox, as `add` re-runs it."""
    from ..entries.private import add_private
    from ..zoo.private import load_secret
    from .entries import _limits

    secret = load_secret()  # none set, or a public index: one line saying how to set it
    limits = _limits(max_n_boot, max_budget_s)
    failed = 0
    for path in records:
        try:
            block = add_private(path, secret=secret, submissions=submissions, device=device, limits=limits)
        except GenbenchError as e:
            failed += 1
            console.print(f"[red]no private score[/red] {safe_text(path, limit=None)}: {safe_text(e, limit=1000)}",
                          highlight=False)
            continue
        console.print(f"{safe_text(path, limit=None)}: {private_line(path, block)}", highlight=False)
    if failed:
        raise typer.Exit(1)


def private_line(path: Path, block: dict) -> str:
    """One line on a record's private score: beside its public one, and whether it is flagged."""
    from ..entries.private import private_standing
    from ..leaderboard.format import number
    from ..leaderboard.verdict import training_noise
    from ..record import Record, load_records

    if block.get("status") != "ok":
        return f"private run on {block.get('zoo')} failed (no private score)"
    folder = Path(path).parent  # the zoo's records beside it: their spread over the public trainings is its noise
    beside = load_records(folder.parent, zoo=folder.name, skipped=[])
    standing = private_standing(Record.read(path), training_noise([r for r in beside if r.ok]))
    if standing is None:
        return f"private scores on {block.get('zoo')} written (no k-fold R2 to set beside the public one)"
    flag = "; FLAGGED: does not hold on the private training" if standing["flagged"] else ""
    return (f"private k-fold R2 {number(standing['private'])} on {standing['zoo']} (public "
            f"{number(standing['public'])}, difference {number(standing['difference'])}; training noise "
            f"{number(standing['noise'])}){flag}")


def private_after_add(dest: str, *, submissions: Path | None, device: str | None, limits: object) -> None:
    """`leaderboard add`'s private step for a record just added at `dest`: its private block made and written when
    the secret is set and the private zoo is built, else one line saying why not."""
    from ..entries.private import add_private, private_zoo_of
    from ..record import Record
    from ..zoo.private import PRIVATE_ENV, load_secret

    rec = Record.read(dest)
    if rec.baseline:
        return  # baseline rows are references: no private score
    secret = load_secret(required=False)
    why = f"no secret is set here (${PRIVATE_ENV}; maintainers only)" if secret is None else private_zoo_of(rec)[1]
    if why is None:
        try:
            block = add_private(dest, secret=secret, submissions=submissions, device=device, limits=limits)
            console.print(f"  {private_line(Path(dest), block)}", highlight=False)
            return
        except GenbenchError as e:
            why = str(e)
    console.print(f"  no private score: {safe_text(why, limit=600)}; `genbench leaderboard private` adds it later",
                  style="dim", highlight=False)
