"""Rank scores of a measure against the generalization gap over a grid zoo.

Kendall tau, granulated Kendall Psi and the conditional-independence score K of Jiang et al.
(2020), the PGDL competition's scorer, and the robust sign-error of Dziugaite et al. (2020).

Every score takes optional `weights`: model multiplicities of shape [n] or [B, n]. A bootstrap
resample over models is a multinomial count vector c, and a pair of distinct models (i, j) then
counts c_i * c_j times, so one call scores B resamples at once ([B, n] in, arrays of [B] out).
"""
from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import GenbenchError

Score = float | np.ndarray  # a float, or [B] for [B, n] weights

_BLOCK = 1 << 22  # most elements of an [rows, n] pair matrix built at once (twice that for [pairs, resamples])
_PGDL_EPS = 1e-12  # PGDL's entropy() takes log2(p + 1e-12)


# ---------------------------------------------------------------- input checks


def _vector(x: ArrayLike, name: str) -> np.ndarray:
    """A finite 1-D float array, or a ValueError that names the bad entries."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise GenbenchError(f"{name} must be 1-D (one value per model); got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a))
    if len(bad):
        raise GenbenchError(f"{name} has {len(bad)} NaN or infinite value(s) (positions "
                            f"{bad[:10].tolist()}); drop those models before scoring")
    return a


def _counts(weights: ArrayLike | None, n: int) -> tuple[np.ndarray, bool]:
    """Multiplicities as a [B, n] array (B = 1 without weights) and whether the input was batched."""
    if weights is None:
        return np.ones((1, n)), False
    c = np.asarray(weights, dtype=float)
    if c.ndim not in (1, 2) or c.shape[-1] != n:
        raise GenbenchError(f"weights must have shape [n] or [B, n] with n = {n} models; got {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise GenbenchError("weights must be finite and >= 0 (model multiplicities)")
    return np.atleast_2d(c), c.ndim == 2


def _prepare(mu: ArrayLike, g: ArrayLike,
             weights: ArrayLike | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Checked mu, g, the [B, n] multiplicities and the batched flag."""
    mu, g = _vector(mu, "mu"), _vector(g, "g")
    if len(mu) != len(g):
        raise GenbenchError(f"mu and g must have the same length; got {len(mu)} and {len(g)}")
    if len(mu) < 2:
        raise GenbenchError(f"need at least 2 models to score a ranking; got {len(mu)}")
    c, batched = _counts(weights, len(mu))
    return mu, g, c, batched


@dataclass(frozen=True)
class _Grid:
    """Integer codes of the hp columns, and which of them are varied axes."""

    codes: dict[Hashable, np.ndarray]
    axes: list[Hashable]        # columns other than the replicate one with >= 2 values
    columns: list[Hashable]     # all columns, the replicate one included

    def group_ids(self, cols: Sequence[Hashable]) -> tuple[np.ndarray, int]:
        """Ids 0..K-1 of the models' value combinations on `cols`, and K."""
        n = len(next(iter(self.codes.values())))
        return _combo_ids([self.codes[c] for c in cols], n)


def _combo_ids(codes: list[np.ndarray], n: int) -> tuple[np.ndarray, int]:
    """Ids 0..K-1 of the distinct rows of the stacked integer codes, and K (1 for no codes)."""
    ids = np.zeros(n, dtype=np.intp)
    for c in codes:  # the rank of each prefix of the codes, lexicographic as np.unique of the rows, one axis at a time
        _, ids = np.unique(ids * (int(c.max()) + 1) + c, return_inverse=True)
    ids = ids.reshape(-1)
    return ids, int(ids.max()) + 1


