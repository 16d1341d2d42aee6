"""`genbench leaderboard run|baselines|rescore|failed|add|push` and `genbench verify`: make, re-make, re-score,
clear, add and publish records."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Column, Table

from ..defaults import AUTO_AUDIT, BUDGET_S, DEFAULT_ZOO, N_BOOT, SHIPPED_RESULTS
from ..errors import GenbenchError
from ..leaderboard.format import number
from ..paths import check_writable
from ..text import plain_text, safe_text
from .app import app, console, leaderboard_app
from .options import (AllowPartial, Atol, AuditZoo, CitedZoo, Device, NBoot, NoAudit, Private, Repo, ResultsOut,
                      Rtol, Submissions, Trainings, Zoos, audit_choice, check_limits)
from .zoo import report_push

if TYPE_CHECKING:
    from ..entries.verify import Limits, Verification
    from ..record import Record
    from ..zoo.storage import Zoo

# what a record may ask verify for: its own values, bounded by these (a record names what to re-run, not what to spend)
MaxNBoot = Annotated[int, typer.Option("--max-n-boot", help="the most bootstrap resamples a record may ask for (a "
                                       "record asking for more is re-run with this many, and says so)")]
MaxBudgetS = Annotated[float, typer.Option("--max-budget-s", help="the longest per-model budget a submission's record "
                                           "may ask for, in seconds (a longer one is re-run with this, and says so)")]


def _limits(max_n_boot: int, max_budget_s: float) -> Limits:
    from ..entries.verify import Limits
    check_limits(seconds={"--max-budget-s": max_budget_s}, counts={"--max-n-boot": max_n_boot})
    return Limits(n_boot=max_n_boot, budget_s=max_budget_s)


@leaderboard_app.command("push",
                         epilog="Example: genbench leaderboard push leaderboard/results ORG/genbench-results")
def leaderboard_push(folder: Path = typer.Argument(..., help=f"folder of result records, e.g. {SHIPPED_RESULTS}"),
                     repo: Repo = ...,
                     private: Private = False,
                     ) -> None:
    """Publish result records (JSON) as a Hub dataset repo."""
    from ..entries.publish import push_results

    report_push(push_results(folder, repo, private=private), "result records")



@leaderboard_app.command("run", epilog="Example: genbench leaderboard run 'norm.*' --zoo demogen-nin-mnist1d")
def leaderboard_run(measures: list[str] = typer.Argument(..., help="built-in measures or glob patterns"),
                    zoo: Zoos = [DEFAULT_ZOO],
                    results: ResultsOut = None,
                    no_audit: NoAudit = False,
                    audit_zoo: AuditZoo = AUTO_AUDIT,
                    device: Device = None,
                    n_boot: NBoot = N_BOOT,
                    allow_partial: AllowPartial = False,
                    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="also write the zoo's "
                                                   "baseline rows (see `genbench leaderboard baselines`)"),
                    trainings: Trainings = None,
                    ) -> None:
    """Compute the result records of built-in measures (scores, audit, values, provenance) and write them."""
    check_writable(None, results)  # before any work
    from tqdm import tqdm

    from ..entries.run import run_entry
    from ..entries.trainings import default_trainings, training_zoos
    from ..leaderboard.standings import partial_note
    from ..measures.registry import resolve_measures
    from ..record import Record, write_record_safely
    from ..zoo import load_zoo

    check_limits(counts={"--n-boot": n_boot})
    audit_zoo = audit_choice(no_audit, audit_zoo)
    names = [m.name for m in resolve_measures(measures)]
    zoos = {z: load_zoo(z) for z in zoo}
    counts = {}
    for z, loaded in zoos.items():  # every zoo (and training) checked before the first record is computed
        loaded.require_complete(allow_partial=allow_partial)
        counts[z] = len(training_zoos(loaded, default_trainings(loaded) if trainings is None else trainings))
    said: set[str] = set()  # why an audit could not run: said in full once, then referred to
    for z, loaded in zoos.items():
        for name in tqdm(names, desc=f"records on {z}", unit="entry"):  # each record says the command that remakes it
            rec = Record(run_entry(name, loaded, audit_zoo=audit_zoo, device=device, n_boot=n_boot,
                                   allow_partial=allow_partial, trainings=counts[z], progress=True))
            path = write_record_safely(rec, results, say=warn)
            note = f", {partial_note(rec)}" if not rec.zoo_complete else ""
            verdict = rec.verdict or _unaudited(rec, said)
            with tqdm.external_write_mode():  # the line on its own, the bar drawn again below it
                console.print(f"{z} {name}: {rec.status}, k-fold R2 {number(rec.score('kfold_r2'))}, "
                              f"{verdict}{note} -> {path}", markup=False, highlight=False)
        if baselines:
            _write_baselines(loaded, results, device=device, n_boot=n_boot, allow_partial=allow_partial,
                             trainings=counts[z])


def _unaudited(rec: Record, said: set[str]) -> str:
    """'not audited', with why (the record's note: the audit zoo not built, and how to build it) the first time."""
    from ..entries.run import NO_AUDIT
    why = next((n for n in rec.notes if n.startswith(NO_AUDIT)), None)
    if why is None or not rec.ok:
        return "not audited"
    if why in said:
        return "not audited (as above)"
    said.add(why)
    return f"not audited ({plain_text(why, limit=1000)})"


def _write_baselines(zoo: Zoo, results: Path | None, *, device: str | None, n_boot: int,
                     allow_partial: bool, trainings: int | None = None) -> None:
    """Make and write the baseline rows of one zoo, one line each."""
    from ..entries.run import run_baselines
    from ..record import Record, write_record_safely

    for rec in map(Record, run_baselines(zoo, device=device, n_boot=n_boot, progress=True,
                                         allow_partial=allow_partial, trainings=trainings)):
        path = write_record_safely(rec, results, say=warn)
        said = f"k-fold R2 {number(rec.score('kfold_r2'))}" if rec.ok else f"not made: {rec.failure}"
        console.print(f"{zoo.name} {rec.name}: {said} -> {path}", markup=False, highlight=False)


@leaderboard_app.command("baselines", epilog="Example: genbench leaderboard baselines --zoo demogen-nin-mnist1d")
def leaderboard_baselines(zoo: Zoos = [DEFAULT_ZOO], results: ResultsOut = None, device: Device = None,
                          n_boot: NBoot = N_BOOT, allow_partial: AllowPartial = False,
                          trainings: Trainings = None) -> None:
    """Write the baseline rows: the gap predicted from the hyperparameters, from statistics of the weights, from
    every built-in scalar measure at once, and from the training loss and accuracy. A measure below baseline.hparams
    predicts the gap worse than the recipe alone; what it adds to the recipe is its delta R^2."""
    check_writable(None, results)  # before any work
    from ..entries.trainings import default_trainings, training_zoos
    from ..zoo import load_zoo

    check_limits(counts={"--n-boot": n_boot})
    zoos = [load_zoo(z) for z in zoo]
    counts = []
    for loaded in zoos:
        loaded.require_complete(allow_partial=allow_partial)
        counts.append(len(training_zoos(loaded, default_trainings(loaded) if trainings is None else trainings)))
    for loaded, n in zip(zoos, counts):
        _write_baselines(loaded, results, device=device, n_boot=n_boot, allow_partial=allow_partial, trainings=n)


@leaderboard_app.command("rescore", epilog="Example: genbench leaderboard rescore --zoo demogen-nin-mnist1d")
def leaderboard_rescore(results: Optional[Path] = typer.Option(None, "--results", help="folder of records to "
                                                               "re-score in place (default: $GENBENCH_HOME/results)"),
                        zoo: Optional[str] = typer.Option(None, "--zoo", help="one zoo's records (default: all)"),
                        copy: Optional[str] = typer.Option(None, "--zoo-copy", help="a copy of the zoo the records "
                                                           "cite (default: the local build, else the Hub)")) -> None:
    """Re-score records after the scoring changed (every record, of the current schema or of schema 2, which is
    upgraded): each record's scores recomputed from its own per-model values on the zoo it cites, the measure not
    run again; audits and values are kept."""
    from ..entries.rescore import rescore_folder
    from ..paths import results_dir

    root = results or results_dir()
    if not root.is_dir():
        raise GenbenchError(f"no folder of records at {root}: pass --results DIR")
    written = rescore_folder(root, zoo=zoo, zoo_path=copy,
                             say=lambda text: console.print(text, markup=False, highlight=False))
    console.print(f"re-scored {len(written)} record(s) under {root}")


@leaderboard_app.command("reaudit", epilog="Example: genbench leaderboard reaudit --results leaderboard/results "
                                            "--measure norm.params")
def leaderboard_reaudit(results: Optional[Path] = typer.Option(None, "--results", help="folder of records to "
                                                               "re-audit in place (default: $GENBENCH_HOME/results)"),
                        zoo: Optional[str] = typer.Option(None, "--zoo", help="one zoo's records (default: all)"),
                        measure: list[str] = typer.Option([], "--measure", help="only these measures' records "
                                                          "(repeatable; default: all)")) -> None:
    """Re-audit records after the audit changed: each built-in measure's fragility audit run again on the audit zoo
    its record names, its audit block replaced; scores and values are kept (the scored zoo is not needed)."""
    from ..entries.reaudit import reaudit_folder
    from ..paths import results_dir

    root = results or results_dir()
    if not root.is_dir():
        raise GenbenchError(f"no folder of records at {root}: pass --results DIR")
    written, refused = reaudit_folder(root, zoo=zoo, measures=measure or None,
                                      say=lambda text: console.print(text, markup=False, highlight=False))
    console.print(f"re-audited {len(written)} record(s) under {root}"
                  + (f"; {len(refused)} could not be (said above), left as they were" if refused else ""))
    if refused:
        raise typer.Exit(1)


@leaderboard_app.command("failed", epilog="Example: genbench leaderboard failed --remove")
def leaderboard_failed(results: Optional[Path] = typer.Option(None, "--results", help="folder of records (default: "
                                                              "$GENBENCH_HOME/results)"),
                       remove: bool = typer.Option(False, "--remove", help="delete the failure records listed")
                       ) -> None:
    """List the failure records of a results folder (entry, zoo, why it failed); --remove deletes them, so that
    the leaderboard stops listing them (the scored records stay)."""
    from ..paths import results_dir
    from ..record import load_records, record_path

    root = results or results_dir()
    failed = [r for r in load_records(root, skipped=[]) if not r.ok]
    if not failed:
        console.print(f"no failure records under {safe_text(root, limit=None)}", highlight=False)
        return
    t = Table("zoo", "entry", Column("why it failed", overflow="fold"),
              title=f"failure records under {safe_text(root, limit=None)}")
    for r in failed:  # a record's fields are untrusted text: escaped, never acted on
        t.add_row(r.shown("zoo_name"), r.shown("name"), r.shown("failure", limit=1000) or "no reason recorded")
    console.print(t, highlight=False)
    if remove:
        for r in failed:
            record_path(r, root).unlink()
        console.print(f"removed {len(failed)} failure record(s)", highlight=False)
    else:
        again = f" --results {plain_text(root, limit=None)}" if results else ""
        console.print(f"`genbench leaderboard failed --remove{again}` "
                      "deletes them", highlight=False, markup=False)


@app.command("verify", epilog="Example: genbench verify ~/.cache/genbench/results/ZOO/NAME.json")
def verify_cmd(records: list[Path] = typer.Argument(..., help="result record files (ZOO/NAME.json in a results "
                                                                 "folder), or folders of them"),
               rtol: Rtol = 1e-5, atol: Atol = 1e-8, device: Device = None, submissions: Submissions = None,
               zoo: CitedZoo = None,
               scores_only: bool = typer.Option(False, "--scores-only", help="do not repeat the fragility audit: "
                                                "compare the status, scores and per-model values only (when the "
                                                "audit zoo is not built here)"),
               max_n_boot: MaxNBoot = N_BOOT, max_budget_s: MaxBudgetS = BUDGET_S,
               ) -> None:
    """Recompute records from scratch (no cache); fail and show the differences if they do not reproduce.

    A submission's record is re-made in the sandbox from SUBMISSIONS/NAME only, and every field but the timings
    is compared."""
    from ..entries.verify import Verification, check_tolerances, misplaced, verify_record
    from ..record import Record, record_files

    check_tolerances(rtol, atol)  # once, before any record
    limits = _limits(max_n_boot, max_budget_s)
    records = record_files(records)
    said: dict[str, int] = {}
    for path in records:
        try:
            v = verify_record(path, rtol=rtol, atol=atol, device=device, submissions=submissions, zoo=zoo,
                              scores_only=scores_only, limits=limits, progress=True)
        except GenbenchError as e:  # a file that is no record: said, and the others verified
            v = Verification(str(path), problems=[str(e)])
        else:
            v.notes += [why] if (why := misplaced(Record.read(path), path)) else []
        _print_notes(v)
        # numbers that differ, or only what kept them from being recomputed
        outcome = "reproduced" if v.ok else "does not reproduce" if v.differences else "cannot verify"
        said[outcome] = said.get(outcome, 0) + 1
        if v.ok:
            what = "; scores and values only: the audit was not repeated" if scores_only else ""
            console.print(f"[green]reproduced[/green] {safe_text(path, limit=None)} (rtol {rtol:g}, atol {atol:g}"
                          f"{what})", highlight=False)
            continue
        console.print(f"[red]{outcome}[/red] {safe_text(path, limit=None)}", highlight=False)
        _print_why(v)
    if len(records) > 1:
        console.print(f"{len(records)} records: " + ", ".join(f"{n} {outcome}" for outcome, n in said.items()),
                      highlight=False, markup=False)
    if set(said) - {"reproduced"}:
        raise typer.Exit(1)


def _print_notes(v: Verification) -> None:
    """The record's values verify did not take as written (clamped resamples or budget, a Hub repository ignored)."""
    for n in v.notes:
        console.print(f"  note: {plain_text(n, limit=1000)}", markup=False, highlight=False)


def _print_why(v: Verification) -> None:
    """Why a record was not reproduced: its problems, then the numbers that differ beyond the tolerance (the
    record's field names and values are untrusted text: escaped)."""
    for p in v.problems:
        console.print(f"  {plain_text(p, limit=2000)}", markup=False, highlight=False)
    if v.differences:
        t = Table("field", Column("recorded", overflow="fold"), Column("recomputed", overflow="fold"),
                  title=f"{len(v.differences)} differences beyond rtol {v.rtol:g}, atol {v.atol:g}")
        for field_, old, new in v.differences[:40]:
            t.add_row(safe_text(field_), _shown(old), _shown(new))
        console.print(t, highlight=False)
        if len(v.differences) > 40:
            console.print(f"  ... and {len(v.differences) - 40} more", highlight=False)


def _shown(x: object, limit: int = 400) -> str:
    """A recorded or recomputed value as the table shows it: up to `limit` characters, escaped."""
    return safe_text(x, limit=limit)


@leaderboard_app.command("add",
                         epilog="Example: genbench leaderboard add ~/.cache/genbench/results/ZOO/NAME.json")
def leaderboard_add(records: list[Path] = typer.Argument(..., help="result record files, e.g. "
                                                          "$GENBENCH_HOME/results/ZOO/NAME.json, or folders of them"),
                    to: Optional[Path] = typer.Option(None, "--to", help="the shipped folder of verified records "
                                                      f"(default: the {SHIPPED_RESULTS} of the checkout genbench "
                                                      "runs from)"),
                    rtol: Rtol = 1e-5, atol: Atol = 1e-8, device: Device = None,
                    submissions: Submissions = None, zoo: CitedZoo = None,
                    reviewed: bool = typer.Option(False, "--reviewed", help="add a submission whose source the "
                                                  "review flagged (possible data generation or lookup), once a "
                                                  "maintainer has read it"),
                    max_n_boot: MaxNBoot = N_BOOT, max_budget_s: MaxBudgetS = BUDGET_S,
                    private: bool = typer.Option(True, "--private/--no-private", help="also score each added record "
                                                 "on the private training of its grid when the maintainers' secret "
                                                 "is set (`genbench leaderboard private`)"),
                    ) -> None:
    """Verify records and copy each one that reproduces into the shipped folder of verified records.

    Each record is recomputed from scratch (no cache) and copied atomically when every number reproduces; failed
    records and those that do not reproduce are refused, saying why."""
    from .. import paths
    from ..entries.verify import Verification, add_record, check_shipped_folder, check_tolerances
    from ..record import record_files

    check_tolerances(rtol, atol)

    if to is None:
        to = paths.shipped_results_dir()
        if to is None:
            raise GenbenchError(f"genbench runs from an installed package ({Path(__file__).parents[1]}), not from a "
                                f"checkout of its repository, so there is no shipped {SHIPPED_RESULTS} to add to; "
                                f"pass --to CHECKOUT/{SHIPPED_RESULTS}")
    check_writable(to)  # before any record is recomputed
    check_shipped_folder(to)
    limits = _limits(max_n_boot, max_budget_s)
    refused = 0
    for path in record_files(records):
        try:
            v = add_record(path, to, rtol=rtol, atol=atol, device=device, submissions=submissions, zoo=zoo,
                           reviewed=reviewed, limits=limits, progress=True)
        except GenbenchError as e:  # a file that is no record: refused, and the others still added
            v = Verification(str(path), problems=[str(e)])
        _print_notes(v)
        if v.ok:
            how = f"reproduced within rtol {rtol:g}, atol {atol:g}" + ("; replaced the record there" if v.replaced
                                                                        else "")
            console.print(f"[green]added[/green] {safe_text(path, limit=None)} -> {safe_text(v.added, limit=None)} "
                          f"({how})", highlight=False)
            if private:
                from .leaderboard import private_after_add
                private_after_add(v.added, submissions=submissions, device=device, limits=limits)
            continue
        refused += 1
        console.print(f"[red]refused[/red] {safe_text(path, limit=None)}: " + ("does not reproduce" if v.differences
                                                                             else "not added"), highlight=False)
        _print_why(v)
    if refused:
        raise typer.Exit(1)


def warn(text: str) -> None:
    """One yellow line, printed as it is (it names paths)."""
    console.print(text, style="yellow", markup=False, highlight=False)
