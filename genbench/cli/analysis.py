"""`genbench evaluate`, `score` and `audit`: a zoo's values, their scores and a measure's fragility audit."""
from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Column, Table

from ..defaults import AUDIT_ZOO, BUDGET_S, N_BOOT, SEED
from ..errors import GenbenchError
from ..paths import check_file_out, check_writable
from ..text import REASON_LIMIT, plain_text
from .app import app, console
from .options import Address, BudgetS, Device, Executor, NBoot, ResultsOut, Zoo, check_address, check_limits

if TYPE_CHECKING:
    from ..scoring.scores import Scores
    from ..scoring.spec import MeasureScores
    from ..zoo.storage import Zoo as ZooT


@app.command("evaluate", epilog="Example: genbench evaluate 'margin.*' --zoo mnist1d-demogen")
def evaluate_cmd(measures: list[str] = typer.Argument(..., help="measure names or glob patterns, e.g. 'margin.*'"),
                 zoo: Zoo = ...,
                 device: Device = None,
                 budget_s: BudgetS = BUDGET_S,
                 models: Optional[list[str]] = typer.Option(None, "--models", help="model ids or glob patterns"),
                 seed: int = typer.Option(SEED, help="seed of every measure's generator"),
                 out: Optional[Path] = typer.Option(None, help="value table (default: $GENBENCH_HOME/values/ZOO.parquet)"),
                 no_cache: bool = typer.Option(False, "--no-cache", help="recompute every value"),
                 executor: Executor = "local",
                 address: Address = None,
                 ) -> None:
    """Run measures on every model of a zoo; values are cached, failures are recorded per model."""
    check_writable(None)
    check_address(executor, address)
    check_file_out("--out", out, "values.parquet")
    if out is not None and out.suffix.lower() != ".parquet":  # a values.csv would hold parquet bytes
        raise GenbenchError(f"--out {out}: the value table is written as parquet, so its name ends in .parquet, e.g. "
                            f"{out.with_suffix('.parquet')}")
    from ..harness import evaluate, save_values, values_path
    from ..harness.values import check_values_out
    from ..zoo import load_zoo

    check_limits(seconds={"--budget-s": budget_s})
    z = load_zoo(zoo)
    if out is not None:  # before any value is computed: a file it could not merge into
        check_values_out(out, z.table_sha256)
    df = evaluate(measures, z, device=device, executor=executor, models=models, seed=seed, budget_s=budget_s,
                  cache=not no_cache, address=address)
    path = save_values(df, out or values_path(z.name), replace=out is None)  # never overwrites another zoo's --out
    names = list(df.attrs["measures"])
    t = Table(Column("measure", min_width=max(map(len, names), default=7), no_wrap=True),  # never cut a name short
              "kind", "ok", "failed", "cached", "seconds", title=f"{z.name}: {len(df)} models",
              caption="cached: values read from the value cache (computed before by the same measure version and "
              "source on the same checkpoints); --no-cache recomputes them" if not no_cache else
              "--no-cache: every value computed again, none read from the value cache")
    failures = []
    for name, info in df.attrs["measures"].items():
        errors = df[f"{name}:error"]
        bad = errors.notna()  # an ok model's error is None or NaN: notna tells them apart, truthiness does not
        first = next((f"{mid}: {e}" for mid, e in zip(df["model_id"][bad], errors[bad])), "")
        t.add_row(name, info["kind"], str(int((~bad).sum())), str(int(bad.sum())),
                  str(df.attrs["cached"].get(name, 0)), f"{df.attrs['seconds'].get(name, 0.0):.1f}")
        if first:
            failures.append(f"  {name}, first failure: {plain_text(first, limit=REASON_LIMIT)}")
    console.print(t)
    for line in failures:  # below the table, whole: a column would cut them to a few letters on a narrow terminal
        console.print(line, markup=False, highlight=False)
    console.print(f"values: {path}")
    if len(df) and all(df[f"{name}:error"].notna().all() for name in names):  # each model's failure is kept, but a
        console.print("no value was computed: every model failed (the first failures above); the command fails",
                      markup=False, highlight=False)  # run that computed nothing is no success for a script
        raise typer.Exit(1)


