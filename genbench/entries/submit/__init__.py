"""genbench submit: a submission folder (measure.py + submission.yaml) checked, its measure's values computed in a
bubblewrap sandbox under a time budget and a memory cap, and scored and recorded here (ok, or failed with the
reason) on each zoo; `verify_submission` re-makes a record in the same sandbox and compares it."""
from ...lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".api": ("rerun_record", "submit", "summarize", "verify_submission"),
    ".metadata": ("Submission", "load_submission"),
})  # imported on first use
