"""Rank scores: hand-computed values, slow loop references, and the vectorised bootstrap path."""
from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from genbench.scoring import rank as R

LN2 = math.log(2)


def H(*p: float) -> float:
    """Entropy in nats of the probabilities p."""
    return -sum(x * math.log(x) for x in p if x > 0)


# ---------------------------------------------------------------- slow references (plain loops)


def tau_ref(mu, g, origin=None) -> float:
    """Jiang et al.'s tau over ordered pairs; pairs of copies of one model (same origin) skipped."""
    origin = range(len(mu)) if origin is None else origin
    pairs = [(i, j) for i in range(len(mu)) for j in range(len(mu)) if origin[i] != origin[j]]
    return sum(np.sign(mu[i] - mu[j]) * np.sign(g[i] - g[j]) for i, j in pairs) / len(pairs)


def psi_ref(mu, g, hp, replicate="seed", origin=None) -> tuple[float, dict]:
    hp = hp.map(repr)  # None, NaN and bools as plain, comparable keys
    origin = np.arange(len(mu)) if origin is None else np.asarray(origin)
    axes = [a for a in hp.columns if a != replicate and hp[a].nunique(dropna=False) > 1]
    per = {}
    for a in axes:
        others = [c for c in hp.columns if c != a]
        taus = []
        for idx in hp.groupby(others, dropna=False, sort=False).indices.values():
            if len(set(origin[idx])) >= 2:
                taus.append(tau_ref(mu[idx], g[idx], origin[idx]))
        per[a] = float(np.mean(taus)) if taus else float("nan")
    return float(np.nanmean(list(per.values()))), per


def cmi_set_ref(mu, g, keys, origin=None) -> float:
    """I(V_mu; V_g | U) / H(V_g | U) by counting ordered pairs; keys[i] = model i's values of S."""
    origin = range(len(mu)) if origin is None else origin
    rows = [((keys[i], keys[j]), np.sign(mu[i] - mu[j]), np.sign(g[i] - g[j]))
            for i in range(len(mu)) for j in range(len(mu)) if origin[i] != origin[j]]
    n = len(rows)
    by_u = defaultdict(list)
    for u, a, b in rows:
        by_u[u].append((a, b))
    mi = h = 0.0
    for vals in by_u.values():
        pu, m = len(vals) / n, len(vals)
        joint, pa, pb = Counter(vals), Counter(a for a, _ in vals), Counter(b for _, b in vals)
        mi += pu * sum(k / m * math.log((k / m) / (pa[a] / m * pb[b] / m)) for (a, b), k in joint.items())
        h += pu * H(*(k / m for k in pb.values()))
    return mi / h if h > 1e-12 else float("nan")


def cmi_ref(mu, g, hp, max_set=2, replicate="seed", origin=None) -> tuple[float, dict]:
    hp = hp.map(repr)
    axes = [a for a in hp.columns if a != replicate and hp[a].nunique(dropna=False) > 1]
    vals = {}
    for k in range(max_set + 1):
        for s in itertools.combinations(axes, k):
            keys = list(zip(*(hp[a].tolist() for a in s))) if s else [()] * len(mu)
            vals[s] = cmi_set_ref(mu, g, keys, origin)
    return float(np.nanmin(list(vals.values()))), vals


def pgdl_ref(mu, g, hp, replicate="seed") -> float:
    """The PGDL scorer's loops: every ordered pair (m, m'), self pairs included, strict signs."""
    hp = hp.map(repr)
    hps = [a for a in hp.columns if a != replicate and hp[a].nunique(dropna=False) > 1]
    best = math.inf
    for h1, h2 in itertools.permutations(hps, 2):
        v1, v2 = hp[h1].unique().tolist(), hp[h2].unique().tolist()
        slices = {k: np.zeros((2, 2)) for k in itertools.product(v1, v1, v2, v2)}
        for m in range(len(mu)):
            for mp in range(len(mu)):
                k = (hp[h1].iloc[m], hp[h1].iloc[mp], hp[h2].iloc[m], hp[h2].iloc[mp])
                slices[k][int(g[m] > g[mp]), int(mu[m] > mu[mp])] += 1
        mis, hs = [], []
        for t in slices.values():
            p = t / t.sum()
            pa, pb = p.sum(1), p.sum(0)
            mis.append(sum(p[i, j] * math.log2(p[i, j] / (pa[i] * pb[j]))
                           for i in range(2) for j in range(2) if p[i, j] > 0))
            hs.append(-sum(x * math.log2(x + 1e-12) for x in pa))
        best = min(best, np.mean(mis) / np.mean(hs))
    return best


