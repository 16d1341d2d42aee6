"""The defaults every layer shares: one place for budgets, resamples, zoo names and the results folder."""
from __future__ import annotations

from pathlib import Path

BUDGET_S = 300.0                  # seconds per model and measure, as in the PGDL competition
N_BOOT = 1000                     # bootstrap resamples behind every 95% interval
SEED = 0                          # the seed of measures' generators and of the bootstrap
DEFAULT_ZOO = "mnist1d-demogen"   # the embedded default zoo: what the README and a plain submission use
AUDIT_ZOO = "mnist1d-fragility"   # the zoo with twins and learning curves the fragility audit runs on
# The zoos the benchmark ranks on: 1-D CNNs that learn MNIST-1D, in the regime the field studies (test accuracy
# 0.60-0.93; issue 26). Only their complete builds enter the cross-zoo aggregate (test zoos such as digits-mlp, partial
# zoos and zoos of one's own are ranked on their own, never aggregated). The MLP zoos (mnist1d-demogen, the demo's
# zoo, and mnist1d-fantastic) memorise the task and stay buildable for comparison; the CIFAR recipes join when built
# on a GPU.
DEMOGEN_ZOO = "demogen-nin-mnist1d"  # DEMOGEN's grid on CNNs: the official zoo of the page's Tables 1 and 4
OFFICIAL_ZOOS = (DEMOGEN_ZOO, "fantastic-cnn-mnist1d")
AGGREGATE_RULE = ("mean of the per-zoo ranks (1 = best, by the sort column) over the official zoos "
                  f"({', '.join(OFFICIAL_ZOOS)}), each zoo weighted equally; an entry missing or failed on an official "
                  "zoo is averaged over the zoos it is ranked on, and the zoos column says how many; a baseline row "
                  "is a reference, not ranked: its place on a zoo is the number of measures ranked above it plus 0.5")
HUB_ORG = "genbench"              # canonical zoos live on the Hub as HUB_ORG/NAME, tagged by table hash (zoo/hub.py)
CHECK_ZOO = "digits-mlp"          # the tiny zoo the conformance suite runs on (built when missing)
EXTERNAL_PREFIX = "external-"     # the zoo name of a value table from elsewhere (`genbench score --values`): never
#                                   verified, never ranked officially, listed apart in every view
SHIPPED_RESULTS = Path("leaderboard") / "results"  # a checkout's verified records (paths.shipped_results_dir)
