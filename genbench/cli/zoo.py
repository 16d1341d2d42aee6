"""`genbench zoo ...`: build, inspect, verify, download, publish and import model zoos."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Table

from ..errors import GenbenchError
from ..paths import check_writable
from .app import console, zoo_app
from .options import Address, Device, Executor, Private, Repo, check_address, overrides

if TYPE_CHECKING:
    from ..zoo.hub import Pushed
    from ..zoo.storage import Zoo


@zoo_app.command("list", epilog="Example: genbench zoo list")
def zoo_list() -> None:
    """List every recipe (and the shipped trainings of the official grids) and every zoo folder under
    $GENBENCH_HOME/zoos, each with its role (official, training K of an official grid, demo, audit, test, recipe,
    own or imported) and state: complete, partial (N of M models), empty, broken (unreadable) or not built."""
    from rich.markup import escape

    from ..leaderboard.terminal import width

    rows = zoo_listing()

    def build(notes: bool) -> Table:
        table = Table("name", "role", "state", "models", *(["note"] if notes else []))
        table.columns[0].no_wrap = True
        if notes:
            table.columns[4].no_wrap = True  # a command to copy stays on its line
        for row in rows:
            table.add_row(*(escape(v) for v in row[:5 if notes else 4]))
        return table

    table = build(notes=True)
    if width(table) <= console.width:
        console.print(table)
        return
    console.print(build(notes=False))  # a narrow terminal: each note on lines of its own, words kept whole
    for name, *_, note in rows:
        if note:
            console.print(f"{name}: {note}", markup=False, highlight=False)


def zoo_listing() -> list[tuple[str, str, str, str, str]]:
    """The rows of `genbench zoo list`: (name, role, state, models, note), by name."""
    from ..defaults import OFFICIAL_ZOOS, official_trainings
    from ..zoo import list_recipes
    from ..zoo.roles import build_command_of, build_time, zoo_role
    from ..zoo.storage import Zoo, local_zoo_states

    names = set(list_recipes()) | {t for grid in OFFICIAL_ZOOS for t in official_trainings(grid)}
    states = {s.name: s for s in local_zoo_states()}
    rows = []
    for name in sorted(names | set(states)):
        st = states.get(name)
        if st is None:
            rows.append((name, zoo_role(name), "not built", "", f"{build_time(name)}: {build_command_of(name)}"))
            continue
        try:
            role = zoo_role(name, Zoo(st.root)) if st.state in ("complete", "partial") else zoo_role(name)
        except GenbenchError:
            role = zoo_role(name)
        models = ("" if st.models is None else str(st.models) if st.state == "complete" or st.expected is None
                  else f"{st.models} of {st.expected}")
        rows.append((name, role, st.state, models, st.detail))
    return rows


@zoo_app.command("build", epilog="Example: genbench zoo build demogen-nin-mnist1d (resumes where it stopped)")
def zoo_build(recipe: str = typer.Argument(..., help="recipe name (model_zoo/NAME.yaml) or path to a YAML file"),
              limit: Optional[int] = typer.Option(None, help="build only the first N models of the grid"),
              device: Device = None,
              out: Optional[Path] = typer.Option(None, help="zoo folder (default: $GENBENCH_HOME/zoos/NAME)"),
              set_: list[str] = typer.Option([], "--set", help="override a recipe key, e.g. --set train.epochs=2"),
              executor: Executor = "local",
              address: Address = None,
              training: str = typer.Option("0", "--training", help="K >= 1: training K of the recipe's grid, the "
                                           "zoo RECIPE-tK (same models and data, every training-noise seed changed)"),
              private: bool = typer.Option(False, "--private", help="the maintainers' secret training of the grid "
                                           "($GENBENCH_PRIVATE_TRAINING), as RECIPE-private under "
                                           "$GENBENCH_HOME/private/zoos: never published, never pushed"),
              ) -> None:
    """Train the models of a recipe (resumes: finished models are kept)."""
    from ..zoo.recipe import check_training
    check_address(executor, address)
    k = check_training(training)  # a bad K is refused before anything is written
    if private:
        if k or out is not None:
            raise GenbenchError("--private builds the secret training into $GENBENCH_HOME/private/zoos; it takes "
                                "neither --training (a public training) nor --out")
        _build_private(recipe, limit=limit, device=device, overrides=overrides(set_), executor=executor,
                       address=address)
        return
    check_writable(None, out)  # before any training
    from ..zoo import build_zoo

    zoo = build_zoo(recipe, out, limit=limit, device=device, overrides=overrides(set_), executor=executor,
                    address=address, training=k)
    console.print(f"zoo {zoo.name!r}: {len(zoo)} models in {zoo.root}")
    print_info(zoo)


def _build_private(recipe: str, **kw) -> None:
    """`zoo build --private`: the secret training built, and said without its index."""
    from ..zoo.private import build_private_zoo, load_secret, private_dir
    load_secret()  # no secret, or a public index: refused before anything is written
    check_writable(private_dir())
    zoo = build_private_zoo(recipe, **kw)
    state = "complete" if zoo.complete else f"partial, {zoo.missing_count} models missing"
    console.print(f"private zoo {zoo.name!r}: {len(zoo)} models ({state}) in {zoo.root}; never published (zoo push "
                  "refuses it): `genbench leaderboard private RECORD` scores records on it", markup=False,
                  highlight=False)


def print_info(zoo: Zoo) -> None:
    """A zoo's size, accuracy and gap ranges, grid axes, convergence and state."""
    from ..zoo.card import summary

    s = summary(zoo)
    count = f"{s['models']} models" if zoo.complete else f"{s['models']} of {s['expected_models']} models: partial"
    # the title on lines of its own, never wrapped by rich: a table's title is cut to the table's width, which broke
    # the zoo's name and folder mid-word (`mnist1d|-demogen`)
    console.print(f"{zoo.name} ({count})", style="bold", markup=False, highlight=False, soft_wrap=True)
    console.print(f"  folder: {zoo.root}", markup=False, highlight=False, soft_wrap=True)
    t = Table(show_header=True)
    t.add_column("")
    t.add_column("min", justify="right")
    t.add_column("max", justify="right")
    for col, label in (("train_acc", "train accuracy"), ("test_acc", "test accuracy"), ("gap", "gap")):
        t.add_row(label, f"{s[col + '_min']:.3f}", f"{s[col + '_max']:.3f}")
    console.print(t)
    for axis, values in zoo.hparams.items():
        console.print(f"  {axis}: {values}")
    from ..zoo.roles import manifest_training, recipe_of, zoo_role
    grid, k = manifest_training(zoo.manifest)
    training = (f"; training {k} of the grid {grid}" if k else "; training 0 (the recipe's own zoo)"
                if recipe_of(zoo.name) else "")
    console.print(f"  role: {zoo_role(zoo.name, zoo)}{training}", markup=False, highlight=False)
    if "converged" in s:
        console.print(f"  converged (stopping rule met): {s['converged']}/{s['models']}")
    console.print(f"  training time (sum over models): {s['train_seconds']:.1f} s")
    console.print(f"  {zoo.state()}", markup=False, highlight=False, style=None if zoo.complete else "yellow")


