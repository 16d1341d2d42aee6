"""Scores over trainings of one grid: the mean of a score over the trainings with a 95% interval that holds both
the sampling of the grid's models and the training noise, and verdicts that are settled when every training agrees.
numpy only: the leaderboard combines the records' draws the same way.

The interval is a two-stage bootstrap. The trainings of a grid share its models (the same grid points, data and
resamples, training 0's table hash), so draw b resamples the models once (the same multiplicities on every training)
and the trainings T of T with replacement (`training_picks`), and averages the training's score on that model
resample over the drawn trainings (`combine_draws`); the interval is the central 95% of those averages."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .resample import percentile_interval

VERDICTS = ("beats_recipe", "adds_to_recipe", "against_claim")  # the keys of a record's scores.verdicts
METHOD = ("mean over trainings; 95% interval: two-stage bootstrap (each draw resamples the grid's models, the same on "
          "every training, and the trainings T of T with replacement, and averages the drawn trainings' scores)")


def training_picks(of: int, n_boot: int, *, table_sha256: str, seed: int) -> np.ndarray:
    """[n_boot, of] training indices drawn with replacement, one row per bootstrap draw: a function of the grid's
    training-0 table hash and the seed, so every entry of a grid is combined on the same draws (paired)."""
    if of < 1 or n_boot < 1:
        raise ValueError(f"training_picks needs of >= 1 trainings and n_boot >= 1 draws; got {of}, {n_boot}")
    digest = hashlib.sha256(f"{table_sha256}:{int(seed)}:trainings".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return rng.integers(0, of, size=(n_boot, of))


def combine_draws(draws: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The two-stage bootstrap's draws [B] (or [E, B] for draws [E, T, B]): draw b is the mean, over the trainings
    picked in row b, of each training's score on model resample b."""
    d = np.asarray(draws, float)
    cols = np.arange(d.shape[-1])
    picked = d[..., picks.T, cols]  # [..., T, B]: training picks[b, k] at draw b
    return picked.mean(-2)


def combine_scores(points: Sequence[float], draws: np.ndarray, picks: np.ndarray
                   ) -> tuple[float, tuple[float, float] | None, str | None]:
    """One score over the trainings: (mean of the per-training points, its two-stage interval, why it is refused).
    A mean outside its own interval is refused, as a single training's score is (scores._keep_honest)."""
    p = np.asarray(points, float)
    if not np.isfinite(p).all():
        return float("nan"), None, "not every training has this score"
    mean = float(p.mean())
    iv = percentile_interval(combine_draws(draws, picks))
    if iv is not None and not iv[0] - 1e-12 <= mean <= iv[1] + 1e-12:
        return mean, None, (f"the mean {mean:.3g} over the trainings lies outside its own 95% interval "
                            f"[{iv[0]:.3g}, {iv[1]:.3g}]: the resamples do not support it")
    return mean, iv, None


def verdict(held: Sequence[bool | None]) -> dict[str, Any] | None:
    """A verdict over trainings from whether it held on each: it holds on the majority of them, and it is settled
    when two or more trainings all say the same (one training settles nothing). None when a training could not say
    (e.g. no recipe to compare with)."""
    if not held or any(h is None for h in held):
        return None
    n = sum(bool(h) for h in held)
    return {"holds": 2 * n > len(held), "trainings": [n, len(held)], "settled": len(held) > 1 and n in (0, len(held))}


def verdict_text(v: dict[str, Any] | None, what: str) -> str:
    """'beats the recipe on 3 of 3 trainings (settled)' / '... on 2 of 3 trainings (unsettled)'; '' for None."""
    if not v:
        return ""
    held, of = v["trainings"]
    if of == 1:
        return f"{what} on its one training" if held else f"not: {what}"
    state = "settled" if v["settled"] else "unsettled"
    return f"{what} on {held} of {of} trainings ({state})"
