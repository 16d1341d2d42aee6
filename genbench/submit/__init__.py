"""genbench submit: a submission folder (measure.py + submission.yaml) checked, run in a child process under a
time budget and a memory cap, and recorded (ok, or failed with the reason) on each zoo."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".api": ("submit", "summarize"),
    ".metadata": ("Submission", "load_submission"),
})  # imported on first use
