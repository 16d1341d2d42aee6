"""`genbench submit`: a submitted measure scored in the sandbox, its records written and summarised."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..defaults import AUTO_AUDIT, BUDGET_S, DEFAULT_ZOO, N_BOOT
from ..errors import GenbenchError, Interrupted, is_positive
from ..leaderboard.format import DIGITS, number
from ..paths import check_writable
from .app import app, console
from .options import AllowPartial, AuditZoo, BudgetS, Device, NBoot, NoAudit, ResultsOut, audit_choice, check_limits


@app.command("submit", epilog="Example: genbench submit submissions/NAME (on the official zoos built here)")
def submit_cmd(folder: Path = typer.Argument(..., help="submission folder: submissions/NAME (measure.py + submission.yaml)"),
               zoo: Optional[list[str]] = typer.Option(None, "--zoo", help="zoo(s) to score on (default: the "
                                                       "submission's `zoos`, else the official zoos built here, else "
                                                       f"the demo zoo {DEFAULT_ZOO}, which is not official)"),
               budget_s: BudgetS = BUDGET_S,
               memory_gb: float = typer.Option(4.0, "--memory-gb", help="memory cap of the child process, in GB"),
               timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                                         help="wall-clock limit of the whole run (default: generous, "
                                                              "from the number of models and the budget)"),
               results: ResultsOut = None,
               no_audit: NoAudit = False,
               audit_zoo: AuditZoo = AUTO_AUDIT,
               device: Device = None,
               n_boot: NBoot = N_BOOT,
               allow_partial: AllowPartial = False,
               unsandboxed: bool = typer.Option(False, "--unsandboxed", help="run the submitted code without the "
                                                "bubblewrap sandbox, where bwrap cannot run (it then sees everything "
                                                "you can; its records say so and never verify)"),
               ) -> None:
    """Score a submitted measure in a child process (time budget, memory cap) and write its result records."""
    check_writable(None, results)  # before any work
    from ..entries.submit import load_submission, submit, summarize
    from ..leaderboard.columns import HEADLINE, score_spec
    from ..leaderboard.standings import partial_note
    from ..leaderboard.verdict import entry_verdict
    from ..entries.submit.api import dropped_line
    from ..entries.submit.zoos import choose_zoos
    from ..record import Record
    from ..text import plain_text, safe_text

    check_limits(seconds={"--budget-s": budget_s, "--timeout-s": timeout_s},
                  counts={"--n-boot": n_boot})  # submit() checks them too; here before anything is printed
    if not is_positive(memory_gb):
        raise GenbenchError(f"--memory-gb must be a positive finite number of GB, got {memory_gb!r}")
    audit_zoo = audit_choice(no_audit, audit_zoo)
    sub = load_submission(folder)
    choice = choose_zoos(sub, zoo)
    console.print(f"submission [bold]{safe_text(sub.name)}[/bold]: {safe_text(sub.title)} (entry "
                  f"{safe_text(sub.entry)}), zoos {safe_text(', '.join(choice.names))}"
                  + (" (the official zoos built here)" if choice.source == "official" else ""), highlight=False)
    for note in choice.notes:
        console.print(note, style="yellow", highlight=False, markup=False)

    def echo(text: str, kind: str) -> None:  # a stage quotes the measure's errors; its output is its own: escaped
        if kind == "stage":
            console.print(f"  -> {plain_text(text, limit=2000)}", highlight=False, markup=False)
        else:
            console.print(f"     | {plain_text(text, limit=1000)}", style="dim", highlight=False, markup=False)

    try:
        paths = submit(folder, zoo or None, results_root=results, budget_s=budget_s, memory_gb=memory_gb,
                       timeout_s=timeout_s, audit_zoo=audit_zoo, device=device,
                       n_boot=n_boot, echo=echo, allow_partial=allow_partial, unsandboxed=unsandboxed)
    except KeyboardInterrupt:  # what the interruption keeps, for submit: the zoos finished, not the one in progress
        raise Interrupted(INTERRUPTED) from None
    ranked = _ranked_beside_the_shipped(results, {p.parent.parent for p in paths})  # a fallback folder too
    failed = 0
    for path in paths:
        rec = Record.read(path)
        zname = rec.zoo_name
        if not rec.ok:
            failed += 1
            console.print(f"[red]{safe_text(zname)}: FAILED[/red] {safe_text(rec.failure, limit=2000)}",
                          highlight=False)
        else:
            s = summarize(rec)
            headline = "  ".join(f"{score_spec(k).ascii} {number(*s[k], digits=DIGITS)}"
                                 for k in HEADLINE)
            colour, note = ("green", "") if rec.zoo_complete else ("yellow", f"  ({partial_note(rec)})")
            audit = "skipped (--no-audit)" if audit_zoo is None else s["verdict"]
            console.print(f"[{colour}]{safe_text(zname)}: ok[/{colour}]  {headline}  audit: "
                          f"{safe_text(audit, limit=500)}{safe_text(note)}", highlight=False)
            if (dropped := dropped_line(rec)) is not None:
                console.print(f"  [yellow]{safe_text(dropped, limit=None)}[/yellow]", highlight=False)
            for line in entry_verdict(rec, ranked):  # it names the records ranked beside it: untrusted text
                console.print(f"  {plain_text(line, limit=2000)}", highlight=False, markup=False)
        console.print(f"  record: {plain_text(path, limit=None)}", highlight=False, markup=False)
    if failed < len(paths):
        console.print("`genbench leaderboard` ranks it beside the shipped records (marked local: not verified); "
                      "`genbench leaderboard add RECORD` verifies it and adds it to them", markup=False,
                      highlight=False)
    records = [Record.read(path) for path in paths]
    if paths and failed == len(paths):  # nothing to rank: what to do is to fix the measure, not to go elsewhere
        again = (records[0].command if len(records) == 1 and records[0].command else
                 f"genbench submit {folder}" + "".join(f" --zoo {z}" for z in zoo or ()))  # the same zoos again
        line = (f"no record was scored: fix what the FAILED line{'s' if failed > 1 else ''} above "
                f"say{'' if failed > 1 else 's'}, then run `{plain_text(again, limit=None)}` again")
    else:
        line = official_verdict(sub.name, [r.zoo_name for r in records], ranked, folder)
    console.print(line, style="green" if line.startswith("official verdict: mean rank") else "yellow",
                  highlight=False, markup=False)
    if failed:
        raise typer.Exit(1)


INTERRUPTED = ("submit interrupted: each zoo with a 'record written' line above keeps its record; the zoo in progress "
               "has none, and a zoo is never scored from where it stopped: run the command again (it scores every zoo "
               "again), or with --zoo naming only the zoos left")


def _ranked_beside_the_shipped(results: Path | None, written: set[Path] = frozenset()) -> list:
    """Every record `genbench leaderboard` would rank beside the new ones (the shipped ones and the user's folder, and
    the folders the new ones were `written` to), ranked by the k-fold R^2."""
    from ..leaderboard.standings import rank_records
    from ..paths import results_dir, shipped_results_dir
    from ..record import shown_records
    from ..text import plain_text

    found = (shipped_results_dir(), results or results_dir(), *sorted(written))
    folders = list(dict.fromkeys(f.resolve() for f in found if f is not None and f.is_dir()))  # each read once
    try:
        return rank_records(shown_records(folders, say=lambda text, kind: None))
    except GenbenchError as e:  # the new records are written; only their place among the others cannot be said
        console.print(f"cannot rank the new records beside the others: {plain_text(e, limit=2000)}",
                      style="yellow", highlight=False, markup=False)
        return []


def official_verdict(name: str, zoos: list[str], ranked: list, folder: Path) -> str:
    """The last line of `genbench submit`: on the official zoos, the entry's mean rank over them (the leaderboard's
    aggregate) and the official zoos it is not yet scored on, with the commands that get them and score it there; on
    any other zoo, that the zoo is not official and how to be ranked where the benchmark ranks."""
    from .. import defaults
    from ..entries.submit.zoos import get_command, official_built
    from ..leaderboard.standings import mean_ranks
    from ..text import plain_text

    official = defaults.OFFICIAL_ZOOS
    unbuilt = set(official_built()[1])

    def how(targets: list[str]) -> str:
        """The commands that score the entry on `targets`: each zoo not built here got first."""
        gets = [f"`{get_command(z)}`" for z in targets if z in unbuilt]
        run = f"`genbench submit {folder} {' '.join(f'--zoo {z}' for z in targets)}`"
        return f"{', '.join(gets)}, then {run}" if gets else run

    other = [plain_text(z, limit=100) for z in dict.fromkeys(zoos) if z not in official]
    if other:
        are = "is not an official zoo" if len(other) == 1 else "are not official zoos"
        return (f"not official: {', '.join(other)} {are}; the benchmark ranks on {', '.join(official)}: "
                f"{how(list(official))}")
    missing = [z for z in official if z not in zoos]
    later = f"; not yet scored on {', '.join(missing)}: {how(missing)}" if missing else ""
    mine = next((m for m in mean_ranks(ranked) if m.entry == name and not m.baseline), None)
    if mine is None:
        return f"official verdict: not ranked on the official zoos (its records failed or are partial){later}"
    each = ", ".join(f"{r:g} on {z}" for z, r in mine.ranks.items())
    return (f"official verdict: mean rank {mine.mean_rank:.1f} over {mine.zoos} of {len(official)} official zoos "
            f"({each}){later}")
