"""The defaults every layer shares: one place for budgets, resamples, zoo names and the results folder."""
from __future__ import annotations

import re
from pathlib import Path

BUDGET_S = 300.0                  # seconds per model and measure, as in the PGDL competition
N_BOOT = 1000                     # bootstrap resamples behind every 95% interval
MAX_N_BOOT = 100_000              # the most resamples asked for: each is a row of weights over the models (memory)
SEED = 0                          # the seed of measures' generators and of the bootstrap
DEFAULT_ZOO = "mnist1d-demogen"   # the embedded default zoo: what the README and a plain submission use
AUDIT_ZOO = "mnist1d-fragility"   # the zoo with twins and learning curves the fragility audit runs on (MLPs)
CNN_AUDIT_ZOO = "fragility-cnn-mnist1d"  # its CNN twin: the audit zoo of zoos of convolutional networks
CONV_FAMILIES = ("cnn1d", "nin", "resnet32v2", "keras")  # architecture families of convolutional networks (keras: the
#                                                          PGDL tasks' networks, all convolutional)
AUTO_AUDIT = "auto"               # an audit zoo argument meaning "the one `audit_zoo_for` picks for the ranked zoo"
# The zoos the benchmark ranks on: 1-D CNNs that learn MNIST-1D, in the regime the field studies (test accuracy
# 0.62-0.94; issue 26). Only their complete builds enter the cross-zoo aggregate (test zoos such as digits-mlp, partial
# zoos and zoos of one's own are ranked on their own, never aggregated). The MLP zoos (mnist1d-demogen, the demo's
# zoo, and mnist1d-fantastic) memorise the task and stay buildable for comparison; the CIFAR recipes join when built
# on a GPU.
DEMOGEN_ZOO = "demogen-nin-mnist1d"  # DEMOGEN's grid on CNNs: the official zoo of the page's Tables 1 and 4
OFFICIAL_ZOOS = (DEMOGEN_ZOO, "fantastic-cnn-mnist1d")
TRAININGS = 3                     # trainings shipped per official grid (K = 0, 1, 2; `zoo build RECIPE --training K`)
AGGREGATE_RULE = ("mean of the per-zoo ranks (1 = best, by the sort column) over the official zoos "
                  f"({', '.join(OFFICIAL_ZOOS)}), each zoo weighted equally; an entry missing or failed on an official "
                  "zoo is averaged over the zoos it is ranked on, and the zoos column says how many; a baseline row "
                  "is a reference, not ranked: its place on a zoo is the number of measures ranked above it plus 0.5")
HUB_ORG = "genbench"              # canonical zoos live on the Hub as HUB_ORG/NAME, tagged by table hash (zoo/hub.py)
CHECK_ZOO = "digits-mlp"          # the tiny zoo the conformance suite runs on (built when missing)
EXTERNAL_PREFIX = "external-"     # the zoo name of a value table from elsewhere (`genbench score --values`): never
#                                   verified, never ranked officially, listed apart in every view
SHIPPED_RESULTS = Path("leaderboard") / "results"  # a checkout's verified records (paths.shipped_results_dir)
# Rough wall-clock minutes of `genbench zoo build NAME` on the 2-core CPU machine of README.md (None: seconds; the
# CIFAR recipes: GPU only). Kept in code, not in the recipes, whose verbatim text a zoo's manifest records.
BUILD_MINUTES: dict[str, float | None] = {
    "digits-mlp": None, "digits-nin": None, "mnist1d-demogen": 2, "demogen-nin-mnist1d": 9,
    "fantastic-cnn-mnist1d": 25, "mnist1d-fantastic": 13, "mnist1d-fragility": 4, "fragility-cnn-mnist1d": 30,
}
GPU_ONLY = ("demogen-nin-cifar10", "demogen-resnet32-cifar10", "demogen-resnet32-cifar100")
_TRAINING = re.compile(r"(.+)-t([1-9][0-9]*)")


def training_name(grid: str, k: int) -> str:
    """The zoo name of training `k` of the recipe `grid`: the recipe's own name for k = 0, else GRID-tK."""
    return grid if k == 0 else f"{grid}-t{k}"


def training_of(name: str) -> tuple[str, int]:
    """(grid, K) of a zoo name: GRID-tK (K >= 1) is training K of GRID; any other name is training 0 of itself.
    Whether GRID is a recipe is the caller's question (genbench.zoo.roles)."""
    m = _TRAINING.fullmatch(name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def official_trainings(grid: str) -> list[str]:
    """The zoo names of an official grid's shipped trainings: GRID, GRID-t1, ..., GRID-t{TRAININGS-1}."""
    if grid not in OFFICIAL_ZOOS:
        raise ValueError(f"{grid!r} is not an official grid; the official grids are {', '.join(OFFICIAL_ZOOS)}")
    return [training_name(grid, k) for k in range(TRAININGS)]


def audit_zoo_for(family: str) -> str:
    """The one rule for which audit zoo audits a record of a ranked zoo, by the zoo's architecture family: zoos of
    convolutional networks are audited on the CNN audit zoo, all others (MLPs) on the MLP one (DESIGN section 3)."""
    return CNN_AUDIT_ZOO if family in CONV_FAMILIES else AUDIT_ZOO