@zoo_app.command("info", epilog="Example: genbench zoo info mnist1d-demogen")
def zoo_info(zoo: str = typer.Argument(..., help="zoo name or folder")) -> None:
    """Summarise a zoo: size, accuracy and gap ranges, grid axes."""
    from ..zoo import load_zoo

    print_info(load_zoo(zoo))


@zoo_app.command("verify", epilog="Example: genbench zoo verify mnist1d-demogen")
def zoo_verify(zoo: str = typer.Argument(..., help="zoo name or folder")) -> None:
    """Re-hash every file of a zoo against its recorded sha256, and name files of its folder that are no part of it
    (checkpoints its table does not cite, data zoo.json does not list)."""
    from ..zoo import load_zoo

    z = load_zoo(zoo)
    problems = z.verify()
    for rel in z.stray_files():  # never read by genbench: a note, not a failure (an interrupted build leaves some)
        console.print(f"note: {z.root / rel} is not part of zoo {z.name!r} (neither its table nor zoo.json cites it; "
                      "genbench never reads it): delete it or move it away", style="yellow", markup=False,
                      highlight=False, soft_wrap=True)
    for p in problems:
        console.print(p, style="red", markup=False, highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)
    console.print(f"zoo {z.name!r}: all {2 * len(z) + len(z.manifest['files'])} files match their sha256")


import_app = typer.Typer(help="Import a zoo published elsewhere as an ordinary genbench zoo.", no_args_is_help=True)
zoo_app.add_typer(import_app, name="import")


@import_app.command("pgdl", epilog="Example: genbench zoo import pgdl public_data/input_data/task1_v4")
def zoo_import_pgdl(task_dir: Path = typer.Argument(..., help="PGDL task folder: model_configs.json, model_*/ "
                                                              "(config.json, weights.hdf5, weights_init.hdf5), dataset_1/"),
                    name: Optional[str] = typer.Option(None, help="zoo name (default: pgdl-<task folder name>)"),
                    out: Optional[Path] = typer.Option(None, help="zoo folder (default: $GENBENCH_HOME/zoos/NAME)"),
                    tolerance: float = typer.Option(1e-3, "--tolerance", help="largest difference allowed between a "
                                                    "recomputed and a recorded accuracy"),
                    ) -> None:
    """Import a task of the PGDL competition (NeurIPS 2020): its Keras models rebuilt in torch, their recorded
    accuracies checked against genbench's recomputation, the task's data stored with the zoo."""
    from ..zoo.importers.pgdl import import_pgdl

    check_writable(None, out)  # before any model is rebuilt
    if not 0 <= tolerance < 1:
        raise GenbenchError(f"--tolerance must be in [0, 1), got {tolerance}")
    zoo = import_pgdl(task_dir, name=name, out=out, tolerance=tolerance)
    t = zoo.table
    worst = max((t[f"recomputed_{s}_acc"] - t[f"{s}_acc"]).abs().max(skipna=True) for s in ("train", "test"))
    console.print(f"imported PGDL task {task_dir} as zoo {zoo.name!r}: {len(zoo)} models in {zoo.root}; "
                  f"recomputed accuracies match the recorded ones (largest difference {worst:.2g})", highlight=False)
    print_info(zoo)


