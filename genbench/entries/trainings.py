"""An entry scored on every training of its grid: the trainings' zoos, each training's scores on the grid's shared
resamples, their combination (scoring/trainings.py) and the verdicts over trainings, as the record's `trainings`
block and `scores.verdicts` hold them."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..defaults import OFFICIAL_ZOOS, TRAININGS, training_name, training_of
from ..errors import GenbenchError
from ..record import finite, values_block
from ..scoring.spec import MeasureScores
from ..scoring.trainings import METHOD, VERDICTS, combine_scores, training_picks, verdict_of
from ..zoo.storage import Zoo, load_zoo

COMBINED = ("adj_r2", "kfold_r2", "kfold_r2_free", "mse", "delta_r2", "tau", "psi", "cmi", "cmi_pgdl")


def default_trainings(zoo: Zoo) -> int:
    """How many trainings an entry on `zoo` is scored on by default: on an official grid's own zoo, its shipped
    trainings (defaults.TRAININGS) that are built here, counted from training 0 (fewer: a provisional entry,
    `provisional_note` says how to complete it); one elsewhere (another zoo, or a training scored on its own)."""
    if zoo.name not in OFFICIAL_ZOOS:
        return 1
    for t in range(1, TRAININGS):
        try:
            if not load_zoo(training_name(zoo.name, t)).complete:
                return t
        except GenbenchError:
            return t
    return TRAININGS


def provisional_note(zoo: str, trainings: int, *, command: str) -> str | None:
    """Why an entry on an official zoo scored on fewer than its shipped trainings is provisional, and the commands
    that complete it; None when it is not provisional."""
    if zoo not in OFFICIAL_ZOOS or trainings >= TRAININGS:
        return None
    builds = "; ".join(f"genbench zoo build {zoo} --training {t}" for t in range(trainings, TRAININGS))
    return (f"provisional: scored on {trainings} of the {TRAININGS} trainings of {zoo} the official records are "
            f"scored on; complete it: {builds}; then again: {re.sub(r' --trainings [0-9]+', '', command)}")


class MissingTrainings(GenbenchError):
    """Trainings of a zoo's grid that an entry is scored on are not built here (`missing`, by zoo name), with the
    commands that build them (`builds`); `genbench verify` says so in its own words."""

    def __init__(self, message: str, missing: list[str], builds: list[str]):
        super().__init__(message)
        self.missing, self.builds = missing, builds


def training_zoos(zoo: Zoo, trainings: int) -> list[Zoo]:
    """The zoos of trainings 0..trainings-1 of `zoo`'s grid, `zoo` first; a training not built here is refused with
    the command that builds it (or `--trainings 1` to score on the recipe's zoo alone)."""
    if trainings < 1:
        raise GenbenchError(f"--trainings must be at least 1 (1: the zoo alone); got {trainings}")
    if trainings == 1:
        return [zoo]
    grid, k = training_of(zoo.name)
    if k:
        raise GenbenchError(f"{zoo.name!r} is training {k} of {grid!r}: score the grid's own zoo with --trainings "
                            f"{trainings} (`--zoo {grid}`), or this training alone with --trainings 1")
    out, missing = [zoo], []
    for t in range(1, trainings):
        name = training_name(zoo.name, t)
        try:
            z = load_zoo(name)
        except GenbenchError:
            missing.append(name)
            continue
        if not z.complete:
            missing.append(name)
            continue
        out.append(z)
    if missing:
        builds = [f"genbench zoo build {zoo.name} --training {training_of(m)[1]}" for m in missing]
        raise MissingTrainings(f"training(s) {', '.join(missing)} of {zoo.name!r} are not built (completely) here: "
                               f"build them ({'; '.join(builds)}), or score on the recipe's zoo alone with "
                               "--trainings 1 (a provisional entry on an official zoo)", missing, builds)
    ids = sorted(zoo.table["model_id"].astype(str))
    for z in out[1:]:
        if sorted(z.table["model_id"].astype(str)) != ids:
            raise GenbenchError(f"{z.name!r} does not hold the models of {zoo.name!r} (another version of the "
                                f"recipe?): rebuild it with `genbench zoo build {zoo.name} --training {z.training}`")
    return out


def _per_training(z: Zoo, s: MeasureScores, first: bool, value: Any = None) -> dict[str, Any]:
    """One training's part of the block: its zoo, scores and verdict inputs; for trainings after the first also the
    gaps and held-out predictions the leaderboard pairs entries with and the measure's values per model (what
    re-scoring starts from; the first's are in the record's values block)."""
    part: dict[str, Any] = {
        "name": z.name, "table_sha256": z.table_sha256,
        "values": {k: finite(v) for k, v in s.values.items()},
        "intervals": {k: [float(a), float(b)] for k, (a, b) in s.intervals.items()},
        "refused": dict(s.refused), "against": s.direction.get("against") if s.direction else None,
        "vs_recipe": list(s.vs_recipe)}
    if not first and s.heldout is not None:  # in the values block's own form (record.values_block)
        ids = sorted(z.table["model_id"].astype(str))
        held = values_block(ids, z.table.set_index("model_id").loc[ids, "gap"].to_numpy(float).tolist(), value,
                            None, s.heldout)
        part.update(gap=held["gap"], heldout=held["heldout"], **({"value": value} if value is not None else {}))
    return part


def trainings_block(zoos: Sequence[Zoo], scores: Sequence[MeasureScores], *, seed: int, n_boot: int,
                    values: Sequence[Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the record's `trainings` block, its `scores.verdicts`) from one entry's scores on each training (all drawn
    on training 0's resamples): each training's scores, their mean with the two-stage interval, and the verdicts.
    `values`: the measure's per-model values on each training, in model-id order (None for a baseline)."""
    picks = training_picks(len(zoos), n_boot, table_sha256=zoos[0].table_sha256, seed=seed)
    combined: dict[str, Any] = {"values": {}, "intervals": {}, "refused": {}}
    for key in COMBINED:
        if not all(key in s.values and key not in s.refused for s in scores):
            why = next((s.refused[key] for s in scores if key in s.refused), None)
            if why is not None:
                combined["refused"][key] = why
            continue
        if not all(key in s.samples for s in scores):
            mean = float(np.mean([s.values[key] for s in scores]))  # a score without resamples: its mean alone
            combined["values"][key] = finite(mean)
            continue
        mean, iv, why = combine_scores([s.values[key] for s in scores],
                                       np.stack([np.asarray(s.samples[key], float) for s in scores]), picks)
        if why:
            combined["refused"][key] = why
            continue
        combined["values"][key] = finite(mean)
        if iv is not None:
            combined["intervals"][key] = [float(iv[0]), float(iv[1])]
    block = {"grid": zoos[0].name, "of": len(zoos), "method": METHOD, "combined": combined,
             "zoos": [_per_training(z, s, i == 0, None if values is None else values[i])
                      for i, (z, s) in enumerate(zip(zoos, scores))]}
    parts = [{"vs_recipe": s.vs_recipe, "intervals": s.intervals, "refused": s.refused, "direction": s.direction}
             for s in scores]
    verdicts = {key: verdict_of(key, parts) for key in VERDICTS}
    return block, {k: v for k, v in verdicts.items() if v is not None}
