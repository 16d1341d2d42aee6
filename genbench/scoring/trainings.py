"""Scores over trainings of one grid: the mean of a score over the trainings with a 95% interval that holds both
the sampling of the grid's models and the training noise, and verdicts that are settled when every training shows the same.
numpy only: the leaderboard combines the records' draws the same way.

The interval is a two-stage bootstrap. The trainings of a grid share its models (the same grid points, data and
resamples, training 0's table hash), so draw b resamples the models once (the same multiplicities on every training)
and the trainings T of T with replacement (`training_picks`), and averages the training's score on that model
resample over the drawn trainings (`combine_draws`); the interval is the central 95% of those averages."""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
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


def said(key: str, *, vs_recipe: Sequence[float], intervals: Mapping[str, Sequence[float]],
         refused: Mapping[str, str], direction: Mapping[str, Any] | None) -> str | None:
    """What one training's scores say of a verdict: "holds" (beats_recipe: the paired interval of k-fold R^2 minus
    the recipe's lies above 0; adds_to_recipe: delta_r2's interval lies above 0; against_claim: the direction
    check says it runs against its claim), "fails" (the interval lies below 0; the direction check says not),
    "open" (the interval contains 0: neither is shown), None (it cannot say: no recipe, no delta, no claim)."""
    if key == "beats_recipe":
        iv = list(vs_recipe)[1:] if len(vs_recipe) == 3 else None
    elif key == "adds_to_recipe":
        iv = None if "delta_r2" in refused else intervals.get("delta_r2")
    else:
        if not direction or direction.get("claim") is None:
            return None
        return "holds" if direction.get("against") is True else "fails"
    if iv is None:
        return None
    return "holds" if iv[0] > 0 else "fails" if iv[1] < 0 else "open"


def verdict(s: Sequence[str | None]) -> dict[str, Any] | None:
    """A verdict over trainings from what each says (`said`): it holds on the majority of them, and it is settled
    when two or more trainings all show the same, so a verdict that is not shown on some training (its interval
    contains 0 there: "open", counted) stays unsettled. None when a training could not say (e.g. no recipe to
    compare with)."""
    if not s or any(x not in ("holds", "fails", "open") for x in s):
        return None
    n = s.count("holds")
    return {"holds": 2 * n > len(s), "trainings": [n, len(s)], "open": s.count("open"),
            "settled": len(s) > 1 and (n == len(s) or s.count("fails") == len(s))}
