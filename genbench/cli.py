"""The `genbench` command: one sub-command per user job."""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
import yaml
from rich import box
from rich.console import Console
from rich.table import Column, Table

from .defaults import AGGREGATE_RULE, AUDIT_ZOO, BUDGET_S, CHECK_ZOO, DEFAULT_ZOO, N_BOOT, SEED, SHIPPED_RESULTS
from .errors import GenbenchError
from .harness.malloc import keep_freed_memory
from .leaderboard.format import DIGITS, TEXT_FORMATS, number
from .scoring.spec import DEFAULT_SORT

if TYPE_CHECKING:
    import pandas as pd

    from .leaderboard.export import ViewNotes
    from .leaderboard.format import Footnotes
    from .leaderboard.schema import Record
    from .leaderboard.verify import Verification
    from .zoo.storage import Zoo

WIDE_CITATION = 24  # the narrowest citation column of the full terminal table (narrower: the headline columns)
WRAPPED = 14  # the narrowest fragility column: its longest word ("fragile-value,") whole
LOCAL_MARK = " *"  # after an entry's name in the terminal: the user's own record, not verified
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


def _check_limits(seconds: dict[str, float | None] | None = None, counts: dict[str, int] | None = None) -> None:
    """Refuse budgets, timeouts and memory caps that are not positive finite numbers, and counts below 1, before
    anything runs (a zero, negative or nan budget would turn every model into a failure, or a good record into a
    failure record)."""
    for flag, v in (seconds or {}).items():
        if v is not None and not (math.isfinite(v) and v > 0):
            raise GenbenchError(f"{flag} must be a positive number, got {v!r}")
    for flag, v in (counts or {}).items():
        if v < 1:
            raise GenbenchError(f"{flag} must be at least 1, got {v!r}")


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise GenbenchError(f"--set takes KEY=VALUE (e.g. train.epochs=2), got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


@zoo_app.command("list")
def zoo_list() -> None:
    """List the recipes in model_zoo/ and every zoo folder under $GENBENCH_HOME/zoos with its state: complete,
    partial (some models missing), empty (no model built yet) or broken (unreadable)."""
    from rich.markup import escape

    from .zoo import list_recipes
    from .zoo.storage import local_zoo_states

    recipes = set(list_recipes())
    states = {s.name: s for s in local_zoo_states()}
    table = Table("name", "recipe", "state", "models", "note")
    for name in sorted(recipes | set(states)):
        st = states.get(name)
        if st is None:
            table.add_row(name, "yes", "not built", "", "")
            continue
        models = ("" if st.models is None else str(st.models) if st.state == "complete" or st.expected is None
                  else f"{st.models} of {st.expected}")
        table.add_row(escape(name), "yes" if name in recipes else "", st.state, models, escape(st.detail))
    console.print(table)


@zoo_app.command("build")
def zoo_build(recipe: str = typer.Argument(..., help="recipe name (model_zoo/NAME.yaml) or path to a YAML file"),
              limit: Optional[int] = typer.Option(None, help="build only the first N models of the grid"),
              device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
              out: Optional[Path] = typer.Option(None, help="zoo folder (default: $GENBENCH_HOME/zoos/NAME)"),
              set_: list[str] = typer.Option([], "--set", help="override a recipe key, e.g. --set train.epochs=2"),
              executor: str = typer.Option("local", help="local, or ray: train the model groups as Ray tasks"),
              address: Optional[str] = typer.Option(None, help="Ray cluster address (with --executor ray)"),
              ) -> None:
    """Train the models of a recipe (resumes: finished models are kept)."""
    from .zoo import build_zoo

    zoo = build_zoo(recipe, out, limit=limit, device=device, overrides=_overrides(set_), executor=executor,
                    address=address)
    console.print(f"zoo {zoo.name!r}: {len(zoo)} models in {zoo.root}")
    _print_info(zoo)


def _print_info(zoo) -> None:
    from .zoo.card import summary

    s = summary(zoo)
    count = f"{s['models']} models" if zoo.complete else f"{s['models']} of {s['expected_models']} models: partial"
    t = Table(title=f"{zoo.name} ({count}, {zoo.root})", show_header=True)
    t.add_column("")
    t.add_column("min", justify="right")
    t.add_column("max", justify="right")
    for col, label in (("train_acc", "train accuracy"), ("test_acc", "test accuracy"), ("gap", "gap")):
        t.add_row(label, f"{s[col + '_min']:.3f}", f"{s[col + '_max']:.3f}")
    console.print(t)
    for axis, values in zoo.hparams.items():
        console.print(f"  {axis}: {values}")
    if "converged" in s:
        console.print(f"  converged (stopping rule met): {s['converged']}/{s['models']}")
    console.print(f"  training time (sum over models): {s['train_seconds']:.1f} s")
    console.print(f"  {zoo.state()}", markup=False, highlight=False, style=None if zoo.complete else "yellow")


@zoo_app.command("info")
def zoo_info(zoo: str = typer.Argument(..., help="zoo name or folder")) -> None:
    """Summarise a zoo: size, accuracy and gap ranges, grid axes."""
    from .zoo import load_zoo

    _print_info(load_zoo(zoo))


@zoo_app.command("verify")
def zoo_verify(zoo: str = typer.Argument(..., help="zoo name or folder")) -> None:
    """Re-hash every file of a zoo against its recorded sha256."""
    from .zoo import load_zoo

    z = load_zoo(zoo)
    problems = z.verify()
    for p in problems:
        console.print(f"[red]{p}[/red]")
    if problems:
        raise typer.Exit(1)
    console.print(f"zoo {z.name!r}: all {2 * len(z) + len(z.manifest['files'])} files match their sha256")


@zoo_app.command("download")
def zoo_download(repo: str = typer.Argument(..., help="Hub dataset repo ORG/NAME (or hf://ORG/NAME)"),
                 revision: Optional[str] = typer.Option(None, help="branch, tag or commit SHA (default: main)"),
                 models: Optional[list[str]] = typer.Option(None, "--models", help="only these model ids or glob patterns"),
                 force: bool = typer.Option(False, "--force", help="download again even if in the HF cache"),
                 ) -> None:
    """Download a zoo from the Hub into the HF cache; every file is checked against zoo.json."""
    from .zoo.hub import download_zoo

    z = download_zoo(repo, revision=revision, models=models, force=force)
    console.print(f"zoo {z.name!r} from {z.repo_id} at commit {z.revision}: {len(z)} models in {z.root}")
    if z.missing_models:
        console.print(f"  not downloaded: {len(z.missing_models)} models (fetch them with --models)")
    console.print(f"  open it with gb.load_zoo('hf://{z.repo_id}', revision='{z.revision}')")


@zoo_app.command("push")
def zoo_push(folder: str = typer.Argument(..., help="zoo folder (or the name of a locally built zoo)"),
             repo: str = typer.Argument(..., help="Hub dataset repo ORG/NAME to create or update"),
             private: bool = typer.Option(False, "--private", help="create the repo private"),
             ) -> None:
    """Publish a zoo as a Hub dataset repo (verified first; the card makes the table load with `datasets`)."""
    from .zoo.hub import push_zoo

    pushed = push_zoo(folder, repo, private=private)
    _report_push(pushed, "files")
    console.print(f"  tagged {pushed.tag}: records made on this zoo are verified against exactly this copy")
    console.print(f"  download it with `genbench zoo download {pushed.repo_id}` (add --revision {pushed.tag} for "
                  "this version)")


def _report_push(pushed, what: str) -> None:
    """One line: how many files went where, and the commit they made."""
    console.print(f"pushed {len(pushed.files)} {what} to {pushed.url}" + (f" (commit {pushed.commit})" if pushed.commit else ""))


@leaderboard_app.command("push")
def leaderboard_push(folder: Path = typer.Argument(..., help=f"folder of result records, e.g. {SHIPPED_RESULTS}"),
                     repo: str = typer.Argument(..., help="Hub dataset repo ORG/NAME to create or update"),
                     private: bool = typer.Option(False, "--private", help="create the repo private"),
                     ) -> None:
    """Publish result records (JSON) as a Hub dataset repo."""
    from .leaderboard.publish import push_results

    _report_push(push_results(folder, repo, private=private), "result records")


FORMATS = ("table", *TEXT_FORMATS)


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
    from .leaderboard.export import export_text, leaderboard_table, view_notes
    from .leaderboard.ranking import rank_records
    from .leaderboard.schema import score_spec

    if fmt not in FORMATS:
        raise GenbenchError(f"--format must be one of {FORMATS}, got {fmt!r}")
    score_spec(sort)  # an unknown score fails here, with a suggestion
    records = _leaderboard_records(results, zoo)
    ranked = rank_records(records, sort)
    table, notes = leaderboard_table(records, sort, ranked=ranked), view_notes(ranked, sort, records=records)
    if fmt == "table":
        _print_leaderboard(table, ranked, sort, notes)
    else:
        sys.stdout.write(export_text(table, fmt, notes))
        if fmt != "markdown":  # csv and json are data: what they need said goes to stderr
            _print_notes(notes, Console(stderr=True), per_zoo=True)
    if html is not None:
        from .leaderboard import write_site
        from .leaderboard.records import ablation_tables  # imports torch (the measures), so only here

        index = write_site(records, html, sort=sort, ablation=ablation_tables(records))
        console.print(f"leaderboard page: {index}")


def _leaderboard_records(results: list[Path] | None, zoo: str | None) -> list[Record]:
    """The records the leaderboard shows: those in each --results folder, else those in the shipped folder (a
    checkout's leaderboard/results) and the user's ($GENBENCH_HOME/results). Records from any folder but the
    shipped one are marked local; an entry found in two folders is shown once: the later folder's record, unless
    both are the same."""
    from . import paths
    from .leaderboard.schema import load_records

    note = Console(stderr=True)  # notes go to stderr: stdout may be csv or json
    shipped = paths.shipped_results_dir()
    folders = list(results or [f for f in (shipped, paths.results_dir()) if f is not None and f.is_dir()])
    if not results and shipped is None:
        note.print(f"note: genbench runs from an installed package, which ships no records; pass --results "
                   f"CHECKOUT/{SHIPPED_RESULTS} --results {paths.results_dir()} to rank yours beside the "
                   "repository's", style="dim", markup=False, highlight=False)
    if not folders:
        raise GenbenchError(f"no result records yet: `genbench submit` and `genbench leaderboard run` write them to "
                            f"{paths.results_dir()}")
    seen: dict[tuple[str, str], tuple[Record, Path, bool]] = {}
    skipped: list[str] = []  # files that are no readable record: reported once, never hiding the others
    for folder in folders:
        local = shipped is None or Path(folder).resolve() != shipped.resolve()
        for rec in load_records(folder, skipped=skipped):
            key = (rec.zoo_name, rec.name)
            if key in seen and seen[key][0].data == rec.data:
                continue  # the same record in both folders (added to the shipped one): shown once, as the first
            if key in seen:
                note.print(f"note: {rec.name} on {rec.zoo_name}: showing the record in {folder}, not the one in "
                           f"{seen[key][1]}", style="dim", markup=False, highlight=False)
            seen[key] = (rec, Path(folder), local)
    for why in skipped:
        note.print(f"warning: {why}", style="yellow", markup=False, highlight=False)
    records = [rec.with_local(local) for rec, _, local in seen.values() if zoo is None or rec.zoo_name == zoo]
    if not records:
        zoos = sorted({rec.zoo_name for rec, _, _ in seen.values()})
        where = ", ".join(map(str, folders))
        also = f" ({len(skipped)} file(s) skipped; the first: {skipped[0]})" if skipped else ""
        raise GenbenchError(f"no records for zoo {zoo!r} in {where}; zoos with records: {zoos}{also}" if zoo else
                            f"no result records in {where}{also}")
    return records


def _print_leaderboard(table: pd.DataFrame, ranked: list[Record], sort: str, notes: ViewNotes) -> None:
    """The ranked table of each zoo (every column on a wide terminal, the headline ones on a narrow one, with the
    same labels; none that no entry has a value for) with the user's own records marked local, baselines marked
    `base`, its notes and refusal footnotes, its failed records below it, the mean ranks across zoos when there
    are several, and once, the group rule, what a baseline is and how entries are named. Long text wraps: nothing
    is cut."""
    from .leaderboard.export import NAMING, entry_names
    from .leaderboard.ranking import aggregate_table

    for z, part in table.groupby("zoo", sort=True):
        failed, part = part[part["status"] != "ok"], part[part["status"] == "ok"]
        t, foot = _zoo_table(str(z), part, sort, notes.hidden.get(str(z), {}))
        if not part.empty:
            console.print(t)
        for line in notes.zoo_lines(str(z)) + foot.lines():
            _say(line, indent=2)
        if not failed.empty:
            _say(f"failed on {z}, not ranked:")
        for _, r in failed.iterrows():
            sub = f" (submission {r['submission']})" if r.get("submission") else ""
            _say(f"{_entry(r)}{sub}: {r['failure'] or 'no reason recorded'}", indent=2)
    agg = aggregate_table([], sort, ranked=ranked)
    if not agg.empty and agg["zoos"].max() > 1:  # complete official zoos only, as on the page
        names = {name: entry for (_, name), entry in entry_names(ranked).items()}
        t = Table("entry", "mean rank", "zoos", box=box.SIMPLE_HEAD, pad_edge=False,
                  title=f"across the official zoos: mean of the per-zoo ranks by {sort}")
        for _, r in agg.iterrows():
            t.add_row(_entry({"entry": names.get(r["entry"], r["entry"]), "local": r["local"]}),
                      number(r["mean_rank"]), str(int(r["zoos"])))
        console.print(t)
        _say(f"across zoos: {AGGREGATE_RULE}", indent=2)
    _print_notes(notes, console)
    if "submission" in table and table["submission"].astype(bool).any():
        _say(NAMING)
    if table["local"].any():
        _say(f"{LOCAL_MARK.strip()} local: your own record, not verified (not in the shipped {SHIPPED_RESULTS}); "
             "`genbench leaderboard add RECORD` verifies it and adds it there")


def _zoo_table(zoo: str, part: pd.DataFrame, sort: str, hidden: dict[str, str]) -> tuple[Table, Footnotes]:
    """One zoo's ranked rows as a terminal table, and the footnotes of its refused cells. One set of labels at any
    width: where it fits, every score column valued on the zoo (the ranking score first), the submission folder,
    kind and citation; else rank, group, entry, the ranking score, tau and fragility, with a caption saying so.
    Text that does not fit its column wraps: nothing is cut."""
    from .leaderboard.export import interval_columns, rank_cell, score_columns
    from .leaderboard.format import Footnotes, rank_text, score_cell
    from .leaderboard.schema import score_spec

    with_iv = interval_columns(sort)
    subs = "submission" in part and bool(part["submission"].astype(bool).any())

    def build(wide: bool, tau: bool = True, caption: str | None = None, least: bool = False
              ) -> tuple[Table, Footnotes]:
        """The full (`wide`) or headline table (with `tau`); `least`: its wrapping columns at their narrowest."""
        foot = Footnotes()
        keys = score_columns(sort, hidden) if wide else [sort, *(["tau"] if tau and sort != "tau" and "tau" not in
                                                                 hidden else [])]
        cols = [Column("rank", no_wrap=True), Column("group", no_wrap=True), Column("entry", no_wrap=True),
                *([Column("submission", no_wrap=True)] if wide and subs else []),
                *(Column(score_spec(k).ascii + (" [95%]" if k in with_iv else ""), no_wrap=True) for k in keys),
                *([Column("kind", no_wrap=True)] if wide else []),
                Column("fragility", overflow="fold", min_width=WRAPPED, width=WRAPPED if least else None),
                *([Column("citation", overflow="fold", min_width=WIDE_CITATION, width=WIDE_CITATION if least else
                          None)] if wide else [])]
        t = Table(*cols, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, title=f"{zoo}: ranked by {sort}",
                  caption=caption)
        for _, r in part.iterrows():
            scores = [score_cell(r.get(k), *((r.get(f"{k}_lo"), r.get(f"{k}_hi")) if k in with_iv else ()),
                                 refused=r.get(f"{k}_refused"), notes=foot) for k in keys]
            t.add_row(rank_cell(r), rank_text(r["group"]), _entry(r), *([r["submission"]] if wide and subs else []),
                      *scores, *([str(r["kind"] or "")] if wide else []), r["fragility"],
                      *([str(r["citation"] or "")] if wide else []))
        return t, foot

    need = _width(build(True, least=True)[0])
    if need <= console.width:
        return build(True)
    caption = (f"a terminal narrower than {need} columns shows fewer columns here; --format markdown or csv gives "
               "them all")
    tau = _width(build(False, least=True)[0]) <= console.width
    return build(False, tau, caption)


def _width(table: Table) -> int:
    """The columns `table` takes when nothing has to wrap but what it wraps anyway."""
    import io

    out = Console(file=io.StringIO(), width=100_000, color_system=None)
    out.print(table)
    return max(len(line) for line in out.file.getvalue().splitlines())  # type: ignore[attr-defined]


def _say(text: str, out: Console | None = None, *, indent: int = 0) -> None:
    """Print plain text wrapped at word boundaries to the console's width, continuation lines indented."""
    import textwrap

    out = out or console
    lines = textwrap.wrap(" ".join(str(text).split()), width=max(out.width, 20), initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + 2), break_on_hyphens=False)
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_notes(notes: ViewNotes, out: Console, *, per_zoo: bool = False) -> None:
    """The notes a view says once: the group rule and what a baseline is; with `per_zoo`, each zoo's notes first
    (aliases, columns never valued there), which the terminal prints under each zoo's table instead."""
    lines = [f"{z}: {line}" for z in notes.hidden for line in notes.zoo_lines(z, shown=False)] if per_zoo else []
    for line in lines + notes.lines(data=per_zoo):
        _say(line, out)


