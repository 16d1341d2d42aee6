"""genbench submit: a submission folder (measure.py + submission.yaml) checked, run in a child process under a
time budget and a memory cap, and recorded (ok, or failed with the reason) on each zoo."""
from .api import submit, summarize
from .metadata import Submission, load_submission

__all__ = ["Submission", "load_submission", "submit", "summarize"]