def rse_envs(mu, g, hp, n_test, replicate="seed") -> dict[tuple, tuple[float, float]]:
    """{(grid point, grid point): (loss, ESS)} of every environment, by loops over grid points and replicate pairs."""
    hp = hp.map(repr)
    axes = [a for a in hp.columns if a != replicate and hp[a].nunique(dropna=False) > 1]
    points = defaultdict(list)
    for i, row in enumerate(hp[axes].itertuples(index=False)):
        points[tuple(row)].append(i)
    envs = {}
    for p, q in itertools.combinations(points, 2):
        if sum(x != y for x, y in zip(p, q)) != 1:
            continue
        ws, ls = [], []
        for i in points[p]:
            for j in points[q]:
                w = max(0.0, 1 - 2 * math.exp(-2 * n_test * (abs(g[i] - g[j]) / 2) ** 2)) ** 2
                ws.append(w - 0.5 if w > 0.5 else 0.0)
                ls.append((1 - np.sign(mu[i] - mu[j]) * np.sign(g[i] - g[j])) / 2)
        sw, sw2 = sum(ws), sum(w * w for w in ws)
        if sw > 0:
            envs[tuple(sorted((p, q)))] = (sum(w * l for w, l in zip(ws, ls)) / sw, sw * sw / sw2)
    return envs


def rse_ref(mu, g, hp, n_test, replicate="seed", min_ess=12, chosen_by=None) -> list[float]:
    """Sorted losses of the kept environments; `chosen_by` (mu, g, hp of the models once): keep the environments
    whose ESS passes there rather than on (g, hp), as a resample does."""
    envs = rse_envs(mu, g, hp, n_test, replicate)
    sel = envs if chosen_by is None else rse_envs(*chosen_by, n_test, replicate)
    close = 1e-8 + 1e-5 * min_ess  # numpy's isclose, as in the paper's code
    return sorted(loss for key, (loss, _) in envs.items() if key in sel and sel[key][1] >= min_ess - close)


# ---------------------------------------------------------------- fixtures


def make_grid(seed: int = 0, noise: float = 0.01) -> tuple[pd.DataFrame, np.ndarray]:
    """3 axes (3 x 3 x 2 values of mixed types) x 2 seeds = 36 models; gap from the axes plus noise."""
    rows = list(itertools.product([1.0, 2.0, 4.0], [0.0, 0.25, 0.5], [None, "flip"], [0, 1]))
    hp = pd.DataFrame(rows, columns=["width", "dropout", "aug", "seed"])
    rng = np.random.default_rng(seed)
    g = (0.02 * np.log2(hp["width"]) + 0.1 * hp["dropout"] + 0.03 * hp["aug"].isna()).to_numpy()
    return hp, g + 0.1 + noise * rng.normal(size=len(hp))


def messy_grid(seed: int = 1) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """An incomplete grid with unequal cells, ties in mu and g, bools and None: the hard cases."""
    rng = np.random.default_rng(seed)
    rows = list(itertools.product(["a", "b", "c"], [True, False], [None, 0.1], [0, 1, 2]))
    keep = (rng.random(len(rows)) < 0.7) & [r[:3] != ("c", False, None) for r in rows]  # one empty cell
    hp = pd.DataFrame([r for r, k in zip(rows, keep) if k], columns=["opt", "bn", "noise", "seed"])
    n = len(hp)
    g = np.round(rng.normal(0.1, 0.05, n), 2)      # rounding makes ties
    mu = np.round(g + rng.normal(0, 0.05, n), 2)
    return hp, mu, g


# ---------------------------------------------------------------- Kendall tau


def test_tau_equals_scipy_without_ties():
    rng = np.random.default_rng(0)
    mu, g = rng.normal(size=40), rng.normal(size=40)
    assert R.kendall_tau(mu, g) == pytest.approx(kendalltau(mu, g).statistic, abs=1e-12)