def _entry(row: pd.Series | dict) -> str:
    """An entry's name as the terminal shows it (its measure): marked when the record is the user's own (local)."""
    return str(row["entry"]) + (LOCAL_MARK if row.get("local") else "")


@leaderboard_app.command("run")
def leaderboard_run(measures: list[str] = typer.Argument(..., help="built-in measures or glob patterns"),
                    zoo: list[str] = typer.Option([DEFAULT_ZOO], "--zoo", help="zoo(s) to score on"),
                    results: Optional[Path] = typer.Option(None, "--results", help="folder to write the records "
                                                           "to (default: $GENBENCH_HOME/results)"),
                    audit_zoo: Optional[str] = typer.Option(AUDIT_ZOO, "--audit-zoo",
                                                            help="zoo for the fragility audit ('' to skip)"),
                    device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
                    n_boot: int = typer.Option(N_BOOT, "--n-boot", help="bootstrap resamples"),
                    allow_partial: bool = typer.Option(False, "--allow-partial", help="score a partial zoo too (not "
                                                       "every model of its recipe built): its records are marked "
                                                       "partial and not ranked"),
                    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="also write the zoo's "
                                                   "baseline rows (see `genbench leaderboard baselines`)"),
                    ) -> None:
    """Compute the result records of built-in measures (scores, audit, values, provenance) and write them."""
    from tqdm import tqdm

    from .leaderboard.ranking import partial_note
    from .leaderboard.records import run_entry
    from .leaderboard.schema import Record, write_record
    from .measures.registry import resolve_measures
    from .zoo import load_zoo

    _check_limits(counts={"--n-boot": n_boot})
    names = [m.name for m in resolve_measures(measures)]
    zoos = {z: load_zoo(z) for z in zoo}
    for loaded in zoos.values():  # every zoo checked before the first record is computed
        loaded.require_complete(allow_partial=allow_partial)
    for z, loaded in zoos.items():
        for name in tqdm(names, desc=f"records on {z}", unit="entry"):
            cmd = (f"genbench leaderboard run {name} --zoo {z}" + (f" --audit-zoo {audit_zoo}" if audit_zoo else "")
                   + ("" if loaded.complete else " --allow-partial"))
            rec = Record(run_entry(name, loaded, audit_zoo=audit_zoo or None, device=device, n_boot=n_boot,
                                   command=cmd, allow_partial=allow_partial))
            path = write_record(rec, results)
            note = f", {partial_note(rec)}" if not rec.zoo_complete else ""
            console.print(f"{z} {name}: {rec.status}, k-fold R2 {number(rec.score('kfold_r2'))}, "
                          f"{rec.verdict or 'not audited'}{note} -> {path}", markup=False, highlight=False)
        if baselines:
            _write_baselines(loaded, results, device=device, n_boot=n_boot, allow_partial=allow_partial)


