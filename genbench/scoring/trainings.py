"""Scores over trainings of one grid: the mean of a score over the trainings with a 95% interval that holds both
the sampling of the grid's models and the training noise, and verdicts that are settled when every training shows the same
and the next training is predicted to. numpy at import (scipy only for a verdict's t quantile): the leaderboard
combines the records' draws the same way.

The interval is a two-stage bootstrap. The trainings of a grid share its models (the same grid points, data and
resamples, training 0's table hash), so draw b resamples the models once (the same multiplicities on every training)
and the trainings T of T with replacement (`training_picks`), and averages the training's score on that model
resample over the drawn trainings (`combine_draws`); the interval is the central 95% of those averages."""
from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .resample import outside_text, percentile_interval

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
        shown, lo, hi = outside_text(mean, *iv)
        return mean, None, (f"the mean {shown} over the trainings lies outside its own 95% interval [{lo}, {hi}]: "
                            "the resamples do not support it")
    return mean, iv, None


def interval(key: str, *, vs_recipe: Sequence[float], intervals: Mapping[str, Sequence[float]],
             refused: Mapping[str, str]) -> tuple[float, float] | None:
    """The 95% interval one training's verdict is read from: beats_recipe, the paired interval of k-fold R^2 minus
    the recipe's; adds_to_recipe, delta_r2's; None for against_claim (a yes/no check) or when there is none."""
    if key == "beats_recipe":
        iv = list(vs_recipe)[1:] if len(vs_recipe) == 3 else None
    elif key == "adds_to_recipe":
        iv = None if "delta_r2" in refused else intervals.get("delta_r2")
    else:
        return None
    return None if iv is None else (float(iv[0]), float(iv[1]))


def said(key: str, *, vs_recipe: Sequence[float], intervals: Mapping[str, Sequence[float]],
         refused: Mapping[str, str], direction: Mapping[str, Any] | None) -> str | None:
    """What one training's scores say of a verdict: "holds" (beats_recipe: the paired interval of k-fold R^2 minus
    the recipe's lies above 0; adds_to_recipe: delta_r2's interval lies above 0; against_claim: the direction
    check says it runs against its claim), "fails" (the interval lies below 0; the direction check says not),
    "open" (the interval contains 0: neither is shown), None (it cannot say: no recipe, no delta, no claim)."""
    if key == "against_claim":
        if not direction or direction.get("claim") is None:
            return None
        return "holds" if direction.get("against") is True else "fails"
    iv = interval(key, vs_recipe=vs_recipe, intervals=intervals, refused=refused)
    if iv is None:
        return None
    return "holds" if iv[0] > 0 else "fails" if iv[1] < 0 else "open"


def predicted(ends: Sequence[Sequence[float]]) -> tuple[float, float] | None:
    """Where a new training's 95% interval is predicted to lie, from T >= 2 trainings' intervals [lo_k, hi_k]: the
    lower end of the 95% prediction interval of a new lo (mean(lo) - t(0.975, T-1) * sd(lo) * sqrt(1 + 1/T)) and the
    upper end of that of a new hi, each end taken as normal and independent over trainings. It bounds, at 97.5% each,
    where the next training's interval can start and end, so a verdict settled by it is one the next training shows."""
    from scipy import stats

    e = np.asarray(ends, float)
    if e.ndim != 2 or e.shape[1] != 2 or len(e) < 2 or not np.isfinite(e).all():
        return None
    k = float(stats.t.ppf(0.975, len(e) - 1)) * math.sqrt(1 + 1 / len(e))
    lo, hi = e[:, 0], e[:, 1]
    return float(lo.mean() - k * lo.std(ddof=1)), float(hi.mean() + k * hi.std(ddof=1))


def verdict(s: Sequence[str | None], ends: Sequence[Sequence[float] | None] | None = None) -> dict[str, Any] | None:
    """A verdict over trainings from what each says (`said`) and, for the verdicts read from an interval, each
    training's interval (`ends`, from `interval`): it holds on the majority of them, and it is settled when two or
    more trainings all show the same (a verdict not shown on some training, its interval containing 0 there, "open"
    and counted, stays unsettled) and, with `ends`, the next training is predicted to show it too (`predicted`, kept
    in the verdict: its lower end above 0 for a verdict that holds, its upper end below 0 for one that fails). None
    when a training could not say (e.g. no recipe to compare with)."""
    if not s or any(x not in ("holds", "fails", "open") for x in s):
        return None
    n = s.count("holds")
    settled = len(s) > 1 and (n == len(s) or s.count("fails") == len(s))
    out = {"holds": 2 * n > len(s), "trainings": [n, len(s)], "open": s.count("open"), "settled": settled}
    if ends is not None:
        if len(ends) != len(s):
            raise ValueError(f"verdict needs one interval per training: {len(ends)} for {len(s)} trainings")
        nxt = predicted(ends) if all(e is not None for e in ends) else None
        out["predicted"] = None if nxt is None else list(nxt)
        out["settled"] = settled and nxt is not None and (nxt[0] > 0 if n == len(s) else nxt[1] < 0)
    return out


def verdict_of(key: str, trainings: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The verdict `key` over trainings from each training's scores (a mapping with vs_recipe, intervals, refused
    and direction, as `said` takes them): what each says and, for a verdict read from an interval, the intervals."""
    says = [said(key, **t) for t in trainings]
    if key == "against_claim":
        return verdict(says)
    return verdict(says, [interval(key, vs_recipe=t["vs_recipe"], intervals=t["intervals"], refused=t["refused"])
                          for t in trainings])