@app.command("score", epilog="Example: genbench score 'margin.*' --zoo mnist1d-demogen")
def score_cmd(measures: Optional[list[str]] = typer.Argument(None, help="measures or glob patterns (default: all "
                                                             "evaluated); with --values and no --zoo: measure columns"),
              zoo: Optional[str] = typer.Option(None, "--zoo", help="zoo name or folder (leave out to score a value "
                                                "table from elsewhere given by --values)"),
              target: str = typer.Option("gap", help="gap or test_acc; for a table from elsewhere, the column to "
                                         "predict"),
              table: Optional[str] = typer.Option(None, help="'demogen': the DEMOGEN ablation tables 1 and 4"),
              n_boot: NBoot = N_BOOT,
              values: Optional[Path] = typer.Option(None, help="value table (default: $GENBENCH_HOME/values/ZOO.parquet);"
                                                    " without --zoo: a CSV or parquet table from elsewhere, one row "
                                                    "per model"),
              allow_partial: bool = typer.Option(False, "--allow-partial", help="score a partial zoo (not every "
                                                 "model of its recipe built): the scores describe those models only"),
              hparams: Optional[list[str]] = typer.Option(None, "--hparams", help="table from elsewhere: its "
                                                          "hyperparameter columns, globs allowed (default: 'hp.*')"),
              id_column: Optional[str] = typer.Option(None, "--id", help="table from elsewhere: the model id column "
                                                      "(default: the row number)"),
              name: Optional[str] = typer.Option(None, "--name", help="table from elsewhere: its records are filed "
                                                 "under external-NAME (default: external-<file name>)"),
              test_size: Optional[int] = typer.Option(None, "--test-size", help="table from elsewhere: test "
                                                      "examples behind each target value (the robust sign-error's "
                                                      "noise filter; default 10000)"),
              higher_means: Optional[list[str]] = typer.Option(None, "--higher-means", help="table from elsewhere: "
                                                               "COLUMN=larger_gap|smaller_gap, a measure's claimed "
                                                               "direction (globs allowed; repeat)"),
              results: ResultsOut = None,
              ) -> None:
    """Score measures: adjusted and k-fold R^2, MSE, Kendall tau, Psi, CMI, robust sign-error, 95% intervals. Without
    --zoo, `--values FILE` scores a table of values computed elsewhere and files its records, marked external."""
    check_writable(None, results)
    if zoo is None:
        if values is None:
            raise GenbenchError("name the zoo (--zoo NAME), or give a table of values from elsewhere with "
                                "--values FILE (CSV or parquet, one row per model)")
        if table is not None or allow_partial:
            raise GenbenchError("--table and --allow-partial apply to a zoo; a table from elsewhere takes --values "
                                "with its columns")
        test_size = 10_000 if test_size is None else test_size
        check_limits(counts={"--n-boot": n_boot, "--test-size": test_size})
        _score_external(list(measures or []), values, target=target, hparams=hparams, id_column=id_column,
                        name=name, test_size=test_size, higher_means=higher_means or [], n_boot=n_boot,
                        results=results)
        return
    from ..harness.values import values_for
    from ..scoring import score
    from ..scoring.demogen import MEASURES
    from ..zoo import load_zoo

    if table not in (None, "demogen"):
        raise GenbenchError(f"unknown table {table!r}; the only table is 'demogen'")
    external = [f for f, v in (("--hparams", hparams), ("--id", id_column), ("--name", name),
                                ("--higher-means", higher_means), ("--results", results),
                                ("--test-size", test_size)) if v is not None and v != []]
    if external:
        raise GenbenchError(f"{', '.join(external)} apply to a table from elsewhere (--values FILE without --zoo)")
    check_limits(counts={"--n-boot": n_boot})
    check_file_out("--values", values, "values.parquet")  # read when there, else the values computed go to it
    z = load_zoo(zoo)
    z.require_complete(allow_partial=allow_partial)  # before any value is computed
    if not z.complete:
        console.print(f"note: zoo {z.name!r} is {z.state()}; the scores describe these models only",
                      style="yellow", markup=False, highlight=False)
    df, wanted = values_for(z, list(measures or (MEASURES if table else [])), values, note=console.print)
    too_few(len(df), f"the value table of zoo {z.name!r}",
            f"evaluate more of its models: `genbench evaluate MEASURE... --zoo {z.name}`")
    names = wanted or list(df.attrs.get("measures", {}))
    scores = score(df, z, target=target, measures=wanted, n_boot=n_boot, allow_partial=allow_partial,
                   progress=_progress(len(names)))
    from ..leaderboard.terminal import print_demogen_tables, print_scores

    if table == "demogen":
        print_demogen_tables(console, scores, z.name)
    else:
        print_scores(console, scores, z.name, target)
        if target == "gap" and z.complete:
            _print_verdict(scores, z, n_boot=n_boot)