def _write_baselines(zoo: Zoo, results: Path | None, *, device: str | None, n_boot: int,
                     allow_partial: bool) -> None:
    """Make and write the baseline rows of one zoo, one line each."""
    from .leaderboard.records import run_baselines
    from .leaderboard.schema import Record, write_record

    cmd = f"genbench leaderboard baselines --zoo {zoo.name}" + ("" if zoo.complete else " --allow-partial")
    for rec in map(Record, run_baselines(zoo, device=device, n_boot=n_boot, command=cmd, progress=True,
                                         allow_partial=allow_partial)):
        path = write_record(rec, results)
        said = f"k-fold R2 {number(rec.score('kfold_r2'))}" if rec.ok else f"not made: {rec.failure}"
        console.print(f"{zoo.name} {rec.name}: {said} -> {path}", markup=False, highlight=False)


@leaderboard_app.command("baselines")
def leaderboard_baselines(zoo: list[str] = typer.Option([DEFAULT_ZOO], "--zoo", help="zoo(s) to score on"),
                          results: Optional[Path] = typer.Option(None, "--results", help="folder to write the records "
                                                                 "to (default: $GENBENCH_HOME/results)"),
                          device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if "
                                                               "present)"),
                          n_boot: int = typer.Option(N_BOOT, "--n-boot", help="bootstrap resamples"),
                          allow_partial: bool = typer.Option(False, "--allow-partial", help="make them on a partial "
                                                             "zoo too (marked partial, not ranked)"),
                          ) -> None:
    """Write the baseline rows: the gap predicted from the hyperparameters, from every built-in scalar measure at
    once, and from the training loss and accuracy. A measure below baseline.hparams adds nothing the recipe said."""
    from .zoo import load_zoo

    _check_limits(counts={"--n-boot": n_boot})
    zoos = [load_zoo(z) for z in zoo]
    for loaded in zoos:
        loaded.require_complete(allow_partial=allow_partial)
    for loaded in zoos:
        _write_baselines(loaded, results, device=device, n_boot=n_boot, allow_partial=allow_partial)


