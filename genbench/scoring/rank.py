"""Rank scores of a measure against the generalization gap over a grid zoo.

Kendall tau, granulated Kendall Psi and the conditional-independence score K of Jiang et al.
(2020), the PGDL competition's scorer, and the robust sign-error of Dziugaite et al. (2020).

Every score takes optional `weights`: model multiplicities of shape [n] or [B, n]. A bootstrap
resample over models is a multinomial count vector c, and a pair of distinct models (i, j) then
counts c_i * c_j times, so one call scores B resamples at once ([B, n] in, arrays of [B] out).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ..errors import GenbenchError

Score = float | np.ndarray  # a float, or [B] for [B, n] weights
MaskFn = Callable[[slice], list]  # rows -> pair masks [r, n] (bool, or None when all False)

_BLOCK = 1 << 22  # most elements of an [rows, n] pair matrix built at once
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
    if not codes:
        return np.zeros(n, dtype=np.intp), 1
    _, ids = np.unique(np.stack(codes, 1), axis=0, return_inverse=True)
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


def _plogq(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """p * log(q) with 0 where p == 0 (q may then be 0 too)."""
    pos = p > 0
    return np.where(pos, p * np.log(np.where(pos, q, 1.0)), 0.0)


def _pairs_within(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unordered pairs (i < j) of models with equal ids, grouped; returns I, J and group starts."""
    order = np.argsort(ids, kind="stable")
    cuts = np.flatnonzero(np.diff(ids[order])) + 1
    I, J, starts, total = [], [], [], 0
    for members in np.split(order, cuts):
        if len(members) < 2:
            continue
        a, b = np.triu_indices(len(members), 1)
        I.append(members[a])
        J.append(members[b])
        starts.append(total)
        total += len(a)
    if not I:
        e = np.zeros(0, dtype=np.intp)
        return e, e, e
    return np.concatenate(I), np.concatenate(J), np.asarray(starts)


def _tables_by_group(c: np.ndarray, masks_for_rows: MaskFn, n_masks: int,
                     groupings: list[tuple[np.ndarray, int]]) -> list[np.ndarray]:
    """counts[b, k, l, t] = sum over i in group k, j in group l of c_bi c_bj M_t[i, j], per grouping.

    General path (any grid): one product per group l, so n^2 B work per grouping and mask.
    `masks_for_rows(rows)` gives the pair masks M_t on those rows ([r, n] bool, None when empty).
    """
    B, n = c.shape
    out = [np.zeros((B, K, K, n_masks)) for _, K in groupings]
    members = [[np.flatnonzero(ids == l) for l in range(K)] for ids, K in groupings]
    for rows in _row_blocks(n):
        masks = masks_for_rows(rows)
        cr = c[:, rows].T  # [r, B]
        for (ids, K), mem, o in zip(groupings, members, out):
            onehot = np.zeros((K, len(cr)))
            onehot[ids[rows], np.arange(len(cr))] = 1.0
            for t, m in enumerate(masks):
                if m is None:
                    continue
                # y[i, b, l] = sum_{j in group l} M[i, j] c_bj, then sum_{i in group k} c_bi y[i, b, l]
                y = np.stack([m[:, idx].astype(float) @ c[:, idx].T for idx in mem], axis=2)
                o[..., t] += (onehot @ (cr[:, :, None] * y).reshape(len(cr), -1)).reshape(K, B, K) \
                    .transpose(1, 0, 2)
    return out


