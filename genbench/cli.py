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


def main() -> None:
    """Entry point: user errors become one readable line and exit status 2."""
    try:
        app()
    except GenbenchError as e:
        Console(stderr=True).print(f"[bold red]error:[/bold red] {e}", highlight=False)
        sys.exit(2)