def _cited_zoo_option():
    """--zoo of verify and leaderboard add: where the zoo a record cites is (default: found by its table hash)."""
    return typer.Option(None, "--zoo", help="a copy of the zoo the records cite: folder, local name or "
                        "hf://ORG/NAME[@REVISION] (default: the record's own zoo, else the canonical copy on the Hub "
                        "found by the record's table hash)")


def _submissions_option() -> Any:
    """--submissions of `verify` and `leaderboard add`: where a submission's code is taken from, never the record."""
    return typer.Option(None, "--submissions", help="the trusted folder of submissions a submission's record is "
                        "re-run from, as DIR/NAME (default: the checkout's submissions/)")


@app.command("verify")
def verify_cmd(records: list[Path] = typer.Argument(..., help="result record files (ZOO/NAME.json in a results "
                                                                 "folder)"),
               rtol: float = typer.Option(1e-5, help="relative tolerance"),
               atol: float = typer.Option(1e-8, help="absolute tolerance"),
               device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
               submissions: Optional[Path] = _submissions_option(),
               zoo: Optional[str] = _cited_zoo_option(),
               ) -> None:
    """Recompute records from scratch (no cache); fail and show the differences if they do not reproduce.

    A submission's record is re-made in the sandbox from SUBMISSIONS/NAME only, and every field but the timings
    is compared."""
    from .leaderboard.verify import verify_record
    from .submit import rerun_record

    failed = 0
    for path in records:
        v = verify_record(path, rtol=rtol, atol=atol, device=device, submissions=submissions, rerun=rerun_record,
                          zoo=zoo)
        if v.ok:
            console.print(f"[green]reproduced[/green] {path} (rtol {rtol:g}, atol {atol:g})")
            continue
        failed += 1
        console.print(f"[red]does not reproduce[/red] {path}")
        _print_why(v)
    if failed:
        raise typer.Exit(1)