def _progress(total: int) -> Callable[[str], None]:
    """A line on stderr as each measure is scored: "[3/48] scored margin.h1 (12.0 s)"."""
    import time
    start, done = time.perf_counter(), [0]

    def step(name: str) -> None:
        done[0] += 1
        typer.echo(f"[{done[0]}/{total}] scored {name} ({time.perf_counter() - start:.1f} s)", err=True)
    return step


def _print_verdict(scores: Scores, z: ZooT, *, n_boot: int) -> None:
    """What `genbench leaderboard` says of the zoo, for these scores: its verdict sentence (against
    baseline.hparams, paired on the same resamples) and the baseline rows that need only the zoo's table."""
    from ..leaderboard.terminal import print_scores, say
    from ..leaderboard.verdict import zoo_verdict
    from ..record import Record
    from ..scoring.baselines import BASELINES, score_baselines

    quick = ("baseline.hparams", "baseline.hparams_main", "baseline.train_loss", "baseline.train_acc")
    baselines, notes = score_baselines(z, n_boot=n_boot, only=quick)
    citation = {b.name: b.citation for b in BASELINES}
    records = [Record(_score_record(s, z, citation.get(s.measure))) for s in [*scores, *baselines]]
    print_scores(console, baselines, z.name, "gap")
    for note in notes:
        say(console, f"note: {note}")
    say(console, zoo_verdict(z.name, records).sentence())
    say(console, "baseline.all_measures and baseline.weight_stats are scored by `genbench leaderboard run`")


def _score_record(s: MeasureScores, z: ZooT, citation: str | None) -> dict:
    """The record a leaderboard view reads for one measure's (or baseline's) scores on the zoo: scores, the gap and
    the held-out predictions (what the verdict's paired differences are computed from)."""
    from ..fileio import json_safe
    from ..record import SCHEMA, values_block, zoo_block
    ids = sorted(z.table["model_id"].astype(str))
    gap = z.table.set_index("model_id").loc[ids, "gap"].astype(float).tolist()
    baseline = citation is not None
    return json_safe({"schema": SCHEMA, "name": s.measure, "measure": s.measure,
                      "kind": "baseline" if baseline else s.kind, "citation": citation,
                      "higher_means": s.direction.get("claim"), "builtin": True, "baseline": baseline,
                      "submission": None, "zoo": zoo_block(z), "status": "ok", "failure": None,
                      "scores": s.to_dict(), "audit": None, "values": values_block(ids, gap, None, None, s.heldout),
                      "provenance": {"command": "genbench score"}})


def too_few(n: int, where: str, fix: str) -> None:
    """Refuse to score fewer models than any score needs, before the baselines' minutes and empty records."""
    from ..scoring.scores import MIN_SCORED_MODELS
    if n < MIN_SCORED_MODELS:
        raise GenbenchError(f"{where}: {n} model(s) with values, and nothing can be scored on fewer than "
                            f"{MIN_SCORED_MODELS} ({fix})")


def _score_external(measures: list[str], path: Path, *, target: str, hparams: Optional[list[str]],
                    id_column: Optional[str], name: Optional[str], test_size: int, higher_means: list[str],
                    n_boot: int, results: Optional[Path]) -> None:
    """Score a value table from elsewhere, file its records (marked external) and show them ranked."""
    import shlex
    import sys

    from ..entries.external import score_value_table
    from ..leaderboard.export import leaderboard_table, view_notes
    from ..leaderboard.standings import rank_records
    from ..leaderboard.terminal import print_leaderboard
    from ..paths import results_dir
    from ..record import Record, write_record_safely
    from ..zoo.importers.value_table import read_value_table

    pairs = {}
    for pair in higher_means:
        if "=" not in pair:
            raise GenbenchError(f"--higher-means takes COLUMN=larger_gap or COLUMN=smaller_gap, got {pair!r}")
        column, direction = (part.strip() for part in pair.split("=", 1))
        if pairs.get(column, direction) != direction:
            raise GenbenchError(f"--higher-means gives {column} two directions, {pairs[column]} and {direction}: "
                                "give one")
        pairs[column] = direction
    vt = read_value_table(path, measures=measures, target=target, hparams=hparams, id_column=id_column, name=name,
                          test_size=test_size, higher_means=pairs)
    too_few(len(vt.zoo), str(path), "one row per model")
    say = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731
    axes = [a for a in vt.zoo.hparams if a != "seed"]
    most = int(vt.zoo.table.groupby([f"hp.{a}" for a in axes]).size().max())
    say(f"{path}: {len(vt.zoo)} models, {len(vt.measures)} measure column(s), target {target!r}, hyperparameters "
        f"{axes} (at most {most} seed(s) per grid point)")
    for note in vt.notes:
        say(f"note: {note}")
    command = "genbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    records = [Record(r) for r in score_value_table(vt, n_boot=n_boot, command=command)]
    folder = (results if results is not None else results_dir()) / vt.zoo.name
    stale = sorted(folder.glob("*.json")) if folder.is_dir() else []
    for old in stale:  # a table scored again replaces its records (an older version's would not rank beside them)
        old.unlink()
    for r in records:
        write_record_safely(r, results, say)
    ranked = rank_records(records, "kfold_r2")
    print_leaderboard(console, leaderboard_table(records, "kfold_r2", ranked=ranked), ranked, "kfold_r2",
                      view_notes(ranked, "kfold_r2", records=records))
    say(f"{len(records)} records written to {folder}{f' (replacing {len(stale)})' if stale else ''} (external "
        "values: never verified, never ranked officially; `genbench leaderboard` lists them apart)")