def _grid(hp: pd.DataFrame, n: int, replicate: Hashable | None, *, min_axes: int = 1) -> _Grid:
    """Parse hp (one row per model); values may be any hashable, None included."""
    if not isinstance(hp, pd.DataFrame):
        raise GenbenchError(f"hp must be a pandas DataFrame with one row per model; got {type(hp).__name__}")
    if len(hp) != n:
        raise GenbenchError(f"hp has {len(hp)} rows but there are {n} models; give one hp row per model")
    if hp.columns.duplicated().any():
        raise GenbenchError(f"hp has duplicated column names: {hp.columns[hp.columns.duplicated()].tolist()}")
    codes = {c: pd.factorize(hp[c].to_numpy(), use_na_sentinel=False)[0] for c in hp.columns}
    axes = [c for c in hp.columns if c != replicate and codes[c].max() >= 1]
    if len(axes) < min_axes:
        raise GenbenchError(f"hp needs at least {min_axes} varied axis (a column other than the replicate "
                            f"column {replicate!r} with two or more values); columns: {list(hp.columns)}, "
                            f"varied: {axes}")
    return _Grid(codes, axes, list(hp.columns))


def _out(x: np.ndarray, batched: bool) -> Score:
    """[B] array for batched input, else a Python scalar."""
    x = np.asarray(x)
    return x if batched else x[0].item()


# ---------------------------------------------------------------- small numeric helpers