def _print_why(v: Verification) -> None:
    """Why a record was not reproduced: its problems, then the numbers that differ beyond the tolerance."""
    for p in v.problems:
        console.print(f"  {p}", markup=False, highlight=False)
    if v.differences:
        t = Table("field", "recorded", "recomputed", title=f"{len(v.differences)} differences beyond "
                                                             f"rtol {v.rtol:g}, atol {v.atol:g}")
        for field_, old, new in v.differences[:40]:
            t.add_row(field_, str(old)[:40], str(new)[:40])
        console.print(t)


@leaderboard_app.command("add")
def leaderboard_add(records: list[Path] = typer.Argument(..., help="result record files, e.g. "
                                                          "$GENBENCH_HOME/results/ZOO/NAME.json"),
                    to: Optional[Path] = typer.Option(None, "--to", help="the shipped folder of verified records "
                                                      f"(default: the {SHIPPED_RESULTS} of the checkout genbench "
                                                      "runs from)"),
                    rtol: float = typer.Option(1e-5, help="relative tolerance"),
                    atol: float = typer.Option(1e-8, help="absolute tolerance"),
                    device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
                    submissions: Optional[Path] = _submissions_option(),
                    zoo: Optional[str] = _cited_zoo_option(),
                    ) -> None:
    """Verify records and copy each one that reproduces into the shipped folder of verified records.

    Each record is recomputed from scratch (no cache) and copied atomically when every number reproduces; failed
    records and those that do not reproduce are refused, saying why."""
    from rich.markup import escape

    from . import paths
    from .leaderboard.verify import add_record
    from .submit import rerun_record

    if to is None:
        to = paths.shipped_results_dir()
        if to is None:
            raise GenbenchError(f"genbench runs from an installed package ({Path(__file__).parent}), not from a "
                                f"checkout of its repository, so there is no shipped {SHIPPED_RESULTS} to add to; "
                                f"pass --to CHECKOUT/{SHIPPED_RESULTS}")
    refused = 0
    for path in records:
        v = add_record(path, to, rtol=rtol, atol=atol, device=device, submissions=submissions, rerun=rerun_record,
                       zoo=zoo)
        if v.ok:
            how = f"reproduced within rtol {rtol:g}, atol {atol:g}" + ("; replaced the record there" if v.replaced
                                                                        else "")
            console.print(f"[green]added[/green] {escape(str(path))} -> {escape(str(v.added))} ({how})",
                          highlight=False)
            continue
        refused += 1
        console.print(f"[red]refused[/red] {escape(str(path))}: " + ("does not reproduce" if v.differences else
                                                                     "not added"), highlight=False)
        _print_why(v)
    if refused:
        raise typer.Exit(1)