def _group_sums(c: np.ndarray, ids: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group k: s_k = sum c_i and q_k = sum c_i^2 over its models, each [B, K]."""
    onehot = np.zeros((len(ids), K))
    onehot[np.arange(len(ids)), ids] = 1.0
    return c @ onehot, (c * c) @ onehot


_Tables = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def _set_tables(mu: np.ndarray, g: np.ndarray, c: np.ndarray, grid: _Grid, sets: list[tuple],
                mask_factory: Callable[[np.ndarray, np.ndarray], MaskFn], n_masks: int) -> _Tables:
    """Per conditioning set S: pair counts [B, K, K, T] by (group of model 1, of model 2, mask t),
    and per-group sums s = sum c, q = sum c^2 ([B, K]). Groups absent from the zoo may appear
    with zero counts; they add nothing to any score."""
    dims = [int(grid.codes[a].max()) + 1 for a in grid.axes]
    V = math.prod(dims)
    if V * V * n_masks <= 4 * _BLOCK and V <= 4 * len(mu):
        cell = np.ravel_multi_index([grid.codes[a] for a in grid.axes], dims)
        sizes = np.bincount(cell)
        if (sizes > 0).sum() * sizes.max() <= 2 * len(mu):  # little padding needed
            return _set_tables_dense(mu, g, c, grid, sets, mask_factory, n_masks, dims, cell)
    groupings = [grid.group_ids(s) for s in sets]
    counts = _tables_by_group(c, mask_factory(mu, g), n_masks, groupings)
    return [(t, *_group_sums(c, ids, K)) for t, (ids, K) in zip(counts, groupings)]


def _exact_dtype(c: np.ndarray) -> type:
    """float32 when integer counts keep every partial pair sum below 2^24 (exact), else float64."""
    return np.float32 if np.all(c == np.round(c)) and c.sum(1).max() ** 2 < 2 ** 24 else np.float64


def _cell_slots(cell: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Lay the models out as P present cells x m slots: the cells, slot -> model (-1 if empty), m."""
    present, point, count = np.unique(cell, return_inverse=True, return_counts=True)
    m = int(count.max())
    order = np.argsort(point, kind="stable")
    slot = np.full((len(present), m), -1)
    slot[point[order], np.arange(len(cell)) - np.r_[0, np.cumsum(count)][point[order]]] = order
    return present, slot.ravel(), m


def _cell_pair_counts(cb: np.ndarray, masks_for: MaskFn, blocks: list[slice], cached: list | None,
                      live: list[int], P: int, m: int) -> np.ndarray:
    """cnt[p, q, u, b] = sum over slots i of cell p, j of cell q of c_ib c_jb M_live[u][i, j]."""
    nb = cb.shape[1]
    cnt = np.zeros((P, P, len(live), nb), cb.dtype)
    for cells in blocks:
        rows = slice(cells.start * m, cells.stop * m)
        masks = cached if cached is not None else masks_for(rows)
        for u, t in enumerate(live):
            if masks[t] is not None:
                # z[r, q] = sum over the slots j of cell q of M[r, j] c_j: one matrix product per cell (BLAS)
                mq = masks[t].astype(cb.dtype, copy=False).reshape(-1, P, m).transpose(1, 0, 2)  # [P, r, m]
                z = np.matmul(mq, cb.reshape(P, m, nb)).transpose(1, 0, 2)  # [r, P, nb]
                cnt[cells, :, u] = (cb[rows, None] * z).reshape(-1, m, P, nb).sum(1)
    return cnt


def _set_tables_dense(mu: np.ndarray, g: np.ndarray, c: np.ndarray, grid: _Grid, sets: list[tuple],
                      mask_factory: Callable[[np.ndarray, np.ndarray], MaskFn], n_masks: int,
                      dims: list[int], cell: np.ndarray) -> _Tables:
    """_set_tables for grids that fit a dense product space of axis values (any full factorial).

    Counts are built once per pair of cells (n^2 B work); each S is then a sum over the other
    axes of that [cells x cells] table. Empty slots get weight 0; resamples are the last axis.
    """
    A, V, B = len(dims), math.prod(dims), len(c)
    present, slot, m = _cell_slots(cell)
    P, idx = len(present), np.maximum(slot, 0)
    dtype = _exact_dtype(c)
    cs = np.where(slot[:, None] >= 0, c[:, idx].T, 0).astype(dtype)  # [P m, B]
    masks_for = mask_factory(mu[idx], g[idx])
    per_block = min(P, max(1, _BLOCK // (P * m * m)))
    blocks = [slice(p0, min(P, p0 + per_block)) for p0 in range(0, P, per_block)]
    cached = masks_for(slice(0, P * m)) if len(blocks) == 1 else None
    live = [t for t in range(n_masks) if cached is None or cached[t] is not None]
    keep = [[grid.axes.index(a) for a in s] for s in sets]
    sizes = [math.prod(dims[d] for d in k) for k in keep]
    out = [(np.zeros((B, K, K, n_masks)), np.zeros((B, K)), np.zeros((B, K))) for K in sizes]
    step = max(1, _BLOCK // max(per_block * m * P * m, V * V * len(live)))
    # each present cell's group under each S: the sums over the other axes are products with a 0/1 matrix [K, P]
    where = np.unravel_index(present, dims)
    onehots = []
    for k, K in zip(keep, sizes):
        group = np.ravel_multi_index([where[d] for d in k], [dims[d] for d in k]) if k else np.zeros(P, np.intp)
        onehots.append((np.arange(K)[:, None] == group[None, :]).astype(dtype))
    stacked, offsets = np.concatenate(onehots), np.cumsum([0, *sizes])  # every S's first side in one product
    for b0 in range(0, B, step):
        cb = cs[:, b0:b0 + step]
        nb = cb.shape[1]
        cnt = _cell_pair_counts(cb, masks_for, blocks, cached, live, P, m).reshape(P, P * len(live) * nb)
        sv, qv = np.zeros((V, nb)), np.zeros((V, nb))
        sv[present] = cb.reshape(P, m, nb).sum(1)
        qv[present] = (cb.astype(float) ** 2).reshape(P, m, nb).sum(1)
        first = stacked @ cnt  # [sum of K, P L nb]
        for k, K, onehot, o, (o_t, o_s, o_q) in zip(keep, sizes, onehots, offsets, out):
            drop = tuple(d for d in range(A) if d not in k)
            # integer counts below 2^24 (or float64): every order of summation gives the same numbers
            marg = np.matmul(onehot, first[o:o + K].reshape(K, P, -1)).reshape(K, K, len(live), nb)
            o_t[b0:b0 + nb][..., live] = marg.transpose(3, 0, 1, 2)
            o_s[b0:b0 + nb] = sv.reshape(*dims, nb).sum(drop).reshape(K, nb).T
            o_q[b0:b0 + nb] = qv.reshape(*dims, nb).sum(drop).reshape(K, nb).T
    return out


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


def _cmi_masks(mu: np.ndarray, g: np.ndarray) -> MaskFn:
    """Pair masks for (V_mu, V_g) = (+,+), (+,-), (+,0), (0,+); the others follow by symmetry."""
    def masks(rows: slice) -> list[np.ndarray | None]:
        dm, dg = _signs(mu, rows), _signs(g, rows)
        out = [(dm > 0) & (dg > 0), (dm > 0) & (dg < 0), (dm > 0) & (dg == 0), (dm == 0) & (dg > 0)]
        return [m if m.any() else None for m in out]
    return masks


def _cmi_table(part: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Full [B, K, K, 3 (V_mu: -,0,+), 3 (V_g)] counts of ordered pairs i != j from the 4 computed classes.

    Swapping the pair maps U = (k, l) to (l, k) and (V_mu, V_g) to (-V_mu, -V_g); (0, 0) is the rest.
    """
    B, K = s.shape
    t = np.zeros((B, K, K, 3, 3))
    sw = part.transpose(0, 2, 1, 3)
    for u, (a, b) in enumerate([(2, 2), (2, 0), (2, 1), (1, 2)]):
        t[..., a, b], t[..., 2 - a, 2 - b] = part[..., u], sw[..., u]
    total = s[:, :, None] * s[:, None, :] - np.einsum("bk,kl->bkl", q, np.eye(K))
    t[..., 1, 1] = np.maximum(total - t.sum((3, 4)), 0.0)
    return t


def _cmi_ratio(t: np.ndarray) -> np.ndarray:
    """I(V_mu; V_g | U) / H(V_g | U) from counts [B, U, 3, 3], p(U)-weighted; NaN where H = 0."""
    nu = t.sum((2, 3))[:, :, None, None]
    na = t.sum(3, keepdims=True)
    nb = t.sum(2, keepdims=True)
    mi = _plogq(t, t * nu / np.where(na * nb > 0, na * nb, 1.0)).sum((1, 2, 3))
    h = -_plogq(nb, nb / np.where(nu > 0, nu, 1.0)).sum((1, 2, 3))
    return np.where(h > 0, np.maximum(mi, 0.0) / np.where(h > 0, h, 1.0), np.nan)


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
    values = {}
    for s, (part, gs, gq) in zip(sets, _set_tables(mu, g, c, grid, sets, _cmi_masks, 4)):
        K = gs.shape[1]
        values[s] = _cmi_ratio(_cmi_table(part, gs, gq).reshape(len(c), K * K, 3, 3))
    k = _nanmin_rows(np.stack(list(values.values()), 1))
    sign = np.sign(_tau(mu, g, c))
    return _out(k, batched), {s: _out(v, batched) for s, v in values.items()}, _out(sign, batched)


# ---------------------------------------------------------------- PGDL scorer


def _pgdl_masks(mu: np.ndarray, g: np.ndarray) -> MaskFn:
    """Pair masks for (gap_m > gap_m', mu_m > mu_m') = (1,1), (1,0), (0,1); strict, so ties are 0."""
    def masks(rows: slice) -> list[np.ndarray | None]:
        pg, pm = _signs(g, rows) > 0, _signs(mu, rows) > 0
        out = [pg & pm, pg & ~pm, ~pg & pm]
        return [m if m.any() else None for m in out]
    return masks


def _pgdl_ratio(t: np.ndarray) -> np.ndarray:
    """sum_k MI_k / sum_k H_k (= mean/mean), bits, over slices [B, U, 2 (gap), 2 (mu)]; empty ones skipped."""
    tot = t.sum((2, 3), keepdims=True)
    p = t / np.where(tot > 0, tot, 1.0)
    pa, pb = p.sum(3, keepdims=True), p.sum(2, keepdims=True)
    mi = _plogq(p, p / np.where(pa * pb > 0, pa * pb, 1.0)).sum((1, 2, 3)) / np.log(2)
    h = -(pa * np.log2(pa + _PGDL_EPS)).sum((1, 2, 3))
    return np.where(h > 0, mi / np.where(h > 0, h, 1.0), np.nan)


def pgdl_cmi_by_pair(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
                     weights: ArrayLike | None = None) -> dict[tuple, Score]:
    """{(h1, h2): mean_k MI_k / mean_k H_k}, the per-pair values behind pgdl_cmi (see there)."""
    mu, g, c, batched = _prepare(mu, g, weights)
    values = _pgdl_pairs(mu, g, c, _grid(hp, len(mu), replicate, min_axes=2))
    return {p: _out(v, batched) for p, v in values.items()}


def _pgdl_pairs(mu: np.ndarray, g: np.ndarray, c: np.ndarray, grid: _Grid) -> dict[tuple, np.ndarray]:
    """The PGDL ratio ([B]) for every unordered pair of varied axes."""
    pairs = list(itertools.combinations(grid.axes, 2))
    values = {}
    for pair, (part, s, _) in zip(pairs, _set_tables(mu, g, c, grid, pairs, _pgdl_masks, 3)):
        values[pair] = _pgdl_ratio(_pgdl_table(part, s))
    return values


def _pgdl_table(part: np.ndarray, s: np.ndarray) -> np.ndarray:
    """[B, K K, 2 (gap), 2 (mu)] counts of all ordered pairs from the three classes [B, K, K, 3] and group sums s."""
    K = s.shape[1]
    t = np.zeros((len(part), K, K, 2, 2))
    t[..., 1, 1], t[..., 1, 0], t[..., 0, 1] = part[..., 0], part[..., 1], part[..., 2]
    t[..., 0, 0] = np.maximum(s[:, :, None] * s[:, None, :] - part.sum(3), 0.0)  # self pairs land here
    return t.reshape(len(part), K * K, 2, 2)


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


def _pgdl_from_cmi(part: np.ndarray) -> np.ndarray:
    """PGDL's pair classes (gap+ mu+, gap+ mu<=, gap<= mu+) from CMI's four on the same cells: (mu-, gap+) is
    (mu+, gap-) with the pair swapped, so the counts are sums of CMI's (exact: integer counts)."""
    sw = part.transpose(0, 2, 1, 3)
    return np.stack([part[..., 0], sw[..., 1] + part[..., 3], part[..., 1] + part[..., 2]], -1)


def grid_scores(mu: ArrayLike, g: ArrayLike, hp: pd.DataFrame, replicate: Hashable | None = "seed",
                weights: ArrayLike | None = None) -> tuple[Score, Score, Score | None]:
    """conditional_mi (|S| <= 2: K and the sign) and pgdl_cmi from one count of the model pairs per conditioning
    set, the same numbers as the two functions; pgdl None where the grid has fewer than two varied axes."""
    mu, g, c, batched = _prepare(mu, g, weights)
    grid = _grid(hp, len(mu), replicate)
    sets = [s for k in range(min(2, len(grid.axes)) + 1) for s in itertools.combinations(grid.axes, k)]
    values, pairs = [], []
    for s, (part, gs, gq) in zip(sets, _set_tables(mu, g, c, grid, sets, _cmi_masks, 4)):
        K = gs.shape[1]
        values.append(_cmi_ratio(_cmi_table(part, gs, gq).reshape(len(c), K * K, 3, 3)))
        if len(s) == 2:
            pairs.append(_pgdl_ratio(_pgdl_table(_pgdl_from_cmi(part), gs)))
    k = _nanmin_rows(np.stack(values, 1))
    pgdl = _out(_nanmin_rows(np.stack(pairs, 1)), batched) if pairs else None
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