@import_app.command("small-cnn-zoo",
                    epilog="Example: genbench zoo import small-cnn-zoo small-cnn-zoo/mnist --limit 100")
def zoo_import_small_cnn_zoo(folder: Path = typer.Argument(..., help="a dataset folder of the Small CNN Zoo: "
                                                           "weights.npy, metrics.csv.gz, layout.csv"),
                             dataset: Optional[str] = typer.Option(None, help="cifar10, svhn, mnist or fashion_mnist "
                                                                   "(default: the config.dataset column)"),
                             limit: Optional[int] = typer.Option(None, help="import the first N runs only"),
                             step: int = typer.Option(86, help="the checkpoint to import (the run's step-0 "
                                                      "checkpoint is its init)"),
                             name: Optional[str] = typer.Option(None, help="zoo name (default: "
                                                                "small-cnn-zoo-<dataset>)"),
                             out: Optional[Path] = typer.Option(None, help="zoo folder (default: "
                                                                "$GENBENCH_HOME/zoos/NAME)"),
                             ) -> None:
    """Import the Small CNN Zoo (Unterthiner et al. 2020): one model per run, its final and step-0 checkpoints rebuilt
    in torch, hyperparameters and recorded accuracies from metrics.csv.gz; no training data (weight-only measures)."""
    from ..zoo.importers.small_cnn_zoo import import_small_cnn_zoo

    check_writable(None, out)  # before any model is rebuilt
    zoo = import_small_cnn_zoo(folder, dataset=dataset, limit=limit, step=step, name=name, out=out)
    skipped = zoo.manifest["imported"]["skipped"]
    console.print(f"imported the Small CNN Zoo at {folder} as zoo {zoo.name!r}: {len(zoo)} models in {zoo.root}"
                  + ("; skipped: " + ", ".join(f"{v} ({k})" for k, v in skipped.items()) if skipped else ""),
                  highlight=False)
    console.print("no training data: measures that need it are refused on this zoo; weight-only measures run",
                  style="yellow", highlight=False)
    print_info(zoo)


@zoo_app.command("download", epilog="Example: genbench zoo download genbench/mnist1d-demogen --models 'w64_*'")
def zoo_download(repo: str = typer.Argument(..., help="Hub dataset repo ORG/NAME (or hf://ORG/NAME)"),
                 revision: Optional[str] = typer.Option(None, help="branch, tag or commit SHA (default: main)"),
                 models: Optional[list[str]] = typer.Option(None, "--models", help="only these model ids or glob patterns"),
                 force: bool = typer.Option(False, "--force", help="download again even if in the HF cache"),
                 ) -> None:
    """Download a zoo from the Hub into the HF cache; every file is checked against zoo.json."""
    from ..zoo.hub import download_zoo

    z = download_zoo(repo, revision=revision, models=models, force=force)
    console.print(f"zoo {z.name!r} from {z.repo_id} at commit {z.revision}: {len(z)} models in {z.root}")
    if z.missing_models:
        console.print(f"  not downloaded: {len(z.missing_models)} models (fetch them with --models)")
    console.print(f"  open it with gb.load_zoo('hf://{z.repo_id}', revision='{z.revision}')")


@zoo_app.command("get", epilog="Example: genbench zoo get demogen-nin-mnist1d")
def zoo_get(name: str = typer.Argument(..., help="one of genbench's zoos (a recipe, or a shipped training RECIPE-tK "
                                        "of an official grid)")) -> None:
    """Get the official copy of one of genbench's zoos: downloaded from its canonical Hub repo when reachable, else
    built; refused when its table hash differs from the one the shipped records cite."""
    from ..zoo.hub import get_zoo

    zoo, how = get_zoo(name, note=lambda text: console.print(text, markup=False, highlight=False))
    console.print(f"zoo {zoo.name!r} ({how}): {len(zoo)} models in {zoo.root}, table sha256 "
                  f"{zoo.table_sha256[:12]}...", markup=False, highlight=False)


@zoo_app.command("push", epilog="Example: genbench zoo push mnist1d-demogen ORG/mnist1d-demogen")
def zoo_push(folder: str = typer.Argument(..., help="zoo folder (or the name of a locally built zoo)"),
             repo: Repo = ...,
             private: Private = False,
             ) -> None:
    """Publish a zoo as a Hub dataset repo (verified first; the card makes the table load with `datasets`)."""
    from ..zoo.hub import push_zoo

    pushed = push_zoo(folder, repo, private=private)
    report_push(pushed, "files")
    console.print(f"  tagged {pushed.tag}: records made on this zoo are verified against exactly this copy")
    console.print(f"  download it with `genbench zoo download {pushed.repo_id}` (add --revision {pushed.tag} for "
                  "this version)")


def report_push(pushed: Pushed, what: str) -> None:
    """One line: how many files went where, and the commit they made."""
    console.print(f"pushed {len(pushed.files)} {what} to {pushed.url}" + (f" (commit {pushed.commit})" if pushed.commit else ""))