def _row_blocks(n: int) -> Iterator[slice]:
    """Row slices of an [n, n] pair matrix, each at most _BLOCK elements."""
    step = max(1, _BLOCK // n)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _signs(x: np.ndarray, rows: slice) -> np.ndarray:
    """sign(x_i - x_j) for i in rows, all j: [r, n]."""
    return np.sign(x[rows, None] - x[None, :])


def _nanmean_rows(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis ignoring NaN (NaN where a row is all NaN), without warnings."""
    ok = ~np.isnan(x)
    k = ok.sum(-1)
    s = np.where(ok, x, 0.0).sum(-1)
    return np.where(k > 0, s / np.maximum(k, 1), np.nan)


def _nanmin_rows(x: np.ndarray) -> np.ndarray:
    """Min over the last axis ignoring NaN (NaN where a row is all NaN), without warnings."""
    ok = ~np.isnan(x)
    m = np.where(ok, x, np.inf).min(-1)
    return np.where(ok.any(-1), m, np.nan)


@lru_cache(maxsize=256)
def _triu(n: int) -> tuple[np.ndarray, np.ndarray]:
    """np.triu_indices(n, 1), kept (read-only): the same few group sizes recur for every measure and resample."""
    a, b = np.triu_indices(n, 1)
    a.flags.writeable = b.flags.writeable = False
    return a, b


def _pairs_within(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unordered pairs (i < j) of models with equal ids, grouped; returns I, J and group starts."""
    order = np.argsort(ids, kind="stable")
    cuts = np.flatnonzero(np.diff(ids[order])) + 1
    I, J, starts, total = [], [], [], 0
    for members in np.split(order, cuts):
        if len(members) < 2:
            continue
        a, b = _triu(len(members))
        I.append(members[a])
        J.append(members[b])
        starts.append(total)
        total += len(a)
    if not I:
        e = np.zeros(0, dtype=np.intp)
        return e, e, e
    return np.concatenate(I), np.concatenate(J), np.asarray(starts)


def _exact_dtype(c: np.ndarray) -> type:
    """float32 when integer counts keep every partial pair sum below 2^24 (exact), else float64."""
    return np.float32 if np.all(c == np.round(c)) and c.sum(1).max() ** 2 < 2 ** 24 else np.float64


def _pair_classes(mu: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each unordered pair of models (np.triu_indices order) as the ordered pair (a, b) with V_mu > 0, or V_mu = 0
    and V_g > 0, and its class u: (V_mu, V_g) = (+,+), (+,-), (+,0), (0,+) as 0..3, -1 for (0, 0). The swapped
    pair (b, a) has the opposite signs, so these four classes give all nine cells."""
    I, J = _triu(len(mu))
    dm, dg = np.sign(mu[I] - mu[J]), np.sign(g[I] - g[J])
    flip = (dm < 0) | ((dm == 0) & (dg < 0))
    dg = np.where(flip, -dg, dg)
    u = np.where(dm != 0, np.where(dg > 0, 0, np.where(dg < 0, 1, 2)), np.where(dg != 0, 3, -1))
    return np.where(flip, J, I), np.where(flip, I, J), u


def _pair_weights(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[pair] = x_i x_j for every unordered pair i < j (np.triu_indices order); x is [n, nb]."""
    start = 0
    for i in range(len(x) - 1):
        np.multiply(x[i + 1:], x[i], out=out[start:start + len(x) - 1 - i])
        start += len(x) - 1 - i
    return out


@dataclass(frozen=True)
class _SetPlan:
    """Every conditioning set's pair counts, stacked: set i has rows U = (k, l) (the group of model 1, of model 2; its
    groups are the value combinations of its axes that occur) from offsets[i] to offsets[i + 1], each with the four
    classes of _pair_classes. Sets with no superset of one axis more among the sets are counted from the model pairs
    by one 0/1 matrix (pair -> row and class); the others are sums of such a superset's rows (exact: integer counts)."""

    offsets: np.ndarray                 # [sets + 1]
    onehot: np.ndarray                  # [sum K, n]: model i's group under each set, for the group sums
    first: np.ndarray                   # [sum K^2]: the group sums row of U's group k
    second: np.ndarray                  # [sum K^2]: the group sums row of U's group l
    diagonal: np.ndarray                # [sum K^2]: k == l
    swap: np.ndarray                    # [sum K^2]: the row of (l, k)
    scatter: sp.csc_matrix              # [4 sum K^2, pairs]: each ordered pair to its rows and class
    derived: list[tuple[int, int, sp.csr_matrix]]  # (set, its superset, superset rows -> set rows), largest first


def _set_plan(mu: np.ndarray, g: np.ndarray, grid: _Grid, sets: list[tuple], dtype: type) -> _SetPlan:
    """Where each set's pair counts come from (see _SetPlan); depends on mu and g, not on the multiplicities."""
    n = len(mu)
    groups = [grid.group_ids(s) for s in sets]
    Ks = [K for _, K in groups]
    offsets, goff = np.cumsum([0, *(K * K for K in Ks)]), np.cumsum([0, *Ks])
    onehot = np.zeros((goff[-1], n))
    for o, (ids, _) in zip(goff, groups):
        onehot[o + ids, np.arange(n)] = 1.0
    k = np.concatenate([np.repeat(np.arange(K), K) for K in Ks])
    l = np.concatenate([np.tile(np.arange(K), K) for K in Ks])
    K_of = np.repeat(Ks, [K * K for K in Ks])
    start = np.repeat(goff[:-1], [K * K for K in Ks])
    swap = np.repeat(offsets[:-1], [K * K for K in Ks]) + l * K_of + k
    derived, counted = [], []
    for i in sorted(range(len(sets)), key=lambda i: -len(sets[i])):
        src = next((j for j, t in enumerate(sets) if len(t) == len(sets[i]) + 1 and set(sets[i]) <= set(t)), None)
        if src is None:
            counted.append(i)
            continue
        (ids, K), (ids_src, K_src) = groups[i], groups[src]
        to = np.zeros(K_src, np.intp)
        to[ids_src] = ids  # every model of a superset group is in the same group of the set
        rows = (to[:, None] * K + to[None, :]).ravel()
        derived.append((i, src, sp.csr_matrix((np.ones(K_src * K_src), (rows, np.arange(K_src * K_src))),
                                              shape=(K * K, K_src * K_src))))
    a, b, u = _pair_classes(mu, g)
    kept = u >= 0
    counted.sort()
    rows = np.stack([4 * (offsets[i] + groups[i][0][a] * Ks[i] + groups[i][0][b]) + u for i in counted], 1)[kept]
    indptr = np.concatenate([[0], np.cumsum(kept * len(counted))])
    scatter = sp.csc_matrix((np.ones(rows.size, dtype), rows.ravel(), indptr), shape=(4 * offsets[-1], len(u)))
    return _SetPlan(offsets, onehot, start + k, start + l, k == l, swap, scatter, derived)


def _set_counts(plan: _SetPlan, cb: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[sum K^2, 4, nb] pair counts of every set (float64) for the multiplicities cb [n, nb]."""
    nb, off = cb.shape[1], plan.offsets
    tab = (plan.scatter @ _pair_weights(cb, weights)).astype(float).reshape(-1, 4, nb)
    for i, src, to in plan.derived:
        tab[off[i]:off[i + 1]] = (to @ tab[off[src]:off[src + 1]].reshape(-1, 4 * nb)).reshape(-1, 4, nb)
    return tab


def _plog(p: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """p * log(num / den) where p > 0, else 0 (num and den may then be 0)."""
    r = np.divide(num, den, out=np.ones_like(p), where=p > 0)
    np.log(r, out=r)
    r *= p
    return r


# ---------------------------------------------------------------- Kendall tau


def _tau(mu: np.ndarray, g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """c^T S c / sum_{i != j} c_i c_j with S_ij = sign(mu_i - mu_j) sign(g_i - g_j); [B]."""
    num = np.zeros(len(c))
    for rows in _row_blocks(len(mu)):
        s = _signs(mu, rows) * _signs(g, rows)
        num += np.einsum("bi,bi->b", c[:, rows], c @ s.T)
    den = c.sum(1) ** 2 - (c * c).sum(1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def kendall_tau(mu: ArrayLike, g: ArrayLike, weights: ArrayLike | None = None) -> Score:
    """tau = 1/(n(n-1)) sum_{i != j} sign(mu_i - mu_j) sign(g_i - g_j) (tau-a, Jiang et al. 2020).

    With multiplicities c: sum_{i != j} c_i c_j S_ij / sum_{i != j} c_i c_j (pairs of copies of one
    model are no pair). Float, or [B] for [B, n] weights; NaN if fewer than 2 models are present.
    """
    mu, g, c, batched = _prepare(mu, g, weights)
    return _out(_tau(mu, g, c), batched)


# ---------------------------------------------------------------- granulated Psi


def granulated_psi(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
                   weights: ArrayLike | None = None) -> tuple[Score, dict[Hashable, Score]]:
    """Psi = mean over varied axes i of psi_i = mean over groups sharing all other hp columns of tau.

    Groups share every other column, the replicate one included (models with one seed); groups
    with fewer than 2 (present) models are skipped, as are axes without such a group (psi_i NaN).
    Returns (Psi, {axis: psi_i}); floats, or [B] arrays for [B, n] weights.
    """
    mu, g, c, batched = _prepare(mu, g, weights)
    grid = _grid(hp, len(mu), replicate)
    per_axis = {}
    for axis in grid.axes:
        ids, _ = grid.group_ids([col for col in grid.columns if col != axis])
        I, J, starts = _pairs_within(ids)
        if len(I) == 0:
            per_axis[axis] = np.full(len(c), np.nan)
            continue
        s = np.sign(mu[I] - mu[J]) * np.sign(g[I] - g[J])
        cc = c[:, I] * c[:, J]
        num = np.add.reduceat(cc * s, starts, axis=1)
        den = np.add.reduceat(cc, starts, axis=1)
        per_axis[axis] = _nanmean_rows(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))
    psi = _nanmean_rows(np.stack(list(per_axis.values()), 1))
    return _out(psi, batched), {a: _out(v, batched) for a, v in per_axis.items()}


# ---------------------------------------------------------------- conditional mutual information


def _cmi_ratios(plan: _SetPlan, tab: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[sets, nb] I(V_mu; V_g | U) / H(V_g | U), p(U)-weighted, over ordered pairs i != j; NaN where H = 0.

    tab holds the classes (V_mu, V_g) = (+,+), (+,-), (+,0), (0,+) of each U = (k, l); the swapped pairs (U = (l, k),
    the opposite signs) give four more cells and (0, 0) is the rest of the s_k s_l - [k = l] q_k pairs. A swapped cell
    adds the same term as its own, so each of the four classes counts twice in I, and V_g = + (for V_g = -) twice in H.
    """
    p0, p1, p2, p3 = (tab[:, u] for u in range(4))
    sw = tab[plan.swap]
    total = s[plan.first] * s[plan.second] - np.where(plan.diagonal[:, None], q[plan.first], 0.0)
    rest = tab.sum(1) + sw.sum(1)
    t11 = np.maximum(total - rest, 0.0)
    nu = rest + t11
    na2, na1 = p0 + p1 + p2, sw[:, 3] + t11 + p3
    nb2, nb1, nb0 = sw[:, 1] + p3 + p0, sw[:, 2] + t11 + p2, sw[:, 0] + sw[:, 3] + p1
    mi = 2 * (_plog(p0, p0 * nu, na2 * nb2) + _plog(p1, p1 * nu, na2 * nb0) + _plog(p2, p2 * nu, na2 * nb1)
              + _plog(p3, p3 * nu, na1 * nb2)) + _plog(t11, t11 * nu, na1 * nb1)
    h = -(2 * _plog(nb2, nb2, nu) + _plog(nb1, nb1, nu))
    mi, h = np.add.reduceat(mi, plan.offsets[:-1], 0), np.add.reduceat(h, plan.offsets[:-1], 0)
    return np.where(h > 0, np.maximum(mi, 0.0) / np.where(h > 0, h, 1.0), np.nan)


def _pgdl_ratios(plan: _SetPlan, tab: np.ndarray, s: np.ndarray, sets: slice) -> np.ndarray:
    """[sets, nb] sum_k MI_k / sum_k H_k (= mean/mean), bits, of PGDL's 2 x 2 slices (gap_m > gap_m', mu_m > mu_m')
    over all ordered pairs, self pairs included: (gap, mu) = (+,+) is CMI's (V_mu, V_g) = (+,+); (+,-) its (+,-)
    swapped and (0,+); (-,+) its (+,-) and (+,0); (-,-) the rest of s_k s_l. Empty slices add nothing."""
    rows = slice(plan.offsets[sets.start], plan.offsets[sets.stop])
    t, sw = tab[rows], tab[plan.swap[rows]]
    pp, pm, mp = t[:, 0], sw[:, 1] + t[:, 3], t[:, 1] + t[:, 2]  # (gap, mu): (+,+), (+,-), (-,+)
    mm = np.maximum(s[plan.first[rows]] * s[plan.second[rows]] - (pp + pm + mp), 0.0)
    tot = mm + mp + pm + pp
    tot = np.where(tot > 0, tot, 1.0)
    pp, pm, mp, mm = pp / tot, pm / tot, mp / tot, mm / tot
    g1, g0, m1, m0 = pm + pp, mm + mp, mp + pp, mm + pm  # gap and mu marginals
    mi = _plog(pp, pp, g1 * m1) + _plog(pm, pm, g1 * m0) + _plog(mp, mp, g0 * m1) + _plog(mm, mm, g0 * m0)
    h = -(g0 * np.log2(g0 + _PGDL_EPS) + g1 * np.log2(g1 + _PGDL_EPS))
    cuts = plan.offsets[sets.start:sets.stop] - plan.offsets[sets.start]
    mi, h = np.add.reduceat(mi, cuts, 0) / np.log(2), np.add.reduceat(h, cuts, 0)
    return np.where(h > 0, mi / np.where(h > 0, h, 1.0), np.nan)


def _grid_ratios(mu: np.ndarray, g: np.ndarray, c: np.ndarray, grid: _Grid, sets: list[tuple], *,
                 cmi: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The CMI ratio of every set ([sets, B], None without `cmi`) and the PGDL ratio of its two-axis sets ([pairs, B],
    None without such sets), from one count of the model pairs per resample chunk. sets: ordered by size."""
    B, n = c.shape
    dtype = _exact_dtype(c)
    plan = _set_plan(mu, g, grid, sets, dtype)
    two = [i for i, s in enumerate(sets) if len(s) == 2]
    pairs = slice(two[0], two[-1] + 1) if two else None
    ks = np.full((len(sets), B), np.nan) if cmi else None
    pg = np.full((len(two), B), np.nan) if two else None
    step = max(1, min(B, _BLOCK // 2 // max(n * (n - 1) // 2, 4 * int(plan.offsets[-1]))))  # resamples a chunk
    weights = np.empty((n * (n - 1) // 2, step), dtype)
    for b0 in range(0, B, step):
        cb = np.ascontiguousarray(c[b0:b0 + step].T)  # [n, nb]
        tab = _set_counts(plan, cb.astype(dtype), weights[:, :cb.shape[1]])
        s, q = plan.onehot @ cb, plan.onehot @ (cb * cb)
        if cmi:
            ks[:, b0:b0 + step] = _cmi_ratios(plan, tab, s, q)
        if pairs is not None:
            pg[:, b0:b0 + step] = _pgdl_ratios(plan, tab, s, pairs)
    return ks, pg


def conditional_mi(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, max_set: int = 2,
                   replicate: Hashable | None = "seed",
                   weights: ArrayLike | None = None) -> tuple[Score, dict[tuple, Score], Score]:
    """K = min_{S, |S| <= max_set} I(V_mu; V_g | U_S) / H(V_g | U_S) over ordered pairs of distinct models.

    V = sign of the difference (-, 0, +), U_S = (values of S for model 1, for model 2), p(U_S)
    weighting as in Jiang et al. 2020 (the empty set included). CMI is sign-blind, so the sign of
    Kendall tau is returned too. Sets with H(V_g | U_S) = 0 have nothing to explain and get NaN,
    left out of the min. Returns (K, {axes tuple: value}, sign); floats, or [B] arrays.
    """
    mu, g, c, batched = _prepare(mu, g, weights)
    if not isinstance(max_set, (int, np.integer)) or max_set < 0:
        raise GenbenchError(f"max_set must be an integer >= 0; got {max_set!r}")
    grid = _grid(hp, len(mu), replicate)
    sets = [s for k in range(min(max_set, len(grid.axes)) + 1) for s in itertools.combinations(grid.axes, k)]
    ratios, _ = _grid_ratios(mu, g, c, grid, sets)
    values = dict(zip(sets, ratios))
    k = _nanmin_rows(ratios.T)
    sign = np.sign(_tau(mu, g, c))
    return _out(k, batched), {s: _out(v, batched) for s, v in values.items()}, _out(sign, batched)


# ---------------------------------------------------------------- PGDL scorer


def pgdl_cmi_by_pair(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
                     weights: ArrayLike | None = None) -> dict[tuple, Score]:
    """{(h1, h2): mean_k MI_k / mean_k H_k}, the per-pair values behind pgdl_cmi (see there)."""
    mu, g, c, batched = _prepare(mu, g, weights)
    values = _pgdl_pairs(mu, g, c, _grid(hp, len(mu), replicate, min_axes=2))
    return {p: _out(v, batched) for p, v in values.items()}


def _pgdl_pairs(mu: np.ndarray, g: np.ndarray, c: np.ndarray, grid: _Grid) -> dict[tuple, np.ndarray]:
    """The PGDL ratio ([B]) for every unordered pair of varied axes."""
    pairs = list(itertools.combinations(grid.axes, 2))
    _, ratios = _grid_ratios(mu, g, c, grid, pairs, cmi=False)
    return dict(zip(pairs, ratios))


def pgdl_cmi(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
             weights: ArrayLike | None = None) -> Score:
    """PGDL competition score: min over axis pairs (h1, h2) of mean_k MI_k / mean_k H_k, in bits.

    The scorer's table as it is: ALL ordered model pairs (m, m'), m = m' included; axis 0
    1[gap_m > gap_m'], axis 1 1[mu_m > mu_m'] (strict, so ties count as "-"); slice key k =
    (h1_m, h1_m', h2_m, h2_m'); MI_k and H_k (entropy of the gap-sign marginal, log2(p + 1e-12)
    as in the scorer) within each slice, unweighted mean over the slices; |S| = 2 only.
    Quirks kept: MI is relabel-invariant, so the score is meant to be sign-blind, but the self
    pairs stay (-, -) under mu -> -mu, so slices whose two models share the (h1, h2) cell are
    not relabelled and -mu can score differently (-gap scores < 1 on a 3-axis grid). Self pairs
    also pull those slices towards (-, -). (h1, h2) and (h2, h1) give the same value, so each
    unordered pair is computed once; empty slices (incomplete grids, resamples) are skipped where
    the scorer would fail; NaN if no slice has gap-sign entropy. The leaderboard shows 100 x this.
    Float, or [B] for [B, n] weights; pgdl_cmi_by_pair gives the values per (h1, h2).
    """
    mu, g, c, batched = _prepare(mu, g, weights)
    values = _pgdl_pairs(mu, g, c, _grid(hp, len(mu), replicate, min_axes=2))
    return _out(_nanmin_rows(np.stack(list(values.values()), 1)), batched)


def grid_scores(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
                weights: ArrayLike | None = None) -> tuple[Score, Score, Score | None]:
    """conditional_mi (|S| <= 2: K and the sign) and pgdl_cmi from one count of the model pairs per conditioning
    set, the same numbers as the two functions; pgdl None where the grid has fewer than two varied axes."""
    mu, g, c, batched = _prepare(mu, g, weights)
    grid = _grid(hp, len(mu), replicate)
    sets = [s for k in range(min(2, len(grid.axes)) + 1) for s in itertools.combinations(grid.axes, k)]
    values, pairs = _grid_ratios(mu, g, c, grid, sets)
    k = _nanmin_rows(values.T)
    pgdl = _out(_nanmin_rows(pairs.T), batched) if pairs is not None else None
    return _out(k, batched), _out(np.sign(_tau(mu, g, c)), batched), pgdl


# ---------------------------------------------------------------- robust sign-error


def hoeffding_weight(dg: np.ndarray, n_test: int) -> np.ndarray:
    """w = max(0, 1 - 2 exp(-2 n (|dg|/2)^2))^2, then (w - 0.5)_+ (Dziugaite et al.'s noise filter)."""
    w = np.maximum(0.0, 1.0 - 2.0 * np.exp(-2.0 * n_test * (np.abs(dg) / 2.0) ** 2)) ** 2
    return np.where(w > 0.5, w - 0.5, 0.0)


def _environments(grid: _Grid) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Model pairs of every environment (two grid points differing in one axis, all replicates crossed).

    Returns I, J (model indices), the start of each environment's pairs, and its axis index.
    """
    point, P = grid.group_ids(grid.axes)
    members = [np.flatnonzero(point == p) for p in range(P)]
    first = np.array([m[0] for m in members])  # a model of each grid point, for its hp values
    I, J, starts, env_axis, total = [], [], [], [], 0
    for a, axis in enumerate(grid.axes):
        # grid points that agree on every other axis differ in exactly this one
        ids, _ = _combo_ids([grid.codes[col][first] for col in grid.axes if col != axis], P)
        pi, pj, _ = _pairs_within(ids)
        for p, q in zip(pi, pj):
            mp, mq = members[p], members[q]
            I.append(np.repeat(mp, len(mq)))
            J.append(np.tile(mq, len(mp)))
            starts.append(total)
            env_axis.append(a)
            total += len(mp) * len(mq)
    if not I:
        e = np.zeros(0, dtype=np.intp)
        return e, e, e, e
    return np.concatenate(I), np.concatenate(J), np.asarray(starts), np.asarray(env_axis)


def _summary(losses: np.ndarray) -> dict[str, np.ndarray]:
    """worst (max), p90 (linear 90th percentile), mean and count over the kept (non-NaN) environments."""
    kept = (~np.isnan(losses)).sum(1)
    worst, p90 = np.full(len(losses), np.nan), np.full(len(losses), np.nan)
    has = kept > 0
    if losses.shape[1] and has.any():
        worst[has] = np.nanmax(losses[has], axis=1)
        p90[has] = np.nanpercentile(losses[has], 90, axis=1)
    return {"worst": worst, "p90": p90, "mean": _nanmean_rows(losses), "environments": kept}


def _pair_terms(mu: np.ndarray, g: np.ndarray, I: np.ndarray, J: np.ndarray, n_test: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The Hoeffding weight w and the sign loss l of every environment pair."""
    return hoeffding_weight(g[I] - g[J], n_test), (1.0 - np.sign(mu[I] - mu[J]) * np.sign(g[I] - g[J])) / 2.0


def _kept_environments(w: np.ndarray, starts: np.ndarray, min_ess: float) -> np.ndarray:
    """[E] whether each environment's pairs, every model once, reach the ESS (sum w)^2 / sum w^2 >= min_ess."""
    if not len(starts):
        return np.zeros(0, bool)
    sw, sw2 = np.add.reduceat(w, starts), np.add.reduceat(w * w, starts)
    ess = np.where(sw2 > 0, sw ** 2 / np.where(sw2 > 0, sw2, 1.0), 0.0)
    return (sw > 0) & ((ess > min_ess) | np.isclose(ess, min_ess))  # isclose as in the paper's code


def _environment_losses(c: np.ndarray, I: np.ndarray, J: np.ndarray, starts: np.ndarray, w: np.ndarray,
                        loss: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """[B, E] environment losses sum c_i c_j w l / sum c_i c_j w of the kept environments, NaN elsewhere (and where
    a resample leaves an environment no weight)."""
    losses = np.full((len(c), len(starts)), np.nan)
    if not len(starts):
        return losses
    step = max(1, _BLOCK // len(I))
    for b0 in range(0, len(c), step):
        cc = c[b0:b0 + step, I] * c[b0:b0 + step, J]
        sw = np.add.reduceat(cc * w, starts, axis=1)
        swl = np.add.reduceat(cc * w * loss, starts, axis=1)
        losses[b0:b0 + step] = np.where(kept & (sw > 0), swl / np.where(sw > 0, sw, 1.0), np.nan)
    return losses


def _no_environment_reason(kept: np.ndarray, E: int, n_test: int, min_ess: float) -> str | None:
    """Why some values are NaN, or None."""
    if E == 0:
        return "no two grid points differ in exactly one axis, so there is no environment"
    if (kept == 0).all():
        return (f"none of the {E} environments reaches the effective sample size min_ess={min_ess} "
                f"(too few replicates, or gaps too close for n_test={n_test} to tell apart)")
    if (kept == 0).any():
        return (f"in {int((kept == 0).sum())} of {len(kept)} resamples no kept environment keeps a pair of "
                f"positive weight")
    return None


def robust_sign_error(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, n_test: int,
                      replicate: Hashable | None = "seed", min_ess: float = 12,
                      weights: ArrayLike | None = None) -> dict:
    """Dziugaite et al. 2020: per environment sum w l / sum w, l = (1 - sign(dmu) sign(dg)) / 2.

    Environments: pairs of grid points (hp rows without the replicate column) that differ in
    exactly one axis, each unordered pair once, all replicate pairs pooled. w: the Hoeffding
    weight of |g1 - g2| with n_test test points (g as a fraction), then (w - 0.5)_+. Kept if
    (sum w)^2 / sum w^2 >= min_ess. Returns worst (max), p90 (linear), mean, environments (kept),
    per_axis (the same per varied axis), candidates (before the ESS filter) and reason (None, or
    why values are NaN). Floats, or [B] arrays for [B, n] weights.

    The ESS filter is applied once, to the models as given (w depends on the gaps alone): a resample
    re-weighs the pairs of the kept environments and never re-selects environments. Re-selecting on
    resampled multiplicities admits environments that one duplicated pair dominates, whose losses are
    near 0 or 1, and biased the resampled values upward (on mnist1d-fantastic, pacbayes.mag_flatness's
    mean 0.015 against a resampled 95% range of [0.045, 0.105]). A resample that leaves one side of a kept
    environment without a model (or only pairs of weight 0) drops that environment from its summary: with
    5 seeds per grid point, about 2 e^-5 = 1.3% of resamples per environment.
    """
    mu, g, c, batched = _prepare(mu, g, weights)
    if not n_test > 0:
        raise GenbenchError(f"n_test (number of test points behind the gap) must be > 0; got {n_test!r}")
    if not min_ess >= 0:
        raise GenbenchError(f"min_ess must be >= 0; got {min_ess!r}")
    grid = _grid(hp, len(mu), replicate)
    I, J, starts, env_axis = _environments(grid)
    w, loss = _pair_terms(mu, g, I, J, n_test)
    losses = _environment_losses(c, I, J, starts, w, loss, _kept_environments(w, starts, min_ess))
    res = _summary(losses)
    out = {k: _out(v, batched) for k, v in res.items()}
    out["per_axis"] = {axis: {k: _out(v, batched) for k, v in _summary(losses[:, env_axis == a]).items()}
                       for a, axis in enumerate(grid.axes)}
    out["candidates"] = len(starts)
    out["reason"] = _no_environment_reason(res["environments"], len(starts), n_test, min_ess)
    return out
