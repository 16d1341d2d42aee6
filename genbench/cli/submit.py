"""`genbench submit`: a submitted measure scored in the sandbox, its records written and summarised."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..defaults import AUDIT_ZOO, BUDGET_S, DEFAULT_ZOO, N_BOOT
from ..errors import GenbenchError
from ..leaderboard.format import DIGITS, number
from .app import app, console
from .options import AllowPartial, BudgetS, Device, NBoot, ResultsOut, check_limits


@app.command("submit")
def submit_cmd(folder: Path = typer.Argument(..., help="submission folder: submissions/NAME (measure.py + submission.yaml)"),
               zoo: Optional[list[str]] = typer.Option(None, "--zoo", help="zoo(s) to score on (default: the "
                                                       f"submission's `zoos`, else {DEFAULT_ZOO})"),
               budget_s: BudgetS = BUDGET_S,
               memory_gb: float = typer.Option(4.0, "--memory-gb", help="memory cap of the child process, in GB"),
               timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                                         help="wall-clock limit of the whole run (default: generous, "
                                                              "from the number of models and the budget)"),
               results: ResultsOut = None,
               no_audit: bool = typer.Option(False, "--no-audit", help="skip the fragility audit"),
               audit_zoo: str = typer.Option(AUDIT_ZOO, "--audit-zoo", help="zoo for the fragility audit"),
               device: Device = None,
               n_boot: NBoot = N_BOOT,
               allow_partial: AllowPartial = False,
               unsandboxed: bool = typer.Option(False, "--unsandboxed", help="run the submitted code without the "
                                                "bubblewrap sandbox, where bwrap cannot run (it then sees everything "
                                                "you can; its records say so and never verify)"),
               ) -> None:
    """Score a submitted measure in a child process (time budget, memory cap) and write its result records."""
    from ..entries.submit import load_submission, submit, summarize
    from ..leaderboard.columns import HEADLINE, score_spec
    from ..leaderboard.standings import partial_note
    from ..leaderboard.verdict import entry_verdict
    from ..record import Record

    check_limits(seconds={"--budget-s": budget_s, "--memory-gb": memory_gb, "--timeout-s": timeout_s},
                  counts={"--n-boot": n_boot})  # submit() checks them too; here before anything is printed
    sub = load_submission(folder)
    console.print(f"submission [bold]{sub.name}[/bold]: {sub.title} (entry {sub.entry}), "
                  f"zoos {', '.join(zoo or sub.zoos)}", highlight=False)

    def echo(text: str, kind: str) -> None:
        if kind == "stage":
            console.print(f"  -> {text}", highlight=False, markup=False)
        else:
            console.print(f"     | {text}", style="dim", highlight=False, markup=False)

    paths = submit(folder, zoo or None, results_root=results, budget_s=budget_s, memory_gb=memory_gb,
                   timeout_s=timeout_s, audit_zoo=None if no_audit else (audit_zoo or None), device=device,
                   n_boot=n_boot, echo=echo, allow_partial=allow_partial, unsandboxed=unsandboxed)
    ranked = _ranked_beside_the_shipped(results)
    failed = 0
    for path in paths:
        rec = Record.read(path)
        zname = rec.zoo_name
        if not rec.ok:
            failed += 1
            console.print(f"[red]{zname}: FAILED[/red] {rec.failure}", highlight=False)
        else:
            s = summarize(rec)
            headline = "  ".join(f"{score_spec(k).ascii} {number(*s[k], digits=DIGITS)}"
                                 for k in HEADLINE)
            colour, note = ("green", "") if rec.zoo_complete else ("yellow", f"  ({partial_note(rec)})")
            audit = "skipped (--no-audit)" if no_audit else s["verdict"]
            console.print(f"[{colour}]{zname}: ok[/{colour}]  {headline}  audit: {audit}{note}", highlight=False)
            for line in entry_verdict(rec, ranked):
                console.print(f"  {line}", highlight=False, markup=False)
        console.print(f"  record: {path}", highlight=False)
    if failed < len(paths):
        console.print("`genbench leaderboard` ranks it beside the shipped records (marked local: not verified); "
                      "`genbench leaderboard add RECORD` verifies it and adds it to them", markup=False,
                      highlight=False)
    if failed:
        raise typer.Exit(1)


def _ranked_beside_the_shipped(results: Path | None) -> list:
    """Every record `genbench leaderboard` would rank beside the new ones (the shipped ones and the user's folder),
    ranked by the k-fold R^2."""
    from ..leaderboard.standings import rank_records
    from ..paths import results_dir, shipped_results_dir
    from ..record import shown_records

    folders = [f for f in (shipped_results_dir(), results or results_dir()) if f is not None and f.is_dir()]
    try:
        return rank_records(shown_records(folders, say=lambda text, kind: None))
    except GenbenchError as e:  # the new records are written; only their place among the others cannot be said
        console.print(f"cannot rank the new records beside the others: {e}", style="yellow", highlight=False,
                      markup=False)
        return []