def test_tau_hand_value_with_ties():
    mu, g = np.array([1.0, 1.0, 3.0, 2.0]), np.array([1.0, 2.0, 3.0, 1.0])
    # pairs i<j, sign(dmu) sign(dg): (0,1) mu tie 0; (0,2) -,- +1; (0,3) -, g tie 0;
    # (1,2) -,- +1; (1,3) -,+ -1; (2,3) +,+ +1. Ordered pairs count each twice, n(n-1) = 12.
    assert R.kendall_tau(mu, g) == pytest.approx(2 * (1 + 1 - 1 + 1) / 12)


def test_tau_weights_ones_and_duplicates():
    rng = np.random.default_rng(1)
    mu, g = np.round(rng.normal(size=12), 1), np.round(rng.normal(size=12), 1)
    assert R.kendall_tau(mu, g, np.ones(12)) == pytest.approx(R.kendall_tau(mu, g), abs=1e-12)
    c = rng.integers(0, 4, size=12)
    origin = np.repeat(np.arange(12), c)
    # c_i c_j pair counting == the duplicated sample without pairs of copies of one model ...
    assert R.kendall_tau(mu, g, c) == pytest.approx(tau_ref(mu[origin], g[origin], origin), abs=1e-12)
    # ... == the plain duplicated-sample tau rescaled: copies pairs add 0 to the sum, N(N-1) to the count
    N = c.sum()
    plain = tau_ref(mu[origin], g[origin])
    assert R.kendall_tau(mu, g, c) == pytest.approx(plain * N * (N - 1) / (N * N - (c * c).sum()), abs=1e-12)


# ---------------------------------------------------------------- granulated Psi


def psi_hand_grid():
    hp = pd.DataFrame({"a": [0, 1, 2, 0, 1, 2], "b": ["x", "x", "x", "y", "y", "y"]})
    g = np.array([0.10, 0.20, 0.30, 0.15, 0.25, 0.05])
    mu = np.array([1.0, 3.0, 2.0, 5.0, 5.0, 4.0])
    return hp, mu, g


def test_psi_hand_value():
    hp, mu, g = psi_hand_grid()
    # axis a (groups b=x, b=y): b=x pairs (0,1) +1, (0,2) +1, (1,2) mu-,g+ -1 -> tau 1/3;
    # b=y: (3,4) mu tie 0, (3,5) -,- +1, (4,5) -,- +1 -> tau 2/3; psi_a = 1/2
    # axis b (groups a=0,1,2): (0,3) +1, (1,4) +1, (2,5) mu+,g- -1 -> psi_b = 1/3
    psi, per = R.granulated_psi(mu, g, hp, replicate=None)
    assert per["a"] == pytest.approx(0.5) and per["b"] == pytest.approx(1 / 3)
    assert psi == pytest.approx(5 / 12)


def test_psi_seed_is_part_of_the_group():
    hp, mu, g = psi_hand_grid()
    # the same six models twice, as two seeds, the second seed with a reversed measure
    hp2 = pd.concat([hp.assign(seed=0), hp.assign(seed=1)], ignore_index=True)
    psi, per = R.granulated_psi(np.r_[mu, -mu], np.r_[g, g], hp2)
    assert set(per) == {"a", "b"}                       # seed is never an axis
    assert psi == pytest.approx(0.0) and per["a"] == pytest.approx(0.0)


# ---------------------------------------------------------------- conditional mutual information


def cmi_hand_grid():
    hp = pd.DataFrame({"a": [0, 1, 0, 1], "b": [0, 0, 1, 1]})
    return hp, np.array([1.0, 3.0, 4.0, 2.0]), np.array([0.1, 0.2, 0.3, 0.4])


