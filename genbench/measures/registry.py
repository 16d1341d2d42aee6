"""The measure registry: `@register_measure` adds a named function with its metadata; names are data."""
from __future__ import annotations

import fnmatch
import hashlib
import inspect
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from ..errors import GenbenchError, did_you_mean, string_list

KINDS = ("scalar", "signature")
NEEDS = ("train_data", "init_weights", "augment")
HIGHER_MEANS = ("larger_gap", "smaller_gap", None)
INVARIANCES = ("relu_rescale",)
TRANSFORMS = ("log", "linear", "select")  # phi before regressing; "select": chosen inside each training fold
ENTRY_POINT_GROUP = "genbench.measures"


@dataclass(frozen=True)
class Measure:
    """A registered measure: the function and what the harness, the scorer and the checks need to know."""

    name: str
    fn: Callable[..., Any]
    kind: str
    needs: tuple[str, ...]
    citation: str
    version: int
    higher_means: str | None
    invariances: tuple[str, ...] = ()
    transform: str = "select"
    doc: str = ""
    source_hash: str = field(default="", compare=False)
    batched: Callable[[list[Any]], None] | None = field(default=None, compare=False)

    def __call__(self, ctx: Any) -> Any:
        return self.fn(ctx)


_MEASURES: dict[str, Measure] = {}
_plugins_loaded = False


def source_hash(fn: Callable[..., Any]) -> str:
    """sha256 of the source of the module defining `fn` (helpers it calls there included), or of its bytecode."""
    module = inspect.getmodule(fn)
    try:
        text = inspect.getsource(module) if module is not None else inspect.getsource(fn)
    except (OSError, TypeError):
        code = fn.__code__
        text = repr((code.co_code, code.co_consts, code.co_names))
    return hashlib.sha256(text.encode()).hexdigest()


BUILTIN_PREFIX = "genbench.measures."  # the modules of the built-in measures


def _check_name(name: str) -> None:
    if callable(name):  # @register_measure without its arguments: the function came as the name
        raise GenbenchError(f"register_measure takes the measure's name first: write "
                            f"@register_measure(\"family.variant\", ...) above {getattr(name, '__name__', 'it')}")
    if not isinstance(name, str):
        raise GenbenchError(f"a measure's name is a string 'family.variant', got {type(name).__name__} {name!r}")
    family, _, variant = name.partition(".")
    if not family or not variant or not all(part.replace("_", "").isalnum() for part in name.split(".")):
        raise GenbenchError(f"measure name {name!r} must look like 'family.variant' "
                            "(letters, digits and underscores, e.g. 'margin.qrt_log')")


