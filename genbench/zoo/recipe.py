"""Zoo recipes: a YAML file naming the dataset, the family, the grid and the training schedule,
expanded into one `ModelSpec` per model (twins for fragility included)."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..defaults import training_name, training_of
from ..errors import GenbenchError, did_you_mean
from ..text import plain_text

TRAIN_DEFAULTS: dict[str, Any] = {
    "optimizer": "sgd",        # "sgd" (with momentum) or "adam"
    "lr": 0.01,
    "momentum": 0.9,
    "weight_decay": 0.0,       # L2 added to the gradient, as torch.optim does
    "batch_size": 128,
    "epochs": 30,              # the cap when a stopping rule is set
    "lr_milestones": [],       # epochs at which the learning rate is multiplied by lr_gamma
    "lr_gamma": 0.1,
    "augment": False,
    "aug_shift": 4,
    "aug_noise": 0.1,
    "label_noise": 0.0,
    "train_size": None,        # None: the whole training pool
    "stop": None,              # None or {"metric": "train_acc"|"train_loss", "threshold": float}
    "seed": 0,                 # replicate index
}
OPTIMIZERS = ("sgd", "adam")
TOP_KEYS = {"name", "version", "description", "seed", "dataset", "family", "arch", "grid", "train", "twins"}
ABBREV = {"width": "w", "depth": "d", "batchnorm": "bn", "dropout": "do", "weight_decay": "wd",
          "augment": "aug", "label_noise": "ln", "lr": "lr", "optimizer": "opt", "batch_size": "bs",
          "train_size": "n", "seed": "s", "norm": "norm", "channels": "c"}


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to train one model of a zoo, and the row it will get in models.parquet."""

    model_id: str
    family: str
    arch: dict[str, Any]
    train: dict[str, Any]
    hp: dict[str, Any]
    init_seed: int
    data_seed: int
    run_seed: int
    twin_of: str | None = None
    perturbation: str | None = None


@dataclass
class Recipe:
    """A parsed, validated recipe; `text` is the YAML verbatim, as recorded in zoo.json."""

    name: str
    version: int
    description: str
    seed: int
    dataset: dict[str, Any]
    family: str
    arch: dict[str, Any]
    grid: dict[str, list[Any]]
    train: dict[str, Any]
    twins: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    training: int = 0  # which training of the grid (K >= 1: every training-noise seed changed; the zoo GRID-tK)
    grid_name: str = ""  # the recipe's own name (`name` is GRID-tK for a training K >= 1)

    def with_training(self, k: Any) -> Recipe:
        """Training `k` of this recipe's grid: the same grid and data, other training noise, named GRID-tK."""
        k = check_training(k)
        base = self.grid_name or self.name
        return dataclasses.replace(self, training=k, grid_name=base, name=training_name(base, k))

    @property
    def axes(self) -> list[str]:
        """The grid axes, in recipe order (twins add `lr` / `optimizer` as perturbations, not axes)."""
        return list(self.grid)

    def expand(self) -> list[ModelSpec]:
        """All models of the zoo in a fixed order: each grid point, then its twins."""
        specs = []
        for values in itertools.product(*self.grid.values()):
            point = dict(zip(self.grid, values))
            base = self._spec(point, None)
            specs.append(base)
            for twin in self.twins:
                specs.append(self._spec(point, twin, base.model_id))
        return specs

    def _spec(self, point: dict[str, Any], twin: dict[str, Any] | None, base_id: str | None = None) -> ModelSpec:
        arch = {**self.arch, **{k: v for k, v in point.items() if k not in TRAIN_DEFAULTS}}
        train = {**self.train, **{k: v for k, v in point.items() if k in TRAIN_DEFAULTS}}
        if twin is not None:
            for k, factor in twin.get("scale", {}).items():
                train[k] = train[k] * factor
            train.update(twin.get("set", {}))
        ident = "_".join(f"{ABBREV.get(k, k)}{_fmt(v)}" for k, v in point.items()) or "m"
        model_id = ident if twin is None else f"{ident}__{twin['name']}"
        hp = {**{k: v for k, v in arch.items()}, **{k: v for k, v in train.items()
                                                    if k not in ("stop", "lr_milestones")}}
        return ModelSpec(
            model_id=model_id, family=self.family, arch=arch, train=train, hp=hp,
            init_seed=stream_seed(self.seed, ident, "init", self.training),
            data_seed=stream_seed(self.seed, f"s{train['seed']}", "data", self.training),
            run_seed=stream_seed(self.seed, ident, "run", self.training),
            twin_of=base_id, perturbation=None if twin is None else twin["name"])


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def _seed(*parts: Any) -> int:
    """A 31-bit seed derived from names, stable across runs, machines and Python versions."""
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