def test_cmi_hand_value():
    hp, mu, g = cmi_hand_grid()
    # pairs i<j as (V_mu, V_g): (0,1) ++, (0,2) ++, (0,3) ++, (1,2) ++, (1,3) -+, (2,3) -+;
    # the 12 ordered pairs add the reversed signs.
    # S = {}: p(++) = p(--) = 4/12, p(-+) = p(+-) = 2/12, marginals 1/2 -> H = ln 2
    i_empty = 2 * (4 / 12) * math.log((4 / 12) / 0.25) + 2 * (2 / 12) * math.log((2 / 12) / 0.25)
    # S = {a}: U = (0,0): {++, --}, U = (1,1): {-+, +-}: I = H = ln 2, p(U) = 2/12 each;
    # U = (0,1): pairs (0,1) ++, (0,3) ++, (2,1) --, (2,3) -+: p(V_g=+) = 3/4, p(V_mu=+) = 1/2, p(U) = 4/12;
    # U = (1,0) is its mirror image
    i01 = 0.5 * math.log(0.5 / (0.5 * 0.75)) + 0.25 * math.log(0.25 / (0.5 * 0.25)) \
        + 0.25 * math.log(0.25 / (0.5 * 0.75))
    i_a = 4 / 12 * LN2 + 8 / 12 * i01
    h_a = 4 / 12 * LN2 + 8 / 12 * H(0.75, 0.25)
    # S = {b}: U = (0,0), (1,1) as above (I = H = ln 2, p = 2/12 each); U = (0,1), (1,0): V_g constant
    # -> H = 0 there, so I/H = (4/12 ln 2) / (4/12 ln 2) = 1
    # S = {a, b}: one pair per U -> H(V_g | U) = 0 -> NaN, left out of the min
    k, vals, sign = R.conditional_mi(mu, g, hp, replicate=None)
    assert vals[()] == pytest.approx(i_empty / LN2, rel=1e-12)
    assert vals[()] == pytest.approx(5 / 3 - math.log2(3), rel=1e-12)
    assert vals[("a",)] == pytest.approx(i_a / h_a, rel=1e-12)
    assert vals[("b",)] == pytest.approx(1.0, rel=1e-12)
    assert math.isnan(vals[("a", "b")])
    assert k == pytest.approx(5 / 3 - math.log2(3), rel=1e-12)
    assert sign == 1.0  # tau = (4 - 2) / 6 > 0
    k1, vals1, _ = R.conditional_mi(mu, g, hp, max_set=1, replicate=None)
    assert set(vals1) == {(), ("a",), ("b",)} and k1 == pytest.approx(k)


# ---------------------------------------------------------------- PGDL scorer


def test_pgdl_hand_value_with_self_pairs():
    # 2 x 2 grid x 2 seeds; cell gaps far apart, so off-diagonal slices have a constant gap sign
    # (MI = 0, H = -log2(1 + 1e-12) from the scorer's epsilon).
    # Diagonal slice of a cell: pairs (s0,s0), (s1,s1) [self: (-gap, -mu)], (s0,s1), (s1,s0).
    hp = pd.DataFrame({"a": [0, 0, 1, 1, 0, 0, 1, 1], "b": [0, 0, 0, 0, 1, 1, 1, 1], "seed": [0, 1] * 4})
    g = np.array([0.10, 0.11, 0.20, 0.21, 0.30, 0.31, 0.40, 0.41])
    mu = np.array([5.0, 6.0, 1.0, 2.0, 4.0, 3.0, 7.0, 7.0])
    # cells (0,0), (1,0): concordant -> table (+,+) 1, (-,-) 3: MI = H = H2(1/4)
    # cell (0,1): discordant -> (+,-) 1, (-,+) 1, (-,-) 2: MI = 1/2 log2(4/3) + 1/2 log2(8/9)
    # cell (1,1): mu tie -> strict "-" for both orders: (+,-) 1, (-,-) 3: MI = 0, H = H2(1/4)
    def h_eps(*p):
        return -sum(x * math.log2(x + 1e-12) for x in p)

    mi = 2 * h_eps(0.25, 0.75) + 0.5 * math.log2(4 / 3) + 0.5 * math.log2(8 / 9)
    h = 4 * h_eps(0.25, 0.75) + 12 * h_eps(1.0, 0.0)
    score, per = R.pgdl_cmi(mu, g, hp), R.pgdl_cmi_by_pair(mu, g, hp)
    assert list(per) == [("a", "b")] and per[("a", "b")] == score
    assert score == pytest.approx((mi / 16) / (h / 16), rel=1e-9)
    assert score == pytest.approx(pgdl_ref(mu, g, hp), rel=1e-9)
    assert R.pgdl_cmi(np.arange(8.0), g, hp) == pytest.approx(1.0)  # ranks exactly like g


