"""The defaults every layer shares: one place for budgets, resamples, zoo names and the results folder."""
from __future__ import annotations

from pathlib import Path

BUDGET_S = 300.0                  # seconds per model and measure, as in the PGDL competition
N_BOOT = 1000                     # bootstrap resamples behind every 95% interval
SEED = 0                          # the seed of measures' generators and of the bootstrap
DEFAULT_ZOO = "mnist1d-demogen"   # the embedded default zoo: what the README and a plain submission use
AUDIT_ZOO = "mnist1d-fragility"   # the zoo with twins and learning curves the fragility audit runs on
CHECK_ZOO = "digits-mlp"          # the tiny zoo the conformance suite runs on (built when missing)
SHIPPED_RESULTS = Path("leaderboard") / "results"  # a checkout's verified records (paths.shipped_results_dir)