TRAINING_NOISE = ("init", "run")  # the seeded streams a training changes: init weights; run: data order, dropout
#                                   masks (seeded with run) and augmentation draws (run + 1). "data" (the train
#                                   subset and its corrupted labels) is the grid's data and stays.


def stream_seed(recipe_seed: int, key: str, stream: str, training: int = 0) -> int:
    """The seed of one stream of one model: for training 0 the name-derived seed every zoo was built with, for a
    training K >= 1 of a training-noise stream the same derivation with 'tK' appended to the name."""
    if training == 0 or stream not in TRAINING_NOISE:
        return _seed(recipe_seed, key, stream)
    return _seed(recipe_seed, key, stream, f"t{training}")


def check_training(k: Any) -> int:
    """A training index: a whole number >= 0 (0: the recipe's own zoo), else a GenbenchError saying so."""
    if isinstance(k, str) and k.strip().isdigit():
        k = int(k)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise GenbenchError(f"training (--training) must be a whole number >= 0 (0: the recipe's own zoo; K >= 1: "
                            f"training K, the zoo RECIPE-tK), got {k!r}")
    return int(k)


def recipes_dir() -> Path:
    """Where named recipes live: $GENBENCH_RECIPES, else the package's recipes (package data; in the repository
    genbench/zoo/recipes links to model_zoo/, the folder people read them in)."""
    env = os.environ.get("GENBENCH_RECIPES")
    return Path(env) if env else Path(str(resources.files(__package__) / "recipes"))


def list_recipes() -> list[str]:
    """Names of the recipes shipped in model_zoo/."""
    d = recipes_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def find_recipe(name_or_path: str | os.PathLike) -> Path:
    """Resolve a recipe name (model_zoo/NAME.yaml) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if p.is_dir():
            raise GenbenchError(_not_a_recipe_file(p, "a folder"))
        if not p.is_file():
            raise GenbenchError(f"recipe file {str(p)!r} does not exist")
        return p
    candidate = recipes_dir() / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    if p.is_dir() or p.is_file():  # a path, not a name: say what it is rather than "unknown recipe"
        raise GenbenchError(_not_a_recipe_file(p, "a folder" if p.is_dir() else "a file whose name does not end in "
                                               ".yaml (or .yml)"))
    grid, k = training_of(str(name_or_path))
    if k and (recipes_dir() / f"{grid}.yaml").is_file():
        raise GenbenchError(f"{name_or_path} is training {k} of the recipe {grid}, not a recipe: build it with "
                            f"`genbench zoo build {grid} --training {k}`")
    raise did_you_mean(str(name_or_path), list_recipes(), what="recipe",
                       hint="`genbench zoo list` shows the recipes; a path to a .yaml file also works.")


def _not_a_recipe_file(p: Path, what: str) -> str:
    """Why the existing path `p` (`what` it is) is neither a recipe file nor a recipe's name, and what to pass."""
    return (f"{str(p)!r} is {what}, not a recipe file: pass a recipe's YAML file (a file NAME.yaml) or a recipe's "
            "name; `genbench zoo list` shows the recipes")