def test_pgdl_self_pairs_break_sign_blindness():
    # -mu relabels every pair of distinct models, but self pairs stay (-, -): slices whose two
    # models share the (h1, h2) cell are not relabelled, so -gap does not score 1 as gap does,
    # even with one model per cell (PGDL's own grids) once there is a third axis.
    hp, g = make_grid()
    one = (hp["seed"] == 0).to_numpy()
    assert R.pgdl_cmi(g[one], g[one], hp[one]) == pytest.approx(1.0)
    neg = R.pgdl_cmi(-g[one], g[one], hp[one])
    assert neg < 0.9 and neg == pytest.approx(pgdl_ref(-g[one], g[one], hp[one]), rel=1e-9)
    assert R.pgdl_cmi(-g, g, hp) < 0.9
    assert R.conditional_mi(-g[one], g[one], hp[one])[0] == pytest.approx(1.0)  # Fantastic's K is not fooled


# ---------------------------------------------------------------- robust sign-error


def test_robust_sign_error_hand_value():
    # 2 x 2 grid x 2 seeds, n_test = 100, min_ess = 1.5
    hp = pd.DataFrame({"a": [0, 0, 1, 1, 0, 0, 1, 1], "b": [0, 0, 0, 0, 1, 1, 1, 1], "seed": [0, 1] * 4})
    g = np.array([0.10, 0.12, 0.40, 0.30, 0.15, 0.14, 0.45, 0.60])
    mu = np.array([1.0, 1.1, 2.0, 0.5, 1.2, 1.3, 3.0, 2.5])

    def w(dg):  # Hoeffding weight, then (w - 0.5)_+
        v = max(0.0, 1 - 2 * math.exp(-2 * 100 * (dg / 2) ** 2)) ** 2
        return max(v - 0.5, 0.0)

    def ess(ws):
        return sum(ws) ** 2 / sum(x * x for x in ws) if sum(ws) > 0 else 0.0

    # env a@b=0: (00s0,10s0) dg .30 l 0; (00s0,10s1) dg .20 l 1;
    #            (00s1,10s0) dg .28 l 0; (00s1,10s1) dg .18 l 1
    wa0 = [w(0.30), w(0.20), w(0.28), w(0.18)]
    assert wa0[3] == 0.0 and wa0[1] == pytest.approx((1 - 2 * math.exp(-2)) ** 2 - 0.5)
    la0 = wa0[1] / sum(wa0)
    # env a@b=1: dg .30 .45 .31 .46, all concordant -> loss 0
    wa1 = [w(0.30), w(0.45), w(0.31), w(0.46)]
    # env b@a=0: dg .05 .04 .03 .02 -> all weights 0 -> ESS 0, dropped
    wb0 = [w(0.05), w(0.04), w(0.03), w(0.02)]
    # env b@a=1: dg .05 .20 .15 .30 -> ESS ~ 1.1 < 1.5, dropped
    wb1 = [w(0.05), w(0.20), w(0.15), w(0.30)]
    assert ess(wa0) >= 1.5 and ess(wa1) >= 1.5 and ess(wb0) == 0 and ess(wb1) < 1.5
    r = R.robust_sign_error(mu, g, hp, n_test=100, min_ess=1.5)
    assert r["environments"] == 2 and r["candidates"] == 4 and r["reason"] is None
    assert r["worst"] == pytest.approx(la0)
    assert r["mean"] == pytest.approx(la0 / 2)
    assert r["p90"] == pytest.approx(0.9 * la0)           # linear percentile of [0, la0]
    assert r["per_axis"]["a"]["worst"] == pytest.approx(la0)
    assert r["per_axis"]["b"]["environments"] == 0 and math.isnan(r["per_axis"]["b"]["worst"])
    assert sorted([0.0, la0]) == pytest.approx(rse_ref(mu, g, hp, 100, min_ess=1.5))
    # with the paper's min_ess = 12 nothing survives 4 pairs per environment
    r12 = R.robust_sign_error(mu, g, hp, n_test=100)
    assert math.isnan(r12["worst"]) and r12["environments"] == 0 and "min_ess" in r12["reason"]


def test_robust_sign_error_tie_counts_half():
    hp = pd.DataFrame({"a": [0, 1]})
    r = R.robust_sign_error(np.array([1.0, 1.0]), np.array([0.1, 0.9]), hp, n_test=1000, min_ess=1)
    assert r["worst"] == pytest.approx(0.5)