def register_measure(name: str, *, kind: str = "scalar", needs: Iterable[str] = (), citation: str = "",
                     version: int = 1, higher_means: str | None = None, invariances: Iterable[str] = (),
                     transform: str = "select", batched: Callable[[list[Any]], None] | None = None,
                     replace: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator that registers `fn(ctx) -> float | array` as the measure `name` (family.variant).

    `transform` is the phi the scorer applies before regressing: "log", "linear", or "select" (the default: the
    scorer picks linear or log, log only when every value is positive, inside each training fold by the better
    fit, and reports which it used). It is never read from the name. `invariances` lists what the conformance
    suite checks (e.g. "relu_rescale": unchanged when a ReLU layer pair is rescaled by a and 1/a).

    `batched(ctxs)`, optional, does the measure's costly shared work for several models of one shape at once (the
    contexts of a group, each with its model's memo) and leaves it in their memos, where `fn` then finds it: `fn`
    stays the definition, and the conformance suite checks that both paths give the same values."""
    _check_name(name)
    needs, invariances = ((x,) if isinstance(x, str) else tuple(x) for x in (needs, invariances))  # one, or several
    if kind not in KINDS:
        raise GenbenchError(f"measure {name!r}: kind must be one of {KINDS}, got {kind!r}")
    for n in needs:
        if n not in NEEDS:
            raise did_you_mean(n, NEEDS, what=f"need of measure {name!r}:")
    for inv in invariances:
        if inv not in INVARIANCES:
            raise did_you_mean(inv, INVARIANCES, what=f"invariance of measure {name!r}:")
    if transform not in TRANSFORMS:
        raise GenbenchError(f"measure {name!r}: transform must be 'log', 'linear' or 'select' (chosen by the scorer "
                            f"inside each training fold), got {transform!r}")
    if higher_means not in HIGHER_MEANS:
        raise GenbenchError(f"measure {name!r}: higher_means must be 'larger_gap', 'smaller_gap' or None, "
                            f"got {higher_means!r}")
    if batched is not None and not callable(batched):
        raise GenbenchError(f"measure {name!r}: batched must be a function of a list of contexts, got {batched!r}")
    if not isinstance(version, int) or version < 1:
        raise GenbenchError(f"measure {name!r}: version must be a positive integer, got {version!r}")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _MEASURES and not replace:
            raise GenbenchError(f"a measure named {name!r} is already registered "
                                f"(by {_MEASURES[name].fn.__module__}); pick another name, or pass replace=True to "
                                "register it again (a notebook cell run twice)")
        if name in _MEASURES and _MEASURES[name].fn.__module__.startswith(BUILTIN_PREFIX) and \
                not fn.__module__.startswith(BUILTIN_PREFIX):
            warnings.warn(f"{name} now runs your function, not genbench's built-in: its values and records are "
                          "no longer the built-in's (its shipped records will not verify against it)", stacklevel=2)
        doc = " ".join((inspect.getdoc(fn) or "").strip().split("\n\n")[0].split())  # the summary, wrapped or not
        _MEASURES[name] = Measure(name=name, fn=fn, kind=kind, needs=needs, citation=citation, version=version,
                                  higher_means=higher_means, invariances=invariances, transform=transform,
                                  doc=doc, source_hash=source_hash(fn), batched=batched)
        return fn

    return deco


def unregister_measure(name: str) -> None:
    """Remove a measure (for tests and interactive sessions)."""
    _MEASURES.pop(name, None)


def _load_plugins() -> None:
    """Import the built-ins and every module advertised in the `genbench.measures` entry-point group, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from . import builtin  # noqa: F401
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # a broken plugin must not hide the built-ins
            import warnings
            warnings.warn(f"genbench: could not load measure plugin {ep.name!r} ({ep.value}): {e}", stacklevel=2)


def list_measures(pattern: str | Iterable[str] = "*") -> list[str]:
    """Names of the registered measures matching a glob pattern (or any of several), sorted."""
    _load_plugins()
    patterns = string_list(pattern)
    if patterns is None:
        raise GenbenchError(f"list_measures takes a glob pattern such as 'margin.*' (or a list of them), got "
                            f"{pattern!r}")
    return sorted(n for n in _MEASURES if any(fnmatch.fnmatchcase(n, p) for p in patterns))


def get_measure(name: str | Measure) -> Measure:
    """The registered measure called `name`; unknown names get the closest known ones."""
    if isinstance(name, Measure):
        return name
    if not isinstance(name, str):
        raise GenbenchError(f"a measure is named by a string such as 'norm.path', got {name!r}")
    _load_plugins()
    if name not in _MEASURES:
        raise did_you_mean(name, _MEASURES, what="measure",
                           hint="`genbench measures list` shows them all.")
    return _MEASURES[name]


def resolve_measures(specs: str | Measure | Callable[..., Any] | Iterable[Any]) -> list[Measure]:
    """Measures from names, glob patterns, `Measure`s or registered functions, in order, without repeats."""
    if isinstance(specs, (str, Measure)) or callable(specs):
        specs = [specs]
    if not isinstance(specs, Iterable):
        raise GenbenchError(f"measures are named by names, glob patterns ('norm.*'), Measures or registered "
                            f"functions, got {type(specs).__name__} {specs!r}")
    out: dict[str, Measure] = {}
    for s in specs:
        if isinstance(s, str) and any(ch in s for ch in "*?["):
            names = list_measures(s)
            if not names:
                raise GenbenchError(f"no measure matches the pattern {s!r}; `genbench measures list` shows them all")
            out.update((n, _MEASURES[n]) for n in names)
        elif isinstance(s, str) or isinstance(s, Measure):
            m = get_measure(s)
            out[m.name] = m
        elif callable(s):
            _load_plugins()
            match = [m for m in _MEASURES.values() if m.fn is s]
            if not match:
                raise GenbenchError(f"{getattr(s, '__name__', s)!r} is not a registered measure; "
                                    "decorate it with @gb.register_measure(...)")
            out[match[0].name] = match[0]
        else:
            raise GenbenchError(f"cannot read {s!r} as a measure: pass names, glob patterns or registered functions")
    return list(out.values())
