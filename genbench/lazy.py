"""Public names of genbench's packages, imported on first use (PEP 562), so that `import genbench` costs nothing
until a name is used: `genbench --help` and the leaderboard never import torch or scikit-learn they do not need.

A package's __init__ says which of its modules gives each public name, like the `from .x import a, b` lines it
replaces; `gb.load_zoo`, `from genbench.harness import check_measure` and `dir(genbench)` work as before."""
from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """`__getattr__, __dir__, __all__ = lazy_exports(__name__, {".check": ("CheckReport", "check_measure"), ...})`:
    each name is imported from its module on first use; any other attribute is tried as a submodule (`gb.zoo`)."""
    home = {name: module for module, names in exports.items() for name in names}
    pkg = sys.modules[package]

    def __getattr__(name: str) -> object:
        if name in home:
            value = getattr(importlib.import_module(home[name], package), name)
        elif not name.startswith("__"):
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise  # the submodule exists and failed to import something
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(pkg, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(pkg.__dict__) | set(home))

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            # Importing a submodule sets it on its package; one named like the function the package exports from
            # it (genbench.scoring.audit, genbench.harness.evaluate) must not hide that function.
            if isinstance(value, types.ModuleType) and home.get(name) == f".{name}":
                value = getattr(value, name)
            super().__setattr__(name, value)

    pkg.__class__ = LazyPackage
    return __getattr__, __dir__, sorted(home)