# ---------------------------------------------------------------- synthetic grid: perfect, reversed, random


def test_measure_equal_to_gap_scores_one():
    hp, g = make_grid()
    assert R.kendall_tau(g, g) == pytest.approx(1.0)
    assert R.granulated_psi(g, g, hp)[0] == pytest.approx(1.0)
    k, vals, sign = R.conditional_mi(g, g, hp)
    assert k == pytest.approx(1.0) and sign == 1.0
    assert all(math.isnan(v) or v == pytest.approx(1.0) for v in vals.values())
    assert R.pgdl_cmi(g, g, hp) == pytest.approx(1.0)
    assert R.robust_sign_error(g, g, hp, n_test=10_000, min_ess=1)["worst"] == 0.0


def test_negated_gap_is_sign_blind_for_cmi():
    hp, g = make_grid()
    assert R.kendall_tau(-g, g) == pytest.approx(-1.0)
    assert R.granulated_psi(-g, g, hp)[0] == pytest.approx(-1.0)
    k, _, sign = R.conditional_mi(-g, g, hp)
    assert k == pytest.approx(1.0) and sign == -1.0
    assert R.robust_sign_error(-g, g, hp, n_test=10_000, min_ess=1)["mean"] == 1.0


def test_random_measure_scores_near_zero():
    hp, g = make_grid()
    taus, psis, ks = [], [], []
    for seed in range(20):
        mu = np.random.default_rng(100 + seed).normal(size=len(g))
        taus.append(R.kendall_tau(mu, g))
        psis.append(R.granulated_psi(mu, g, hp)[0])
        ks.append(R.conditional_mi(mu, g, hp)[0])
    assert abs(np.mean(taus)) < 0.1 and abs(np.mean(psis)) < 0.1 and abs(np.mean(ks)) < 0.1


# ---------------------------------------------------------------- against the loop references


@pytest.mark.parametrize("seed", [1, 2])
def test_scores_match_loop_references_on_a_messy_grid(seed):
    hp, mu, g = messy_grid(seed)
    assert R.kendall_tau(mu, g) == pytest.approx(tau_ref(mu, g), abs=1e-12)
    psi, per = R.granulated_psi(mu, g, hp)
    psi_r, per_r = psi_ref(mu, g, hp)
    assert psi == pytest.approx(psi_r, abs=1e-12) and per == pytest.approx(per_r, abs=1e-12, nan_ok=True)
    k, vals, _ = R.conditional_mi(mu, g, hp)
    k_r, vals_r = cmi_ref(mu, g, hp)
    assert k == pytest.approx(k_r, abs=1e-12)
    assert np.allclose([vals[s] for s in vals_r], list(vals_r.values()), atol=1e-12, equal_nan=True)
    r = R.robust_sign_error(mu, g, hp, n_test=1000, min_ess=1.2)
    ref = rse_ref(mu, g, hp, 1000, min_ess=1.2)
    assert r["environments"] == len(ref) > 0
    assert r["worst"] == pytest.approx(max(ref)) and r["mean"] == pytest.approx(np.mean(ref))
    assert r["p90"] == pytest.approx(np.percentile(ref, 90))


def test_cmi_with_sets_of_three_matches_loop_reference():
    """max_set=3: the three-axis set is counted from the pairs, the two-axis sets are sums of its counts."""
    hp, mu, g = messy_grid(4)
    k, vals, _ = R.conditional_mi(mu, g, hp, max_set=3)
    k_r, vals_r = cmi_ref(mu, g, hp, max_set=3)
    assert len(vals) == len(vals_r) == 8 and k == pytest.approx(k_r, abs=1e-12)
    assert np.allclose([vals[s] for s in vals_r], list(vals_r.values()), atol=1e-12, equal_nan=True)
    c = np.random.default_rng(9).integers(0, 3, size=len(g))
    o = np.repeat(np.arange(len(g)), c)
    _, vals_w, _ = R.conditional_mi(mu, g, hp, max_set=3, weights=c)
    _, vals_d = cmi_ref(mu[o], g[o], hp.iloc[o].reset_index(drop=True), max_set=3, origin=o)
    assert np.allclose([vals_w[s] for s in vals_d], list(vals_d.values()), atol=1e-12, equal_nan=True)


