"""The harness: run measures on every model of a zoo, with a content-keyed cache and per-model failures, and
the conformance suite that runs one measure the way the harness does."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".check": ("CheckReport", "check_measure"),
    ".evaluate": ("evaluate", "evaluate_one"),
    ".values": ("load_values", "save_values", "values_path"),
})  # imported on first use
