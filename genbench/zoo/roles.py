"""What a zoo name stands for: a recipe or a training of one (and the command and time that build it), its role
in the benchmark (official, training of an official grid, demo, audit, test, own), and the audit zoo of its
records (the rule in genbench.defaults, applied to the zoo's architecture family)."""
from __future__ import annotations

from typing import Any

import yaml

from ..defaults import (AUDIT_ZOO, AUTO_AUDIT, BUILD_MINUTES, CHECK_ZOO, CNN_AUDIT_ZOO, CONV_FAMILIES, DEFAULT_ZOO,
                        GPU_ONLY, OFFICIAL_ZOOS, TRAININGS, audit_zoo_for, training_of)
from ..errors import GenbenchError
from .recipe import find_recipe, list_recipes

TEST_ZOOS = (CHECK_ZOO, "digits-nin")  # the tiny zoos the tests and the conformance suite build


def recipe_of(name: str) -> tuple[str, int] | None:
    """(recipe, K) when `name` is a recipe's zoo (K = 0) or training K of a recipe (RECIPE-tK), else None."""
    recipes = set(list_recipes())
    if name in recipes:
        return name, 0
    grid, k = training_of(name)
    return (grid, k) if k and grid in recipes else None


def build_command_of(name: str) -> str | None:
    """The command that builds the zoo `name` into its default folder, or None when no recipe makes it."""
    found = recipe_of(name)
    if found is None:
        return None
    grid, k = found
    return f"genbench zoo build {grid}" + (f" --training {k}" if k else "")


def build_time(name: str) -> str:
    """Roughly how long building the zoo of a recipe (or of a training of it) takes: '~9 min on 2 CPU cores',
    'seconds', 'GPU only' or 'unknown'."""
    grid = (recipe_of(name) or (name, 0))[0]
    if grid in GPU_ONLY:
        return "GPU only"
    if grid in BUILD_MINUTES:
        minutes = BUILD_MINUTES[grid]
        return "seconds" if minutes is None else f"~{minutes:g} min on 2 CPU cores"
    return "unknown"


def build_estimate(name: str) -> str:
    """Roughly how long building the zoo of a recipe (or of a training of it) takes, as 'building it ...'."""
    took = build_time(name)
    if took == "GPU only":
        return "building it needs a GPU (CIFAR data from the Hub; hours on a CPU)"
    if took == "unknown":
        return "no build time is recorded for it"
    return f"building it takes {took.replace('~', 'about ')}"


def not_built(name: str) -> str | None:
    """One line for a zoo a recipe makes but that is not built here: how long building it takes and the command;
    None when no recipe makes `name`."""
    command = build_command_of(name)
    if command is None:
        return None
    return f"zoo {name!r} is not built here; {build_estimate(name)}: `{command}`"


def zoo_role(name: str, zoo: Any = None) -> str:
    """The part a zoo plays: 'official', 'official training K' (a shipped training of an official grid), 'training K'
    (of another grid, or past the shipped trainings: unscored), 'demo', 'audit', 'test', 'recipe' (another of
    genbench's recipes), 'imported' or 'own'."""
    manifest = getattr(zoo, "manifest", None) or {}
    if "imported" in manifest:
        return "imported"
    found = recipe_of(name)
    if found is None:
        return "own"
    grid, k = found
    if k:
        return f"official training {k}" if grid in OFFICIAL_ZOOS and k < TRAININGS else f"training {k} (unscored)"
    if grid in OFFICIAL_ZOOS:
        return "official"
    if grid == DEFAULT_ZOO:
        return "demo"
    if grid in (AUDIT_ZOO, CNN_AUDIT_ZOO):
        return "audit"
    if grid in TEST_ZOOS:
        return "test"
    return "recipe"


def zoo_family(zoo: Any) -> str:
    """The architecture family of a zoo: of its models (a Zoo: table column 'family', else its manifest), or of the
    recipe that makes it (a name: the recipe's 'family' key, for RECIPE-tK the grid's)."""
    if isinstance(zoo, str):
        found = recipe_of(zoo)
        if found is None:
            raise GenbenchError(f"no recipe makes the zoo {zoo!r}, so its family is unknown: pass the loaded zoo")
        raw = yaml.safe_load(find_recipe(found[0]).read_text())
        return str(raw.get("family", ""))
    table = getattr(zoo, "table", None)
    if table is not None and "family" in table and len(table):
        families = sorted(set(map(str, table["family"])))
        return families[0] if len(families) == 1 else _mixed(families)
    effective = (getattr(zoo, "manifest", None) or {}).get("recipe_effective") or {}
    return str(effective.get("family", ""))


def _mixed(families: list[str]) -> str:
    """A zoo of several families is convolutional when any of them is (its audit must cover convolutions)."""
    return next((f for f in families if f in CONV_FAMILIES), families[0])


def audit_zoo_of(zoo: Any) -> str:
    """The audit zoo of the records of a ranked zoo (a loaded Zoo, or the name of a recipe's zoo): the rule
    `defaults.audit_zoo_for` applied to its family."""
    return audit_zoo_for(zoo_family(zoo))


def resolve_audit_zoo(requested: str | None, zoo: Any) -> str | None:
    """The audit zoo a record of `zoo` is audited on: `requested` as given (None: no audit), or for
    `defaults.AUTO_AUDIT` the one the rule picks."""
    return audit_zoo_of(zoo) if requested == AUTO_AUDIT else requested


def manifest_training(manifest: dict[str, Any]) -> tuple[str, int]:
    """(grid, K) a zoo's manifest records: K >= 1 for a training built with --training, else (its name, 0)."""
    k = manifest.get("training", 0)
    return str(manifest.get("training_of") or manifest.get("name")), int(k) if isinstance(k, int) else 0


__all__ = ["recipe_of", "build_command_of", "build_estimate", "not_built", "zoo_role", "zoo_family", "audit_zoo_of",
           "resolve_audit_zoo", "manifest_training"]