def test_pgdl_matches_loop_reference_on_a_complete_grid():
    hp, g = make_grid(noise=0.02)
    mu = np.round(g + np.random.default_rng(3).normal(0, 0.02, len(g)), 2)  # with ties
    assert R.pgdl_cmi(mu, g, hp) == pytest.approx(pgdl_ref(mu, g, hp), rel=1e-9)


def test_integer_weights_equal_duplicated_data():
    """Multiplicities score as duplicated rows; for the sign-error, on the environments the rows once keep."""
    hp, mu, g = messy_grid(3)
    c = np.random.default_rng(4).integers(0, 3, size=len(g))
    o = np.repeat(np.arange(len(g)), c)  # duplicated sample; copies share the seed, so stay replicates
    hpd, mud, gd = hp.iloc[o].reset_index(drop=True), mu[o], g[o]
    assert R.granulated_psi(mu, g, hp, weights=c)[0] == pytest.approx(psi_ref(mud, gd, hpd, origin=o)[0])
    assert R.conditional_mi(mu, g, hp, weights=c)[0] == pytest.approx(cmi_ref(mud, gd, hpd, origin=o)[0])
    # the PGDL table takes all ordered pairs, so multiplicities are exactly duplicated rows
    hp2, g2 = make_grid()
    mu2 = np.round(g2, 2)
    c2 = np.random.default_rng(5).integers(1, 3, size=len(g2))
    o2 = np.repeat(np.arange(len(g2)), c2)
    assert R.pgdl_cmi(mu2, g2, hp2, weights=c2) == pytest.approx(
        R.pgdl_cmi(mu2[o2], g2[o2], hp2.iloc[o2].reset_index(drop=True)), rel=1e-12)
    # environments pair different grid points, so copies never pair either; the ESS filter is the unweighted one
    r = R.robust_sign_error(mu, g, hp, n_test=1000, min_ess=2, weights=c)
    ref = rse_ref(mud, gd, hpd, 1000, min_ess=2, chosen_by=(mu, g, hp))
    assert r["environments"] == len(ref) > 0 and r["mean"] == pytest.approx(np.mean(ref))
    assert r["worst"] == pytest.approx(max(ref)) and r["p90"] == pytest.approx(np.percentile(ref, 90))


def test_resamples_never_admit_an_environment_the_zoo_does_not():
    """Planted: an environment whose ESS fails with every model once (two pairs of weight 0.5 beside four of 0.05)
    but passes once the model behind the heavy pairs is left out (a resample with it at 0): re-selecting on the
    resample would admit the four light pairs, whose loss is 1."""
    hp = pd.DataFrame({"x": [0, 0, 0, 1, 1], "seed": [0, 1, 2, 0, 1]})
    g = np.array([0.9, 0.30, 0.30, 0.364, 0.364])
    mu = np.array([3.0, 2.0, 2.0, 1.0, 1.0])  # agrees with g on the heavy pairs (model 0) only
    n_test, min_ess = 1000, 3
    (loss, ess), = rse_envs(mu, g, hp, n_test).values()
    assert ess < min_ess and 0 < loss < 0.5
    (loss_left, ess_left), = rse_envs(mu[1:], g[1:], hp.iloc[1:].reset_index(drop=True), n_test).values()
    assert ess_left >= min_ess and loss_left == 1.0
    w = np.ones((2, 5))
    w[1, 0] = 0.0
    r = R.robust_sign_error(mu, g, hp, n_test=n_test, min_ess=min_ess, weights=w)
    assert np.isnan(r["worst"]).all() and (r["environments"] == 0).all()
    r = R.robust_sign_error(mu, g, hp, n_test=n_test, min_ess=2, weights=w)  # kept on the zoo: re-weighed
    assert r["worst"] == pytest.approx([loss, loss_left])


# ---------------------------------------------------------------- the vectorised bootstrap path