@app.command("audit", epilog="Example: genbench audit norm.path --zoo mnist1d-fragility")
def audit_cmd(measure: str = typer.Argument(..., help="the measure to audit"),
              zoo: str = typer.Option(AUDIT_ZOO, "--zoo", help="zoo name or folder (twins and learning curves)"),
              device: Device = None,
              control_models: int = typer.Option(4, "--control-models", help="models in the rescaling control"),
              n_boot: int = typer.Option(N_BOOT, "--n-boot", help="accepted for scripts; the audit's tests are "
                                         "analytic (seed-level standard errors), not bootstrapped"),
              details: bool = typer.Option(False, "--details", help="also print the per-cell and per-curve tables"),
              json_out: Optional[Path] = typer.Option(None, "--json", help="write the report as JSON here"),
              plot: Optional[Path] = typer.Option(None, "--plot", help="write the learning curves (measure and test "
                                                  "error against train size, per arm) here: .svg or .png"),
              allow_partial: bool = typer.Option(False, "--allow-partial", help="audit a partial zoo (not every "
                                                 "model of its recipe built): the report says so"),
              ) -> None:
    """Fragility audit: do value, trend and scaling survive small changes of training? Thresholds printed."""
    check_writable(None)  # before the audit's minutes
    check_file_out("--json", json_out, "audit.json")
    check_file_out("--plot", plot, "curves.svg")
    from ..fileio import write_json_atomic
    from ..leaderboard.terminal import print_audit
    from ..measures import get_measure
    from ..scoring import audit
    from ..scoring.audit import check_audit_zoo
    from ..zoo import load_zoo
    from .options import check_auditable

    check_limits(counts={"--n-boot": n_boot})
    if control_models < 0:
        raise GenbenchError(f"--control-models must be 0 or more (0 skips the rescaling control), got {control_models}")
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise GenbenchError(f"--plot {plot}: the extension must be .svg or .png, got {plot.suffix or 'none'!r}")
    if any(c in measure for c in "*?["):
        raise GenbenchError(f"audit takes one measure, not the pattern {measure!r}: e.g. `genbench audit norm.path`; "
                            f"`genbench leaderboard run {shlex.quote(measure)}` audits each measure it matches")
    try:
        get_measure(measure)  # an unknown name first, with its suggestions
    except GenbenchError:
        if (folder := shipped_submission(measure)) is None:
            raise
        raise GenbenchError(f"{measure} is the entry of the submission {folder}, not a registered measure: its "
                            "audit is in its records (the leaderboard's fragility column); `genbench submit "
                            f"{folder}` runs it again, audit included") from None
    z = load_zoo(zoo)
    check_auditable(z)
    check_audit_zoo(z, allow_partial=allow_partial, flag="--allow-partial")
    report = audit(measure, z, device=device, control_models=control_models, n_boot=n_boot,
                   allow_partial=allow_partial)
    print_audit(console, report, measure, z.name, details=details)
    if json_out:
        write_json_atomic(json_out, report.to_dict())
        console.print(f"report written to {json_out}")
    if plot is not None:
        from ..leaderboard.curves import write_curve_plot
        write_curve_plot(report, plot, measure=measure, form=report.form)
        console.print(f"learning curves written to {plot}")


def shipped_submission(entry: str) -> str | None:
    """The folder of the shipped submission whose entry is `entry` (as its records say), or None."""
    from ..paths import shipped_results_dir
    from ..record import load_records
    root = shipped_results_dir()
    for r in load_records(root, skipped=[]) if root is not None else []:  # an unreadable record names no folder
        if r.measure == entry and isinstance(r.submission_path, str):
            return r.submission_path
    return None
