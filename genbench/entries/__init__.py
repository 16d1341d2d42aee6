"""Entries: everything that makes or re-makes a record: run_entry and run_baselines (built-ins, baselines and
their failures), `genbench submit` (submit/), verify and add (verify.py), and publishing records (publish.py)."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".publish": ("push_results",),
    ".run": ("failure_record", "run_baselines", "run_entry"),
    ".verify": ("add_record", "verify_record"),
})  # imported on first use