def _all_scores(mu, g, hp, weights=None):
    k, kv, sign = R.conditional_mi(mu, g, hp, weights=weights)
    p, pv = R.pgdl_cmi(mu, g, hp, weights=weights), R.pgdl_cmi_by_pair(mu, g, hp, weights=weights)
    psi, psiv = R.granulated_psi(mu, g, hp, weights=weights)
    rse = R.robust_sign_error(mu, g, hp, n_test=1000, min_ess=1.5, weights=weights)
    return {"tau": R.kendall_tau(mu, g, weights), "psi": psi, **{f"psi_{a}": v for a, v in psiv.items()},
            "k": k, "sign": sign, **{f"k{s}": v for s, v in kv.items()}, "pgdl": p,
            **{f"pgdl{s}": v for s, v in pv.items()},
            **{f"rse_{x}": rse[x] for x in ("worst", "p90", "mean", "environments")}}


def test_weights_of_ones_equal_unweighted():
    hp, mu, g = messy_grid(5)
    a, b = _all_scores(mu, g, hp), _all_scores(mu, g, hp, np.ones(len(g)))
    assert a.keys() == b.keys()
    assert np.allclose(list(a.values()), list(b.values()), atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("grid", ["complete", "messy"])
def test_batched_weights_equal_loop_over_rows(grid):
    if grid == "complete":
        hp, g = make_grid()
        mu = g + np.random.default_rng(6).normal(0, 0.02, len(g))
    else:
        hp, mu, g = messy_grid(6)
    n = len(g)
    w = np.random.default_rng(1).multinomial(n, np.full(n, 1.0 / n), size=5).astype(float)  # 5 resamples
    w[1] = np.random.default_rng(7).random(len(g))  # non-integer multiplicities take the float64 path
    batched = _all_scores(mu, g, hp, w)
    rows = [_all_scores(mu, g, hp, w[b]) for b in range(len(w))]
    for key, arr in batched.items():
        assert arr.shape == (5,)
        assert np.allclose(arr, [r[key] for r in rows], atol=1e-10, equal_nan=True), key


@pytest.mark.parametrize("block", [200, 40])
def test_blocked_and_general_paths_agree(monkeypatch, block):
    hp, mu, g = messy_grid(8)
    n = len(g)
    w = np.random.default_rng(2).multinomial(n, np.full(n, 1.0 / n), size=4)  # 4 bootstrap resamples (counts)
    want = _all_scores(mu, g, hp, w)
    monkeypatch.setattr(R, "_BLOCK", block)  # forces row blocks, resample chunks and the general path
    got = _all_scores(mu, g, hp, w)
    for key in want:
        assert np.allclose(got[key], want[key], atol=1e-10, equal_nan=True), key


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("call, match", [
    (lambda: R.kendall_tau([1, 2, 3], [1, 2]), "same length"),
    (lambda: R.kendall_tau([1], [1]), "at least 2 models"),
    (lambda: R.kendall_tau([1, np.nan, 3], [1, 2, 3]), "NaN"),
    (lambda: R.kendall_tau([1, 2, 3], [1, 2, np.inf]), "g has 1 NaN or infinite"),
    (lambda: R.kendall_tau([1, 2, 3], [1, 2, 3], weights=[1, 2]), "weights must have shape"),
    (lambda: R.kendall_tau([1, 2, 3], [1, 2, 3], weights=[1, -1, 2]), ">= 0"),
    (lambda: R.granulated_psi([1, 2], [1, 2], pd.DataFrame({"seed": [0, 1], "x": [1, 1]})), "varied axis"),
    (lambda: R.conditional_mi([1, 2], [1, 2], pd.DataFrame({"x": [1, 2, 3]})), "3 rows but there are 2"),
    (lambda: R.conditional_mi([1, 2], [1, 2], pd.DataFrame({"x": [1, 2]}), max_set=-1), "max_set"),
    (lambda: R.pgdl_cmi([1, 2], [1, 2], pd.DataFrame({"x": [1, 2]})), "at least 2 varied"),
    (lambda: R.robust_sign_error([1, 2], [1, 2], pd.DataFrame({"x": [1, 2]}), n_test=0), "n_test"),
])
def test_bad_input_raises_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_no_environment_gives_nan_and_reason():
    hp = pd.DataFrame({"a": [0, 1], "b": [0, 1]})  # the two grid points differ in two axes
    r = R.robust_sign_error([1.0, 2.0], [0.1, 0.2], hp, n_test=100, min_ess=1)
    assert math.isnan(r["worst"]) and r["candidates"] == 0 and "no environment" in r["reason"]