@measures_app.command("list")
def measures_list(pattern: str = typer.Argument("*", help="glob pattern, e.g. 'margin.*'")) -> None:
    """List the registered measures: kind, needs, transform and what each computes."""
    from .measures import get_measure, list_measures

    names = list_measures(pattern)
    if not names:
        raise GenbenchError(f"no measure matches {pattern!r}; `genbench measures list` shows them all")
    t = Table("measure", "kind", "needs", "phi", "what it computes", title=f"{len(names)} measures",
              caption="kind: scalar (one number per model) or signature (a vector per model, regressed as in "
                      "DEMOGEN); needs: what the measure sees besides the model (train_data: the exact training "
                      "set; init_weights: the model at initialisation; augment: the zoo's augmentation); phi: "
                      "the transform the scorer applies before regressing (log or linear; empty: the raw value)",
              caption_justify="left")
    for n in names:
        m = get_measure(n)
        t.add_row(n, m.kind, ",".join(m.needs), m.transform or "", m.doc)
    console.print(t)


@measures_app.command("check")
def measures_check(names: list[str] = typer.Argument(..., help="measure names or glob patterns"),
                   zoo: Optional[str] = typer.Option(None, help=f"zoo to check on (default: {CHECK_ZOO}, built if missing)"),
                   models: int = typer.Option(2, help="number of models to run on"),
                   budget_s: float = typer.Option(60.0, "--budget-s", help="seconds allowed per model"),
                   device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
                   ) -> None:
    """Run the conformance suite: deterministic, finite, stable shape, budget, invariances."""
    from .harness import check_measure
    from .measures import resolve_measures

    _check_limits(seconds={"--budget-s": budget_s}, counts={"--models": models})
    failed = 0
    for m in resolve_measures(names):
        report = check_measure(m, zoo, models=models, budget_s=budget_s, device=device)
        console.print(str(report), style=None if report.passed else "red", highlight=False)
        failed += not report.passed
    if failed:
        raise typer.Exit(1)


@app.command("evaluate")
def evaluate_cmd(measures: list[str] = typer.Argument(..., help="measure names or glob patterns, e.g. 'margin.*'"),
                 zoo: str = typer.Option(..., "--zoo", help="zoo name or folder"),
                 device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
                 budget_s: float = typer.Option(BUDGET_S, "--budget-s", help="seconds allowed per model and measure"),
                 models: Optional[list[str]] = typer.Option(None, "--models", help="model ids or glob patterns"),
                 seed: int = typer.Option(SEED, help="seed of every measure's generator"),
                 out: Optional[Path] = typer.Option(None, help="value table (default: $GENBENCH_HOME/values/ZOO.parquet)"),
                 no_cache: bool = typer.Option(False, "--no-cache", help="recompute every value"),
                 executor: str = typer.Option("local", help="where to run the per-model tasks: local or ray"),
                 address: Optional[str] = typer.Option(None, help="Ray cluster address (with --executor ray)"),
                 ) -> None:
    """Run measures on every model of a zoo; values are cached, failures are recorded per model."""
    from .harness import evaluate, save_values, values_path
    from .zoo import load_zoo

    _check_limits(seconds={"--budget-s": budget_s})
    z = load_zoo(zoo)
    df = evaluate(measures, z, device=device, executor=executor, models=models, seed=seed, budget_s=budget_s,
                  cache=not no_cache, address=address)
    path = save_values(df, out or values_path(z.name), replace=out is None)  # never overwrites another zoo's --out
    t = Table("measure", "kind", "ok", "failed", "seconds", "first failure", title=f"{z.name}: {len(df)} models")
    for name, info in df.attrs["measures"].items():
        errors = df[f"{name}:error"]
        first = next((f"{mid}: {e}" for mid, e in zip(df["model_id"], errors) if e), "")
        t.add_row(name, info["kind"], str(int(errors.isna().sum())), str(int(errors.notna().sum())),
                  f"{df.attrs['seconds'].get(name, 0.0):.1f}", first[:80])
    console.print(t)
    console.print(f"values: {path}")


