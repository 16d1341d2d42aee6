"""The paired bootstrap: one resample matrix per zoo (a function of its table hash and the seed, so records made at
different times share it), the pooled repeated k-fold R^2 and MSE of fixed held-out predictions on each resample,
and the rank groups read from paired differences. numpy only: the leaderboard recomputes groups from records."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ..errors import GenbenchError, check_n_boot

LEVEL = 0.95
MIN_RESAMPLES = 10  # fewer finite resamples than this give no interval


def resample_seed(table_sha256: str, seed: int) -> int:
    """The generator seed of a zoo's resamples: the zoo's table hash and the user's seed, hashed together."""
    digest = hashlib.sha256(f"{table_sha256}:{int(seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def resample_weights(n: int, *, table_sha256: str, seed: int, n_boot: int) -> np.ndarray:
    """[n_boot, n] multinomial counts over the zoo's n models (sorted by model id): the same for every entry."""
    if n < 1 or n_boot < 1:
        raise GenbenchError(f"the bootstrap needs n >= 1 models and n_boot >= 1 resamples; got n={n}, n_boot={n_boot}")
    check_n_boot("n_boot (--n-boot)", n_boot)  # [n_boot, n] weights: 10**11 of them asked numpy for 157 TiB
    rng = np.random.default_rng(resample_seed(table_sha256, seed))
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)


def pooled_scores(y: np.ndarray, heldout: np.ndarray, weights: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Pooled k-fold R^2 and MSE of held-out predictions [R, n] (one row per shuffle), averaged over the R shuffles,
    on each resample (weights [B, n] of model multiplicities; None: the models once). Returns two [B] arrays (B = 1
    without weights). Models whose prediction is NaN in any shuffle are left out (weight 0). R^2 is NaN where the
    resampled target has no spread. Several entries at once: heldout [E, R, n] (finite for the same models) gives
    two [E, B] arrays from one matrix product."""
    y = np.asarray(y, float)
    h = np.asarray(heldout, float)
    single = h.ndim <= 2
    stack = np.atleast_2d(h)[None] if single else h  # [E, R, n]
    e, r, n = stack.shape
    w = np.ones((1, len(y))) if weights is None else np.atleast_2d(np.asarray(weights, float))
    ok = np.isfinite(y) & np.isfinite(stack).all((0, 1))
    w = np.where(ok, w, 0.0)
    y0, h0 = np.where(ok, y, 0.0), np.where(ok, stack, 0.0)
    tot = w.sum(1)
    safe = np.where(tot > 0, tot, 1.0)
    ybar = (w * y0).sum(1) / safe
    spread = np.where(w > 0, y0, -np.inf).max(1) > np.where(w > 0, y0, np.inf).min(1)
    ss_tot = np.where(spread, (w * (y0 - ybar[:, None]) ** 2).sum(1), 0.0)
    sq = np.ascontiguousarray(((y0 - h0) ** 2).reshape(e * r, n).T)  # [n, E R]
    sse = (w @ sq).reshape(len(w), e, r).transpose(1, 0, 2)  # [E, B, R]
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(ss_tot[None, :, None] > 0, 1.0 - sse / ss_tot[None, :, None], np.nan).mean(2)
        mse = np.where(tot[None, :, None] > 0, sse / safe[None, :, None], np.nan).mean(2)
    return (r2[0], mse[0]) if single else (r2, mse)


def outside_text(estimate: float, lo: float, hi: float) -> tuple[str, str, str]:
    """An estimate and the interval it lies outside, as a refusal says them: 3 significant digits, more where 3
    would print the estimate as the bound it misses."""
    for digits in range(3, 18):
        v, a, b = (f"{x:.{digits}g}" for x in (estimate, lo, hi))
        if (v != a or estimate == lo) and (v != b or estimate == hi):
            break
    return v, a, b


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float] | None:
    """The central `level` percentile interval of the finite samples; None when fewer than MIN_RESAMPLES are finite
    or the distribution is degenerate (every resample gives the same value: no interval to show)."""
    s = np.asarray(samples, float)
    s = s[np.isfinite(s)]
    if len(s) < MIN_RESAMPLES or np.ptp(s) == 0:
        return None
    a = (1 - level) / 2
    return float(np.quantile(s, a)), float(np.quantile(s, 1 - a))


def _contains_zero(d: np.ndarray, level: float) -> bool:
    """Whether the percentile interval of the paired differences d contains 0 (a constant d: whether it is 0; too
    few finite differences: True, they cannot be told apart)."""
    finite = d[np.isfinite(d)]
    if len(finite) < MIN_RESAMPLES:
        return True
    iv = percentile_interval(finite, level)
    return bool(finite[0] == 0) if iv is None else iv[0] <= 0 <= iv[1]


def paired_groups(scores: Sequence[float], draws: np.ndarray, *, level: float = LEVEL) -> list[int]:
    """Rank groups (1, 2, ...) of entries already sorted best first, from their paired bootstrap draws [E, B] (the
    same resamples for every entry). Walking down, an entry stays in the current leader's group while the `level`
    percentile interval of (entry - leader) over the resamples contains 0; otherwise it leads the next group."""
    draws = np.asarray(draws, float)
    if len(scores) != len(draws):
        raise GenbenchError(f"paired_groups needs one row of draws per entry: {len(scores)} scores, {len(draws)} rows")
    groups: list[int] = []
    lead = 0
    for i in range(len(scores)):
        if i == 0:
            groups.append(1)
            continue
        if not _contains_zero(draws[i] - draws[lead], level):
            lead = i
            groups.append(groups[-1] + 1)
        else:
            groups.append(groups[-1])
    return groups