def yaml_problem(e: yaml.YAMLError) -> str:
    """What the YAML parser said, on one line: its context and problem, and where (line, column)."""
    said = ": ".join(str(part) for part in (getattr(e, "context", None), getattr(e, "problem", None)) if part)
    mark = getattr(e, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return plain_text((said or type(e).__name__) + at)


def load_recipe(name_or_path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> Recipe:
    """Read, override (dotted keys such as `train.epochs`) and validate a recipe."""
    path = find_recipe(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise GenbenchError(f"recipe {path}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise GenbenchError(f"recipe {path}: not valid YAML ({yaml_problem(e)})") from None
    raw = copy.deepcopy(raw)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise GenbenchError(f"overrides is a mapping of dotted recipe keys to values, e.g. {{'train.epochs': 2}}, "
                            f"got {type(overrides).__name__} {overrides!r}")
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value, path)
    where = str(path) + (f" with the overrides (--set) {', '.join(map(str, overrides))}" if overrides else "")
    return parse_recipe(raw, text=text, where=where)


def _set_dotted(raw: dict[str, Any], key: str, value: Any, where: Path) -> None:
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GenbenchError(f"recipe {where}: cannot override {key!r}: {part!r} is not a mapping")
    node[parts[-1]] = value


def parse_recipe(raw: Any, *, text: str = "", where: str = "recipe") -> Recipe:
    """Validate a recipe mapping; every error names the key and what was expected."""
    def bad(key: str, expected: str, got: Any) -> GenbenchError:
        return GenbenchError(f"{where}: key {key!r}: expected {expected}, got {got!r}")

    if not isinstance(raw, dict):
        raise bad("<top>", "a mapping", raw)
    unknown = set(raw) - TOP_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise did_you_mean(k, TOP_KEYS, what=f"top-level key in {where}:")
    for key in ("name", "dataset", "family", "grid"):
        if key not in raw:
            raise GenbenchError(f"{where}: missing required key {key!r}")
    if not isinstance(raw["name"], str) or not raw["name"]:
        raise bad("name", "a non-empty string", raw["name"])
    if not isinstance(raw["dataset"], dict) or "name" not in raw["dataset"]:
        raise bad("dataset", "a mapping with a 'name'", raw["dataset"])
    from ..models import list_families
    if raw["family"] not in list_families():
        raise did_you_mean(str(raw["family"]), list_families(), what=f"architecture family in {where}:")
    arch = raw.get("arch") or {}
    if not isinstance(arch, dict):
        raise bad("arch", "a mapping of architecture settings", arch)
    grid = raw["grid"]
    if not isinstance(grid, dict) or not grid:
        raise bad("grid", "a non-empty mapping axis -> list of values", grid)
    for axis, values in grid.items():
        if not isinstance(values, list) or not values:
            raise bad(f"grid.{axis}", "a non-empty list of values", values)
        if len(set(map(repr, values))) != len(values):
            raise bad(f"grid.{axis}", "distinct values", values)
    train = dict(TRAIN_DEFAULTS)
    given = raw.get("train") or {}
    if not isinstance(given, dict):
        raise bad("train", "a mapping of training settings", given)
    for k in given:
        if k not in TRAIN_DEFAULTS:
            raise did_you_mean(f"train.{k}", [f"train.{d}" for d in TRAIN_DEFAULTS], what="training key",
                               hint=f"(in {where})")
    train.update(given)
    _check_train(train, grid, bad)
    twins = raw.get("twins") or []
    if not isinstance(twins, list):
        raise bad("twins", "a list of {name, scale|set}", twins)
    for i, t in enumerate(twins):
        if not isinstance(t, dict) or "name" not in t or not ({"scale", "set"} & set(t)):
            raise bad(f"twins[{i}]", "a mapping with 'name' and 'scale' and/or 'set'", t)
        for k in list(t.get("scale", {})) + list(t.get("set", {})):
            if k not in TRAIN_DEFAULTS:
                raise did_you_mean(k, TRAIN_DEFAULTS, what=f"training key of twins[{i}] ({t['name']})",
                                   hint=f"(in {where})")
    for key, default in (("version", 1), ("seed", 0)):
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise bad(key, "a whole number", v)
    recipe = Recipe(name=raw["name"], version=int(raw.get("version", 1)), description=str(raw.get("description", "")),
                    seed=int(raw.get("seed", 0)), dataset=dict(raw["dataset"]), family=raw["family"], arch=dict(arch),
                    grid={k: list(v) for k, v in grid.items()}, train=train, twins=list(twins), text=text)
    specs = recipe.expand()
    for spec in (s for s in specs if s.perturbation):  # a twin's scale or set (_check_train saw the rest): trained
        for key in ("batch_size", "epochs"):            # as int(v), the table would record another number
            v = spec.train[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer() or v < 1:
                raise bad(f"twins ({spec.perturbation}): train.{key}", "a whole number >= 1 once scaled or set", v)
    ids = [s.model_id for s in specs]
    if len(set(ids)) != len(ids):
        raise GenbenchError(f"{where}: grid values give duplicate model ids; make the values distinct")
    return recipe


def _check_train(train: dict[str, Any], grid: dict[str, list[Any]], bad) -> None:
    for opt in grid.get("optimizer", [train["optimizer"]]):
        if opt not in OPTIMIZERS:
            raise bad("train.optimizer", f"one of {OPTIMIZERS}", opt)
    for key in ("lr", "batch_size", "epochs"):
        for v in grid.get(key, [train[key]]):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise bad(f"train.{key}", "a positive number" + (" (YAML reads 1e9 as text: write 1.0e9)"
                                                                 if isinstance(v, str) else ""), v)
            if key != "lr" and not isinstance(v, int):  # trained as int(v): the table would record another number
                raise bad(f"train.{key}", "a whole number", v)
    stop = train["stop"]
    if stop is not None and (not isinstance(stop, dict) or stop.get("metric") not in ("train_acc", "train_loss")
                             or not isinstance(stop.get("threshold"), (int, float))):
        raise bad("train.stop", "null or {metric: train_acc|train_loss, threshold: number}", stop)
    milestones = train["lr_milestones"]
    if not isinstance(milestones, list) or not all(isinstance(m, int) and not isinstance(m, bool) and m >= 1
                                                   for m in milestones):
        raise bad("train.lr_milestones", "a list of epochs (whole numbers >= 1)", milestones)
