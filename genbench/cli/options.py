"""The options several commands share, declared once, and the checks of their values."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import yaml

from ..defaults import AUTO_AUDIT
from ..errors import GenbenchError, check_count, check_n_boot, check_seconds
from ..text import plain_text

Device = Annotated[Optional[str], typer.Option(help="cpu, cuda, cuda:N (default: cuda if present)")]
NBoot = Annotated[int, typer.Option("--n-boot", help="bootstrap resamples for the 95% intervals")]
BudgetS = Annotated[float, typer.Option("--budget-s", help="seconds allowed per model and measure")]
Zoo = Annotated[str, typer.Option("--zoo", help="zoo name or folder")]
Zoos = Annotated[list[str], typer.Option("--zoo", help="zoo(s) to score on")]
ResultsOut = Annotated[Optional[Path], typer.Option("--results", help="folder to write the records to (default: "
                                                    "$GENBENCH_HOME/results)")]
Rtol = Annotated[float, typer.Option(help="relative tolerance")]
Atol = Annotated[float, typer.Option(help="absolute tolerance")]
Private = Annotated[bool, typer.Option("--private", help="create the repo private")]
Repo = Annotated[str, typer.Argument(help="Hub dataset repo ORG/NAME to create or update")]
CitedZoo = Annotated[Optional[str], typer.Option(
    "--zoo", help="a copy of the zoo the records cite: folder, local name or hf://ORG/NAME[@REVISION] (default: the "
    "record's own zoo, else the canonical copy on the Hub found by the record's table hash)")]
Submissions = Annotated[Optional[Path], typer.Option(
    "--submissions", help="the trusted folder of submissions a submission's record is re-run from, as DIR/NAME "
    "(default: the checkout's submissions/)")]
Trainings = Annotated[Optional[int], typer.Option("--trainings", help="score on trainings 0..N-1 of the zoo's grid "
                                                   "(default: an official zoo's shipped trainings built here; 1 "
                                                   "elsewhere)")]
Executor = Annotated[str, typer.Option(help="where to run the work: local, or ray (as Ray tasks)")]
Address = Annotated[Optional[str], typer.Option(help="Ray cluster address (with --executor ray)")]
NoAudit = Annotated[bool, typer.Option("--no-audit", help="skip the fragility audit")]
AuditZoo = Annotated[Optional[str], typer.Option("--audit-zoo", help="zoo for the fragility audit ('auto': the audit "
                                                 "zoo of the scored zoo's family; '' skips it, as --no-audit does)")]
AllowPartial = Annotated[bool, typer.Option("--allow-partial", help="score a partial zoo too (not every model of its "
                                            "recipe built): its records are marked partial and not ranked")]


def check_limits(seconds: dict[str, float | None] | None = None, counts: dict[str, int] | None = None) -> None:
    """Refuse budgets, timeouts and memory caps that are not positive finite numbers, and counts below 1, before
    anything runs (a zero, negative or nan budget would turn every model into a failure, or a good record into a
    failure record)."""
    for flag, v in (seconds or {}).items():
        check_seconds(flag, v)
    for flag, v in (counts or {}).items():
        (check_n_boot if flag == "--n-boot" else check_count)(flag, v)


def check_address(executor: str, address: str | None) -> None:
    """Refuse --address without --executor ray in the command line's words (the API says address= and executor=)."""
    if address is not None and executor != "ray":
        raise GenbenchError(f"--address is a Ray cluster's address; pass --executor ray with it (got --executor "
                            f"{executor})")


def audit_choice(no_audit: bool, audit_zoo: str | None) -> str | None:
    """The audit zoo asked for (AUTO_AUDIT: the rule's), None where --no-audit or --audit-zoo '' skips the audit; a
    skip beside a named zoo is refused."""
    if no_audit and audit_zoo not in (AUTO_AUDIT, "", None):
        raise GenbenchError(f"--no-audit skips the fragility audit and --audit-zoo {audit_zoo} names a zoo for it: "
                            "give one of the two")
    chosen = None if no_audit or not audit_zoo else audit_zoo
    if chosen not in (None, AUTO_AUDIT) and not str(chosen).startswith("hf://"):
        from ..zoo.roles import recipe_of
        from ..zoo.storage import load_zoo
        from ..paths import zoos_dir
        from ..scoring.audit import check_audit_zoo
        try:  # said before the scoring, not after it (a recipe's zoo not built yet is said per record)
            z = load_zoo(chosen) if recipe_of(str(chosen)) is None or Path(zoos_dir(), str(chosen)).is_dir() \
                else None
            if z is not None:  # an unknown zoo, one without twins, a partial one: what `genbench audit` refuses
                check_auditable(z)
                check_audit_zoo(z, flag=None)
        except GenbenchError as e:
            raise GenbenchError(f"--audit-zoo {chosen}: {e}") from None
    return chosen


def check_auditable(zoo: Any) -> None:
    """Refuse an audit zoo without twins (the audit could only say 'inconclusive' there), naming the audit zoo of
    its family."""
    from ..scoring.audit import has_twins
    from ..zoo.roles import audit_zoo_of
    if not has_twins(zoo):
        ours = audit_zoo_of(zoo)
        raise GenbenchError(f"zoo {zoo.name!r} has no twins (models trained again with one small change of training), "
                            "so the audit could only say 'inconclusive' there; audit on a zoo with twins, e.g. "
                            f"`--zoo {ours}` (`genbench zoo build {ours}` first, if it is not built)")


def overrides(pairs: list[str]) -> dict:
    """--set KEY=VALUE pairs as a dict of YAML values."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise GenbenchError(f"--set takes KEY=VALUE (e.g. train.epochs=2), got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            from ..zoo.recipe import yaml_problem
            raise GenbenchError(f"--set {plain_text(pair)}: the value is not valid YAML ({yaml_problem(e)}); write "
                                "the value as YAML, e.g. train.epochs=2 or 'grid.width=[8, 16]'") from None
    return out
