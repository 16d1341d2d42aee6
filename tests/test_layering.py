"""Imports run one way, down the data flow: models -> zoo -> measures -> harness -> scoring -> leaderboard
-> submit -> cli. A module may import its own layer and the layers below it, never one above."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import genbench

PACKAGE = Path(genbench.__file__).parent
# The shared base (errors, files, paths, defaults, CPU numerics, device, the generic Ray plumbing) sits below everything.
BASE = ("errors", "fileio", "paths", "defaults", "numerics", "device", "version", "remote", "lazy")
LAYERS = [BASE, ("models",), ("zoo",), ("measures",), ("harness",), ("scoring",), ("leaderboard",), ("submit",),
          ("cli", "__main__")]
TOP = len(LAYERS)  # `import genbench` itself pulls in every layer


def layer_of(module: str) -> int:
    """The layer of a dotted genbench module name; the package root counts as the top."""
    parts = module.split(".")
    if parts[0] != "genbench":
        raise ValueError(module)
    if len(parts) == 1:
        return TOP
    for i, names in enumerate(LAYERS):
        if parts[1] in names:
            return i
    raise AssertionError(f"genbench.{parts[1]} belongs to no layer: add it to LAYERS in {__file__}")


def imported_modules(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) of every genbench import in `source`, function-level imports included."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "genbench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "genbench":
                continue
            if node.module is None or target == "genbench":
                # `from . import x` / `from genbench import x`: each name is a submodule or a root attribute
                found += [(node.lineno, f"{target}.{a.name}" if target != "genbench" or a.name in _SUBPACKAGES
                           else target) for a in node.names]
            else:
                found.append((node.lineno, target))
    return found


_SUBPACKAGES = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """Imports of `module` that run up the layers."""
    own = layer_of(module)
    return [f"{module}:{line} imports {target}" for line, target in imported_modules(module, source,
                                                                                     is_package=is_package)
            if layer_of(target) > own]


def package_modules() -> list[tuple[str, Path]]:
    """Every module of the installed package with its dotted name; the root __init__ is the public face."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts == ["genbench", "__init__"]:
            continue
        out.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return out


def test_no_import_runs_up_the_data_flow():
    found = []
    for module, path in package_modules():
        found += violations(module, path.read_text(), is_package=path.name == "__init__.py")
    assert not found, "imports running up the data flow:\n" + "\n".join(found)


@pytest.mark.parametrize("module, source", [
    ("genbench.zoo.storage", "from ..harness.evaluate import evaluate_one\n"),
    ("genbench.zoo.hub", "from ..leaderboard.publish import push_results\n"),
    ("genbench.zoo.card", "import genbench as gb\n"),
    ("genbench.measures.check", "def f():\n    from ..harness.evaluate import run_measure\n"),
    ("genbench.scoring.scores", "from genbench.leaderboard import records\n"),
    ("genbench.zoo.build", "from .. import cli\n"),
    ("genbench.models.mlp", "from genbench import load_zoo\n"),
])
def test_planted_upward_import_is_caught(module, source):
    assert violations(module, source)


@pytest.mark.parametrize("module, source", [
    ("genbench.harness.evaluate", "from ..zoo.storage import Zoo\nfrom ..measures import Measure\n"),
    ("genbench.zoo.build", "from ..errors import GenbenchError\nfrom .. import remote\nfrom .train import x\n"),
    ("genbench.leaderboard.records", "from ..scoring import score\nimport numpy\n"),
])
def test_downward_imports_pass(module, source):
    assert not violations(module, source)
