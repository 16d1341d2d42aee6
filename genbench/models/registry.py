"""Architecture families by name: each is built from a JSON-able config and names its probe layers."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from ..errors import GenbenchError, did_you_mean

_FAMILIES: dict[str, type[nn.Module]] = {}


def register_family(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator that makes a family buildable as `build_model(name, config)`."""

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in _FAMILIES:
            raise GenbenchError(f"architecture family {name!r} is already registered")
        cls.family = name
        _FAMILIES[name] = cls
        return cls

    return deco


def list_families() -> list[str]:
    """Names of the registered architecture families."""
    return sorted(_FAMILIES)


def build_model(family: str, config: dict[str, Any]) -> nn.Module:
    """Instantiate `family` from `config` (the dict stored in every checkpoint's header)."""
    cls = family_class(family)
    try:
        return cls(**config)
    except (TypeError, ValueError) as e:
        raise GenbenchError(f"bad config for architecture family {family!r}: {e}") from None


def family_class(family: str) -> type[nn.Module]:
    """The class registered as `family` (its class attributes tell trainers what it supports)."""
    if family not in _FAMILIES:
        raise did_you_mean(family, _FAMILIES, what="architecture family")
    return _FAMILIES[family]


def relative_depths(n: int, k: int = 3) -> list[int]:
    """Indices of the entries nearest relative depths 1/k, 2/k, ..., 1 of `n` layers; fewer than `k` layers
    repeat one (n = 2, k = 3: [0, 0, 1]), so every network gives `k` positions whatever its depth."""
    if n < 1:
        raise ValueError("relative depths need at least one layer")
    return [max(0, round((i + 1) * n / k) - 1) for i in range(k)]


def evenly_spaced(names: list[str], k: int = 3) -> list[str]:
    """Pick `k` evenly spaced entries of `names`, always including the last (DEMOGEN section 3.2); all of them when
    there are at most `k`."""
    return list(names) if len(names) <= k else [names[i] for i in relative_depths(len(names), k)]
