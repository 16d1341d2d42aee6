"""Which zoos a submission is scored on when the command line names none: the zoos of its submission.yaml, else the
official zoos built here (the ones the benchmark ranks on), else the demo zoo, said plainly to be not official; and
the lines that say which official zoos are missing and the command that gets each."""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import defaults
from ...errors import GenbenchError
from ...zoo.roles import build_estimate
from .metadata import Submission


@dataclass(frozen=True)
class ZooChoice:
    """The zoos to score on, where they come from ('command line', 'submission.yaml', 'official' or 'demo'), the
    official zoos not built here, and the lines that say so."""

    names: tuple[str, ...]
    source: str
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def get_command(name: str) -> str:
    """The command that gets one of genbench's zoos here (downloaded when the Hub has it, else built); a training
    that is not shipped is built."""
    from ...zoo.hub import is_shipped
    from ...zoo.roles import build_command_of
    return f"genbench zoo get {name}" if is_shipped(name) else build_command_of(name) or f"genbench zoo get {name}"


def missing_line(missing: tuple[str, ...]) -> str:
    """One line: the official zoos not built here, each with the command that gets it and how long building takes."""
    each = "; ".join(f"{z}: `{get_command(z)}` ({build_estimate(z)})" for z in missing)
    return f"official zoos not built here: {each}"


def official_built() -> tuple[list[str], list[str]]:
    """(built, missing): the official zoos with a complete build here, and the others."""
    from .api import known_zoo
    built, missing = [], []
    for name in defaults.OFFICIAL_ZOOS:
        try:
            (built if known_zoo(name).complete else missing).append(name)
        except GenbenchError:
            missing.append(name)
    return built, missing


def choose_zoos(sub: Submission, zoos: list[str] | None = None) -> ZooChoice:
    """The zoos `genbench submit` scores `sub` on: those named on the command line, else those of submission.yaml,
    else the official zoos built here (the missing ones named with their commands), else the demo zoo (not
    official: the line says so and how to get the official ones)."""
    if zoos:
        return ZooChoice(tuple(dict.fromkeys(zoos)), "command line")
    if sub.zoos:
        return ZooChoice(sub.zoos, "submission.yaml")
    built, missing = official_built()
    if built:
        notes = (missing_line(tuple(missing)),) if missing else ()
        return ZooChoice(tuple(built), "official", tuple(missing), notes)
    note = (f"no official zoo is built here: scoring on the demo zoo {defaults.DEFAULT_ZOO}, which is not official "
            f"(its rank is not the benchmark's); {missing_line(tuple(missing))}")
    return ZooChoice((defaults.DEFAULT_ZOO,), "demo", tuple(missing), (note,))