@app.command("score")
def score_cmd(measures: Optional[list[str]] = typer.Argument(None, help="measures or glob patterns (default: all evaluated)"),
              zoo: str = typer.Option(..., "--zoo", help="zoo name or folder"),
              target: str = typer.Option("gap", help="gap or test_acc"),
              table: Optional[str] = typer.Option(None, help="'demogen': the DEMOGEN ablation tables 1 and 4"),
              n_boot: int = typer.Option(N_BOOT, "--n-boot", help="bootstrap resamples for the 95% intervals"),
              values: Optional[Path] = typer.Option(None, help="value table (default: $GENBENCH_HOME/values/ZOO.parquet)"),
              allow_partial: bool = typer.Option(False, "--allow-partial", help="score a partial zoo (not every "
                                                 "model of its recipe built): the scores describe those models only"),
              ) -> None:
    """Score measures: adjusted and k-fold R^2, MSE, Kendall tau, Psi, CMI, robust sign-error, 95% intervals."""
    from .harness.values import values_for
    from .leaderboard.schema import score_spec
    from .scoring import score
    from .scoring.demogen import MEASURES, demogen_table
    from .zoo import load_zoo

    if table not in (None, "demogen"):
        raise GenbenchError(f"unknown table {table!r}; the only table is 'demogen'")
    _check_limits(counts={"--n-boot": n_boot})
    z = load_zoo(zoo)
    z.require_complete(allow_partial=allow_partial)  # before any value is computed
    if not z.complete:
        console.print(f"note: zoo {z.name!r} is {z.state()}; the scores describe these models only",
                      style="yellow", markup=False, highlight=False)
    df, wanted = values_for(z, list(measures or (MEASURES if table else [])), values, note=console.print)
    scores = score(df, z, target=target, measures=wanted, n_boot=n_boot, allow_partial=allow_partial)
    if table == "demogen":
        from .scoring.demogen import FIXED_NOTE
        for which, title in ((1, "Table 1: ablations"), (4, "Table 4: single layers, qrt+log")):
            t = Table("setting", "adj R2 [95%]", "k-fold R2 [95%]", "k-fold R2 per fold", "MSE x1e-3 [95%]",
                      "paper adj R2", "paper kf R2", "paper MSE",
                      title=f"DEMOGEN {title} on {z.name} (paper: CNN on CIFAR-10)")
            for _, r in demogen_table(scores, which).iterrows():
                t.add_row(r["setting"],
                          *(number(r[k], r[f"{k}_lo"], r[f"{k}_hi"]) for k in ("adj_r2", "kfold_r2")),
                          number(r["kfold_r2_folds"]), number(r["mse"], r["mse_lo"], r["mse_hi"]),
                          number(r["paper_adj_r2"]),
                          "negative" if r["paper_kfold_r2"] is None else number(r["paper_kfold_r2"]),
                          number(r["paper_mse"]))
            console.print(t)
        console.print("k-fold R2: pooled over the held-out predictions, mean of 10 shuffles of 10-fold CV; per fold: "
                      f"the paper's mean of per-fold R2 (unstable on small folds). {FIXED_NOTE}.",
                      markup=False, highlight=False)
        return
    head = ("adj_r2", "kfold_r2", "tau", "psi", "cmi")
    t = Table("measure", "phi", *(score_spec(k).ascii for k in head), "sign-error worst/mean", "notes",
              title=f"{z.name}: target {target}, {len(scores)} measures, 95% paired bootstrap intervals")
    for s in sorted(scores, key=lambda s: -(s.values.get("kfold_r2", float("-inf")))):
        cells = [number(s.values.get(k), *s.intervals.get(k, ())) if k not in s.refused else "refused"
                 for k in head]
        t.add_row(s.measure, s.transform_used.get("all", s.transform or ""), *cells,
                  f"{number(s.values.get('sign_error_worst'))}/{number(s.values.get('sign_error_mean'))}",
                  "; ".join([*s.notes, *(f"{k}: {v}" for k, v in s.refused.items())]))
    console.print(t)


if TYPE_CHECKING:
    from .scoring.audit import Check, FragilityReport


def _audit_outcome(c: Check, missing: dict[str, str]) -> str:
    """A check's outcome cell: failed (its label), passed, n/a, or passed on too little evidence."""
    if c.failed is None:
        return "[dim]n/a[/dim]"
    if c.failed:
        return f"[red]{c.label}[/red]"
    return "[yellow]ok, too little evidence[/yellow]" if c.part in missing else "[green]ok[/green]"


def _print_verdict(report: FragilityReport) -> None:
    """The verdict, the evidence of every part against its minimum, and the missing parts with their reasons."""
    from rich.markup import escape
    verdict, missing = report.verdict, report.missing
    colour = "green" if verdict == "robust" else "yellow" if verdict.startswith("inconclusive") else "red"
    for e in report.evidence:
        console.print(f"evidence: {escape(e.part)} rests on {e.n} {escape(e.unit)} (needs >= {e.minimum})")
    for part, why in missing.items():
        console.print(f"[yellow]missing[/yellow] {escape(part)}: {escape(why)}")
    console.print(f"verdict: [bold {colour}]{escape(verdict)}[/bold {colour}]")


