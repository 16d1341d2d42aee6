"""Imports run one way, down the data flow: models -> zoo -> measures -> harness -> scoring -> record ->
leaderboard -> entries -> cli. A module may import its own layer and the layers below it, never one above; the
leaderboard (which only ranks and shows records) imports no torch layer; no private name crosses a package."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import genbench

PACKAGE = Path(genbench.__file__).parent
# The shared base (errors, files, paths, defaults, CPU numerics, device, the generic Ray plumbing) sits below everything.
BASE = ("errors", "fileio", "paths", "defaults", "numerics", "device", "version", "remote", "lazy", "text")
LAYERS = [BASE, ("models",), ("zoo",), ("measures",), ("harness",), ("scoring",), ("record",), ("leaderboard",),
          ("entries",), ("cli", "__main__")]
TORCH_LAYERS = ("models", "zoo", "measures", "harness")  # what the leaderboard never imports (nor entries above it)
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
    """Imports of `module` that run up the layers, or from the leaderboard into a torch layer."""
    own = layer_of(module)
    shows = module.split(".")[1:2] == ["leaderboard"]
    return [f"{module}:{line} imports {target}" for line, target in imported_modules(module, source,
                                                                                     is_package=is_package)
            if layer_of(target) > own or (shows and target.split(".")[1:2] and target.split(".")[1] in TORCH_LAYERS)]


def private_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """Private names (`_x`) that `module` imports from another of genbench's packages."""
    package = module if is_package else module.rpartition(".")[0]
    top = module.split(".")[:2]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[0] != "genbench" or target.split(".")[:2] == top:
            continue
        found += [f"{module}:{node.lineno} imports {target}.{a.name}" for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__")]
    return found


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


def test_no_private_name_crosses_a_package():
    found = []
    for module, path in package_modules():
        found += private_imports(module, path.read_text(), is_package=path.name == "__init__.py")
    assert not found, "private names imported from another package:\n" + "\n".join(found)


@pytest.mark.parametrize("module, source", [
    ("genbench.entries.submit.job", "from ...scoring.audit import ALPHAS, _control_models\n"),
    ("genbench.entries.submit.replay", "from ...harness.evaluate import _validate\n"),
    ("genbench.cli.zoo", "from genbench.zoo.storage import _private\n"),
])
def test_planted_private_import_is_caught(module, source):
    assert private_imports(module, source)


def test_a_private_name_of_the_own_package_passes():
    assert not private_imports("genbench.entries.verify", "from .submit.api import _finish\n")


def test_the_leaderboard_and_the_record_import_no_torch():
    """Every module of the leaderboard, and the record, imported in a fresh interpreter: neither torch nor
    scikit-learn comes with them (the page and the terminal view are drawn from records alone)."""
    modules = ["genbench.record"] + [m for m, _ in package_modules() if m.startswith("genbench.leaderboard")]
    child = ("import importlib, json, sys\n"
             f"for m in {modules!r}: importlib.import_module(m)\n"
             "print(json.dumps({'torch': 'torch' in sys.modules, 'sklearn': 'sklearn' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"torch": False, "sklearn": False}


@pytest.mark.parametrize("module, source", [
    ("genbench.zoo.storage", "from ..harness.evaluate import evaluate_one\n"),
    ("genbench.zoo.hub", "from ..entries.publish import push_results\n"),
    ("genbench.zoo.card", "import genbench as gb\n"),
    ("genbench.measures.check", "def f():\n    from ..harness.evaluate import run_measure\n"),
    ("genbench.scoring.scores", "from genbench.entries import run\n"),
    ("genbench.scoring.scores", "from genbench import record\n"),
    ("genbench.zoo.build", "from .. import cli\n"),
    ("genbench.models.mlp", "from genbench import load_zoo\n"),
    ("genbench.record", "from .entries.run import run_entry\n"),
    ("genbench.leaderboard.site", "from ..entries.verify import verify_record\n"),
    ("genbench.leaderboard.tables", "def f():\n    from ..measures import get_measure\n"),
    ("genbench.leaderboard.terminal", "from ..harness.evaluate import evaluate\n"),
    ("genbench.leaderboard.site", "from genbench.zoo.storage import load_zoo\n"),
])
def test_planted_upward_import_is_caught(module, source):
    assert violations(module, source)


@pytest.mark.parametrize("module, source", [
    ("genbench.harness.evaluate", "from ..zoo.storage import Zoo\nfrom ..measures import Measure\n"),
    ("genbench.zoo.build", "from ..errors import GenbenchError\nfrom .. import remote\nfrom .train import x\n"),
    ("genbench.entries.run", "from ..scoring import score\nimport numpy\n"),
])
def test_downward_imports_pass(module, source):
    assert not violations(module, source)
