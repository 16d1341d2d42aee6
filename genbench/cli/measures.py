"""`genbench measures ...`: list the registered measures and run their conformance suite."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Column, Table

from ..defaults import CHECK_ZOO
from ..errors import GenbenchError, did_you_mean
from ..text import safe_text
from .app import console, measures_app
from .options import BudgetS, Device, check_limits


@measures_app.command("list", epilog="Example: genbench measures list 'margin.*'")
def measures_list(pattern: str = typer.Argument("*", help="glob pattern, e.g. 'margin.*'")) -> None:
    """List the registered measures: kind, needs, transform and what each computes."""
    from ..leaderboard.terminal import width as table_width
    from ..measures import get_measure, list_measures

    names = list_measures(pattern)
    if not names and not any(c in pattern for c in "*?["):  # a name, not a pattern: suggest the closest
        raise did_you_mean(pattern, list_measures(), what="measure", hint="`genbench measures list` shows them all")
    if not names:
        raise GenbenchError(f"no measure matches {pattern!r}; `genbench measures list` shows them all")
    caption = ("kind: scalar (one number per model) or signature (a vector per model, regressed as in DEMOGEN); "
               "needs: what the measure sees besides the model (train_data: the exact training set; init_weights: "
               "the model at initialisation; augment: the zoo's augmentation); phi: the transform the scorer applies "
               "before regressing (log or linear; empty: the raw value)")
    measures = [get_measure(n) for n in names]
    longest = max(len(n) for n in names)
    needs = max([len(x) for m in measures for x in m.needs] + [5])

    def build(layout: str) -> Table:
        """wide: what a measure computes in its own column; medium: under its name; narrow: needs and phi too."""
        t = Table(Column("measure", no_wrap=layout == "wide", min_width=longest, ratio=None if layout == "wide" else 1),
                  Column("kind", no_wrap=True),
                  *([Column("needs", no_wrap=True, min_width=needs), Column("phi", no_wrap=True)]
                    if layout != "narrow" else []),
                  *([Column("what it computes", ratio=1, min_width=20)] if layout == "wide" else []),
                  title=f"{len(names)} measures", caption=caption, caption_justify="left")
        for n, m in zip(names, measures):
            doc = safe_text(m.doc, limit=None)
            extra = [] if layout != "narrow" else [f"needs: {', '.join(m.needs) or '-'}; phi: {m.transform or '-'}"]
            cell = n if layout == "wide" else "\n".join([n, f"[dim]{doc}[/dim]", *extra])
            t.add_row(cell, m.kind, *(["\n".join(m.needs), m.transform or ""] if layout != "narrow" else []),
                      *([doc] if layout == "wide" else []))
        return t

    # no name, need or word is cut: names and needs never wrap; what a measure computes wraps at spaces, in its own
    # column on a wide terminal, under the measure's name on a narrow one
    t = build("wide") if console.width >= longest + needs + 60 else build("medium")
    if table_width(t) > console.width:
        t = build("narrow")
    console.print(t)


@measures_app.command("check", epilog="Example: genbench measures check norm.fro_prod --models 2")
def measures_check(names: list[str] = typer.Argument(..., help="measure names or glob patterns"),
                   zoo: Optional[str] = typer.Option(None, help=f"zoo to check on (default: {CHECK_ZOO}, built if missing)"),
                   models: int = typer.Option(2, help="number of models to run on"),
                   budget_s: BudgetS = 60.0,
                   device: Device = None,
                   ) -> None:
    """Run the conformance suite: deterministic, finite, stable shape, budget, invariances."""
    from ..harness import check_measure
    from ..measures import resolve_measures

    check_limits(seconds={"--budget-s": budget_s}, counts={"--models": models})
    names = resolve_measures(names)  # an unknown measure fails before any zoo is built
    if zoo is None:
        zoo = build_check_zoo()
    failed = 0
    for m in names:
        report = check_measure(m, zoo, models=models, budget_s=budget_s, device=device)
        console.print(str(report), style=None if report.passed else "red", highlight=False)
        failed += not report.passed
    if failed:
        raise typer.Exit(1)


def build_check_zoo() -> str:
    """The conformance suite's test zoo, built first (once, saying so and how long it took) when it is missing."""
    import time

    from ..zoo import build_zoo, local_zoos

    if CHECK_ZOO not in local_zoos():
        console.print(f"building the conformance suite's test zoo {CHECK_ZOO} first (once: it is kept under "
                      "$GENBENCH_HOME/zoos) ...", highlight=False)
        start = time.perf_counter()
        build_zoo(CHECK_ZOO, progress=False)
        console.print(f"built {CHECK_ZOO} in {time.perf_counter() - start:.0f} s", highlight=False)
    return CHECK_ZOO
