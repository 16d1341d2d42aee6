"""The `genbench` command: one sub-command per user job."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console
from rich.table import Table

from .errors import GenbenchError

app = typer.Typer(help="genbench: which generalization measures predict the generalization gap?",
                  no_args_is_help=True, pretty_exceptions_enable=False)
zoo_app = typer.Typer(help="Build, inspect and verify model zoos.", no_args_is_help=True)
app.add_typer(zoo_app, name="zoo")
measures_app = typer.Typer(help="List the registered measures and run their conformance suite.", no_args_is_help=True)
app.add_typer(measures_app, name="measures")
console = Console()


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
    """List the recipes in model_zoo/ and the zoos built locally."""
    from .zoo import list_recipes, load_zoo, local_zoos

    table = Table("name", "recipe", "built", "models")
    built = set(local_zoos())
    for name in sorted(set(list_recipes()) | built):
        n = str(len(load_zoo(name))) if name in built else ""
        table.add_row(name, "yes" if name in list_recipes() else "", "yes" if name in built else "", n)
    console.print(table)


@zoo_app.command("build")
def zoo_build(recipe: str = typer.Argument(..., help="recipe name (model_zoo/NAME.yaml) or path to a YAML file"),
              limit: Optional[int] = typer.Option(None, help="build only the first N models of the grid"),
              device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
              out: Optional[Path] = typer.Option(None, help="zoo folder (default: $GENBENCH_HOME/zoos/NAME)"),
              set_: list[str] = typer.Option([], "--set", help="override a recipe key, e.g. --set train.epochs=2"),
              ) -> None:
    """Train the models of a recipe (resumes: finished models are kept)."""
    from .zoo import build_zoo

    zoo = build_zoo(recipe, out, limit=limit, device=device, overrides=_overrides(set_))
    console.print(f"zoo {zoo.name!r}: {len(zoo)} models in {zoo.root}")
    _print_info(zoo)


def _print_info(zoo) -> None:
    from .zoo.card import summary

    s = summary(zoo)
    t = Table(title=f"{zoo.name} ({s['models']} models, {zoo.root})", show_header=True)
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


@measures_app.command("list")
def measures_list(pattern: str = typer.Argument("*", help="glob pattern, e.g. 'margin.*'")) -> None:
    """List the registered measures: kind, needs, transform and what each computes."""
    from .measures import get_measure, list_measures

    names = list_measures(pattern)
    if not names:
        raise GenbenchError(f"no measure matches {pattern!r}; `genbench measures list` shows them all")
    t = Table("measure", "kind", "needs", "phi", "what it computes", title=f"{len(names)} measures")
    for n in names:
        m = get_measure(n)
        t.add_row(n, m.kind, ",".join(m.needs), m.transform or "", m.doc)
    console.print(t)


@measures_app.command("check")
def measures_check(names: list[str] = typer.Argument(..., help="measure names or glob patterns"),
                   zoo: Optional[str] = typer.Option(None, help="zoo to check on (default: digits-mlp, built if missing)"),
                   models: int = typer.Option(2, help="number of models to run on"),
                   budget_s: float = typer.Option(60.0, "--budget-s", help="seconds allowed per model"),
                   device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if present)"),
                   ) -> None:
    """Run the conformance suite: deterministic, finite, stable shape, budget, invariances, no test data."""
    from .measures import check_measure, resolve_measures

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
                 budget_s: float = typer.Option(300.0, "--budget-s", help="seconds allowed per model and measure"),
                 models: Optional[list[str]] = typer.Option(None, "--models", help="model ids or glob patterns"),
                 seed: int = typer.Option(0, help="seed of every measure's generator"),
                 out: Optional[Path] = typer.Option(None, help="value table (default: $GENBENCH_HOME/values/ZOO.parquet)"),
                 no_cache: bool = typer.Option(False, "--no-cache", help="recompute every value"),
                 executor: str = typer.Option("local", help="where to run the per-model tasks"),
                 ) -> None:
    """Run measures on every model of a zoo; values are cached, failures are recorded per model."""
    from .harness import evaluate, save_values, values_path
    from .zoo import load_zoo

    z = load_zoo(zoo)
    df = evaluate(measures, z, device=device, executor=executor, models=models, seed=seed, budget_s=budget_s,
                  cache=not no_cache)
    path = save_values(df, out or values_path(z.name))
    t = Table("measure", "kind", "ok", "failed", "seconds", "first failure", title=f"{z.name}: {len(df)} models")
    for name, info in df.attrs["measures"].items():
        errors = df[f"{name}:error"]
        first = next((f"{mid}: {e}" for mid, e in zip(df["model_id"], errors) if e), "")
        t.add_row(name, info["kind"], str(int(errors.isna().sum())), str(int(errors.notna().sum())),
                  f"{df.attrs['seconds'].get(name, 0.0):.1f}", first[:80])
    console.print(t)
    console.print(f"values: {path}")


def main() -> None:
    """Entry point: user errors become one readable line and exit status 2."""
    try:
        app()
    except GenbenchError as e:
        Console(stderr=True).print(f"[bold red]error:[/bold red] {e}", highlight=False)
        sys.exit(2)