@app.command("audit")
def audit_cmd(measure: str = typer.Argument(..., help="the measure to audit"),
              zoo: str = typer.Option(AUDIT_ZOO, "--zoo", help="zoo name or folder (twins and learning curves)"),
              device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
              control_models: int = typer.Option(4, "--control-models", help="models in the rescaling control"),
              n_boot: int = typer.Option(N_BOOT, "--n-boot", help="accepted for scripts; the audit's tests are "
                                         "analytic (seed-level standard errors), not bootstrapped"),
              details: bool = typer.Option(False, "--details", help="also print the per-cell and per-curve tables"),
              json_out: Optional[Path] = typer.Option(None, "--json", help="write the report as JSON here"),
              plot: Optional[Path] = typer.Option(None, "--plot", help="write the learning curves (measure and test "
                                                  "error against train size, per arm) here: .svg or .png"),
              ) -> None:
    """Fragility audit: do value, trend and scaling survive small changes of training? Thresholds printed."""
    from rich.markup import escape

    from .fileio import write_json_atomic
    from .scoring import audit
    from .zoo import load_zoo

    _check_limits(counts={"--n-boot": n_boot})
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise GenbenchError(f"--plot {plot}: the extension must be .svg or .png, got {plot.suffix or 'none'!r}")
    z = load_zoo(zoo)
    report = audit(measure, z, device=device, control_models=control_models, n_boot=n_boot)
    admitted = ", ".join(f"{k} {v:.0%}" for k, v in report.admitted.items()) or "no twins"
    console.print(f"[bold]{measure}[/bold] on {z.name} ({report.form} form); admissible twin cells: {admitted}")
    t = Table("part", "statistic", "value", "threshold (fails if)", "outcome", "detail",
              title=f"fragility audit of {measure}")
    for c in report.checks:
        t.add_row(c.part, c.statistic, number(c.value), escape(c.threshold), _audit_outcome(c, report.missing),
                  escape(c.detail))
    console.print(t)
    if details:
        for name, df in (("twin cells", report.cells), ("learning curves", report.curves),
                         ("data sensitivity", report.data), ("rescaling control", report.control)):
            if not df.empty:
                console.print(f"[bold]{name}[/bold]")
                console.print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for note in report.notes:
        console.print(f"note: {note}")
    _print_verdict(report)
    if json_out:
        write_json_atomic(json_out, report.to_dict())
        console.print(f"report written to {json_out}")
    if plot is not None:
        from .leaderboard.curves import write_curve_plot
        write_curve_plot(report, plot, measure=measure, form=report.form)
        console.print(f"learning curves written to {plot}")


@app.command("submit")
def submit_cmd(folder: Path = typer.Argument(..., help="submission folder: submissions/NAME (measure.py + submission.yaml)"),
               zoo: Optional[list[str]] = typer.Option(None, "--zoo", help="zoo(s) to score on (default: the "
                                                       f"submission's `zoos`, else {DEFAULT_ZOO})"),
               budget_s: float = typer.Option(BUDGET_S, "--budget-s", help="seconds allowed per model"),
               memory_gb: float = typer.Option(4.0, "--memory-gb", help="memory cap of the child process, in GB"),
               timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                                         help="wall-clock limit of the whole run (default: generous, "
                                                              "from the number of models and the budget)"),
               results: Optional[Path] = typer.Option(None, "--results", help="folder to write the records to "
                                                      "(default: $GENBENCH_HOME/results)"),
               no_audit: bool = typer.Option(False, "--no-audit", help="skip the fragility audit"),
               audit_zoo: str = typer.Option(AUDIT_ZOO, "--audit-zoo", help="zoo for the fragility audit"),
               device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
               n_boot: int = typer.Option(N_BOOT, "--n-boot", help="bootstrap resamples for the 95% intervals"),
               allow_partial: bool = typer.Option(False, "--allow-partial", help="score on a partial zoo too (not "
                                                  "every model of its recipe built): the record is marked partial "
                                                  "and not ranked"),
               unsandboxed: bool = typer.Option(False, "--unsandboxed", help="run the submitted code without the "
                                                "bubblewrap sandbox, where bwrap cannot run (it then sees everything "
                                                "you can; its records say so and never verify)"),
               ) -> None:
    """Score a submitted measure in a child process (time budget, memory cap) and write its result records."""
    from .leaderboard.ranking import partial_note
    from .leaderboard.schema import HEADLINE, Record, score_spec
    from .submit import load_submission, submit, summarize

    _check_limits(seconds={"--budget-s": budget_s, "--memory-gb": memory_gb, "--timeout-s": timeout_s},
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
            console.print(f"[{colour}]{zname}: ok[/{colour}]  {headline}  audit: {s['verdict']}{note}",
                          highlight=False)
        console.print(f"  record: {path}", highlight=False)
    if failed < len(paths):
        console.print("`genbench leaderboard` ranks it beside the shipped records (marked local: not verified); "
                      "`genbench leaderboard add RECORD` verifies it and adds it to them", markup=False,
                      highlight=False)
    if failed:
        raise typer.Exit(1)


def main() -> None:
    """Entry point: user errors become one readable line and exit status 2."""
    keep_freed_memory()
    try:
        app()
    except GenbenchError as e:
        Console(stderr=True).print(f"[bold red]error:[/bold red] {e}", highlight=False)
        sys.exit(2)
