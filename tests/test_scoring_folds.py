"""The all-folds-at-once fits (scoring/folds.py) against scikit-learn fitted fold by fold: PhiRegression (free, held
to a direction, "select", signatures with a collinear column), plain RidgeCV (X'X and X X' decompositions), RecipePlus
with missing values; the folds are KFold's; CMI and PGDL from one pair count equal the two functions; and gb.score
gives the same numbers by either path, measures side by side or one by one, in the table's order."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, RidgeCV
from sklearn.model_selection import KFold

import genbench as gb
from genbench.scoring import rank, regression, scores
from genbench.scoring.folds import fold_groups
from genbench.scoring.recipe import ALPHAS, RecipePlus, with_recipe
from genbench.scoring.regression import PhiRegression, cross_validate

from planted import GRID, gap_of, planted_gap, values_of, write_zoo


def reference(estimator, x, y, k=10, repeats=10):
    """The same cross-validation fold by fold: a clone of the estimator fitted with scikit-learn on each fold."""
    saved = regression.BATCHED
    regression.BATCHED = False
    try:
        return cross_validate(estimator, x, y, k=k, repeats=repeats)
    finally:
        regression.BATCHED = saved


def assert_same(a, b, rtol=1e-9):
    np.testing.assert_allclose(a.heldout, b.heldout, rtol=rtol, atol=1e-13)
    np.testing.assert_allclose(a.r2, b.r2, rtol=rtol)
    np.testing.assert_allclose(a.mse, b.mse, rtol=rtol)
    assert a.fold_mean_r2 == pytest.approx(b.fold_mean_r2, rel=rtol)
    assert (a.chosen, a.flat, a.folds) == (b.chosen, b.flat, b.folds)


def data(n=97, p=1, seed=0, slope=1.0):
    rng = np.random.default_rng(seed)
    x = np.exp(rng.normal(size=(n, p)))
    y = np.log(x) @ np.full(p, slope) + 0.8 * rng.normal(size=n)
    return x, y


def test_folds_are_kfolds_splits_grouped_by_size():
    groups = fold_groups(97, 10, 3)
    seen = {(int(r), tuple(te)) for g in groups for r, te in zip(g.shuffle, g.test)}
    want = {(r, tuple(te)) for r in range(3) for _, te in KFold(10, shuffle=True, random_state=r).split(range(97))}
    assert seen == want and sum(len(g.shuffle) for g in groups) == 30
    for g in groups:  # train and test partition the rows in every fold
        assert all(sorted([*tr, *te]) == list(range(97)) for tr, te in zip(g.train, g.test))


@pytest.mark.parametrize("transform", ["linear", "log", "select"])
@pytest.mark.parametrize("direction", [None, 1.0, -1.0])
def test_phi_regression_on_all_folds_is_scikit_learns_fit_per_fold(transform, direction):
    x, y = data(slope=0.15, seed=3)  # a weak slope: some held folds run the other way and predict their mean
    fast = cross_validate(PhiRegression(transform, direction=direction), x, y)
    slow = reference(PhiRegression(transform, direction=direction), x, y)
    assert_same(fast, slow)
    if direction == -1.0:  # the claim runs against the data: every fold flat, the training mean predicted
        assert fast.flat == fast.folds == 100
    if transform == "select":
        assert sum(fast.chosen.values()) == 100


def test_a_held_fit_is_scipys_nnls_and_flat_folds_predict_the_training_mean():
    x, y = data(slope=0.02, seed=11)
    fast = cross_validate(PhiRegression("log", direction=1.0), x, y, k=5, repeats=2)
    assert 0 < fast.flat < fast.folds  # some folds flat, some not: both branches are exercised
    for r in range(2):  # independent: LinearRegression(positive=True), fold by fold
        for train, test in KFold(5, shuffle=True, random_state=r).split(x):
            reg = LinearRegression(positive=True).fit(np.log(x[train]), y[train])
            np.testing.assert_allclose(fast.heldout[r, test], reg.predict(np.log(x[test])), rtol=1e-10)


def test_a_signature_with_a_collinear_column_is_fitted_as_lstsq_with_its_cutoff():
    x, y = data(p=4, seed=5)
    x = np.hstack([x, x[:, :1] * 2.0])  # rank 4 of 5: the cut-off drops a singular value on every fold
    for transform in ("linear", "log"):
        assert_same(cross_validate(PhiRegression(transform), x, y), reference(PhiRegression(transform), x, y))
    fast = cross_validate(PhiRegression("linear"), x, y, k=5, repeats=1)
    for train, test in KFold(5, shuffle=True, random_state=0).split(x):
        pred = LinearRegression().fit(x[train], y[train]).predict(x[test])
        np.testing.assert_allclose(fast.heldout[0, test], pred, rtol=1e-8)


@pytest.mark.parametrize("p", [3, 30, 120])  # fewer features than training rows (X'X), and more (X X')
def test_ridgecv_on_all_folds_is_scikit_learns_leave_one_out_choice(p):
    rng = np.random.default_rng(p)
    x = rng.normal(size=(90, p))
    x[:, -1] = x[:, 0]  # collinear: a null direction the penalty must handle
    y = x[:, :3] @ [1.0, -0.5, 0.2] + rng.normal(size=90)
    assert_same(cross_validate(RidgeCV(alphas=ALPHAS), x, y), reference(RidgeCV(alphas=ALPHAS), x, y))


def test_a_ridgecv_with_other_settings_is_fitted_fold_by_fold():
    assert regression._batched(RidgeCV(alphas=ALPHAS, fit_intercept=False)) is None
    assert regression._batched(LinearRegression()) is None


@pytest.mark.parametrize("transform", ["linear", "select"])
def test_recipe_plus_on_all_folds_is_its_fit_per_fold_with_missing_values(transform):
    rng = np.random.default_rng(7)
    levels = rng.integers(0, 3, size=(120, 2))
    features = np.hstack([(levels[:, :1] == [0, 1, 2]), (levels[:, 1:] == [0, 1, 2])]).astype(float)
    m = np.exp(rng.normal(size=(120, 2)))
    y = features @ rng.normal(size=6) + 0.3 * np.log(m[:, 0]) + 0.2 * rng.normal(size=120)
    m[rng.choice(120, 9, replace=False), 1] = np.nan  # imputed by each training fold's median
    x = with_recipe(features, m)
    est = RecipePlus(features.shape[1], transform)
    assert_same(cross_validate(est, x, y), reference(est, x, y))


def test_cmi_and_pgdl_from_one_pair_count_are_the_two_functions():
    rng = np.random.default_rng(2)
    import pandas as pd
    hp = pd.DataFrame({"a": rng.integers(0, 3, 80), "b": rng.integers(0, 2, 80), "c": rng.integers(0, 3, 80),
                       "seed": rng.integers(0, 2, 80)})
    g = np.round(rng.normal(size=80), 1)  # ties in the gap
    mu = g + rng.normal(size=80)
    w = rng.multinomial(80, np.full(80, 1 / 80), size=40)
    for weights in (None, w):
        k, sign, pgdl = rank.grid_scores(mu, g, hp, weights=weights)
        k0, _, sign0 = rank.conditional_mi(mu, g, hp, weights=weights)
        np.testing.assert_array_equal(k, k0)
        np.testing.assert_array_equal(sign, sign0)
        np.testing.assert_array_equal(pgdl, rank.pgdl_cmi(mu, g, hp, weights=weights))
    assert rank.grid_scores(mu, g, hp[["a", "seed"]])[2] is None  # one varied axis: no PGDL score


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return write_zoo(tmp_path_factory.mktemp("zoos") / "planted", GRID, planted_gap)


def test_score_gives_the_same_numbers_batched_or_fold_by_fold_side_by_side_or_one_by_one(zoo, monkeypatch):
    y = gap_of(zoo)
    rng = np.random.default_rng(0)
    frames = [values_of(zoo, np.exp(y + 0.02 * rng.normal(size=len(y))), transform="select", name="m.good"),
              values_of(zoo, np.exp(y), higher_means="smaller_gap", name="m.against"),
              values_of(zoo, np.stack([y * (i + 1) + rng.normal(size=len(y)) for i in range(3)], 1),
                        kind="signature", name="m.sig", higher_means=None)]
    values = frames[0]
    for f in frames[1:]:
        values = values.merge(f, on="model_id")
    values.attrs["measures"] = {k: v for f in frames for k, v in f.attrs["measures"].items()}
    done = []
    fast = gb.score(values, zoo, n_boot=50, progress=done.append)
    assert list(fast.items) == done == ["m.good", "m.against", "m.sig"]  # the table's order, each reported
    monkeypatch.setattr(regression, "BATCHED", False)
    monkeypatch.setattr(scores, "_workers", lambda jobs: 1)
    slow = gb.score(values, zoo, n_boot=50)
    for name in done:
        a, b = fast[name], slow[name]
        assert a.to_dict().keys() == b.to_dict().keys() and a.notes == b.notes and a.refused == b.refused
        assert a.values.keys() == b.values.keys() and a.samples.keys() == b.samples.keys()
        for key in a.values:
            assert a.values[key] == pytest.approx(b.values[key], rel=1e-9, abs=1e-15)
            np.testing.assert_allclose(a.samples.get(key, 0.0), b.samples.get(key, 0.0), rtol=1e-9, atol=1e-15)
            assert (key in a.intervals) == (key in b.intervals)
            assert a.intervals.get(key, ()) == pytest.approx(b.intervals.get(key, ()), rel=1e-9, abs=1e-15)
        np.testing.assert_allclose(a.heldout, b.heldout, rtol=1e-9, atol=1e-15)
        assert a.transform_used == b.transform_used and a.direction == b.direction
    assert fast["m.against"].direction["flat_folds"] == 100  # the held path really ran
