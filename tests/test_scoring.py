"""Regression scores against scikit-learn, the bootstrap against the point estimates, gb.score's bad-input notes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_predict, cross_val_score

import genbench as gb
from genbench.scoring import score
from genbench.scoring.regression import _weighted_r2, adjusted_r2, bootstrap, fit


def _data(n=60, p=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p))
    y = x @ rng.normal(size=p) + 0.5 * rng.normal(size=n)
    return x, y


def test_fit_matches_scikit_learn():
    x, y = _data()
    r = fit(x, y, k=10, seed=3)
    lr = LinearRegression().fit(x, y)
    r2 = lr.score(x, y)
    assert r.r2 == pytest.approx(r2)
    assert r.adj_r2 == pytest.approx(1 - (1 - r2) * (60 - 1) / (60 - 3 - 1))
    cv = KFold(10, shuffle=True, random_state=3)
    assert r.kfold_r2 == pytest.approx(cross_val_score(LinearRegression(), x, y, cv=cv, scoring="r2").mean())
    pred = cross_val_predict(LinearRegression(), x, y, cv=cv)
    np.testing.assert_allclose(r.heldout, pred)
    assert r.mse == pytest.approx(np.mean((y - pred) ** 2))
    np.testing.assert_allclose(r.coef, lr.coef_)


def test_bootstrap_with_unit_weights_reproduces_the_point_estimates():
    x, y = _data()
    r = fit(x, y, seed=1)
    b = bootstrap(x, y, np.ones((2, len(y))), r.folds, r.heldout)
    np.testing.assert_allclose(b["adj_r2"], r.adj_r2, rtol=1e-6)
    np.testing.assert_allclose(b["kfold_r2"], r.kfold_r2, rtol=1e-6)
    np.testing.assert_allclose(b["mse"], r.mse, rtol=1e-6)


def test_bootstrap_weights_act_as_duplicated_models():
    x, y = _data(n=30)
    w = np.random.default_rng(0).multinomial(30, np.ones(30) / 30, size=1).astype(float)
    dup = np.repeat(np.arange(30), w[0].astype(int))
    lr = LinearRegression().fit(x[dup], y[dup])
    r2_dup = lr.score(x[dup], y[dup])
    r = fit(x, y)
    b = bootstrap(x, y, w, r.folds, r.heldout)
    assert b["adj_r2"][0] == pytest.approx(adjusted_r2(r2_dup, 30, 3), rel=1e-6)
    assert _weighted_r2(y, lr.predict(x)[None], w)[0] == pytest.approx(r2_dup)
    # the k-fold scores judge the fixed held-out predictions on the resampled models
    from sklearn.metrics import mean_squared_error, r2_score
    per_fold = [r2_score(y[r.folds == f], r.heldout[r.folds == f], sample_weight=w[0, r.folds == f])
                for f in range(10) if w[0, r.folds == f].sum() > 0 and np.ptp(y[(r.folds == f) & (w[0] > 0)]) > 0]
    assert b["kfold_r2"][0] == pytest.approx(np.mean(per_fold))
    assert b["mse"][0] == pytest.approx(mean_squared_error(y, r.heldout, sample_weight=w[0]))


def _values(zoo, column):
    df = pd.DataFrame({"model_id": zoo.model_ids, "test.m": column, "test.m:error": [None] * len(zoo)})
    df.attrs["measures"] = {"test.m": {"kind": "scalar", "transform": None}}
    return df


def test_score_of_the_gap_itself_is_perfect_and_random_is_not(digits_zoo):
    gap = digits_zoo.table["gap"].to_numpy()
    s = score(_values(digits_zoo, gap), digits_zoo, n_boot=200)["test.m"]
    assert s.adj_r2 == pytest.approx(1.0) and s.kfold_r2 == pytest.approx(1.0) and s.tau > 0.99  # tau-a: one tied pair
    lo, hi = s.intervals["tau"]
    assert lo <= 1.0 <= hi + 1e-12
    rng = np.random.default_rng(0)
    taus = [score(_values(digits_zoo, rng.normal(size=len(gap))), digits_zoo, n_boot=50)["test.m"].tau
            for _ in range(10)]
    assert abs(np.mean(taus)) < 0.15


def test_score_names_every_problem_and_still_scores_the_rest(digits_zoo):
    gap = digits_zoo.table["gap"].to_numpy().copy()
    col = gap + 1.0
    col[:2] = np.nan  # two failed models
    df = _values(digits_zoo, col)
    s = score(df, digits_zoo, n_boot=50)["test.m"]
    assert s.dropped == 2 and s.n == len(gap) - 2 and any("dropped, not imputed" in n for n in s.notes)
    assert s.tau > 0.99
    df.attrs["measures"]["test.m"]["transform"] = "log"
    neg = _values(digits_zoo, gap - 10)
    neg.attrs["measures"]["test.m"]["transform"] = "log"
    s = score(neg, digits_zoo, n_boot=50)["test.m"]
    assert np.isnan(s.adj_r2) and any("non-positive" in n for n in s.notes) and s.tau > 0.99
    few = _values(digits_zoo, gap)[:6]
    s = score(few, digits_zoo, n_boot=50)["test.m"]
    assert np.isnan(s.kfold_r2) and any("too few" in n for n in s.notes) and s.tau > 0.99
    with pytest.raises(gb.GenbenchError, match="target"):
        score(df, digits_zoo, target="loss")


def test_transfer_to_the_same_zoo_is_the_in_sample_fit_and_lengths_must_match(digits_zoo):
    from genbench.scoring.scores import transfer

    rng = np.random.default_rng(3)
    gap = digits_zoo.table["gap"].to_numpy()
    mu = gap + 0.05 * rng.normal(size=len(gap))
    vals = _values(digits_zoo, mu)
    t = transfer("test.m", (vals, digits_zoo), (vals, digits_zoo))
    in_sample = LinearRegression().fit(mu[:, None], gap).score(mu[:, None], gap)
    assert t.r2 == pytest.approx(in_sample) and t.n_fit == t.n_eval == len(gap)
    # a shifted copy of the measure on the "other" zoo: the fit does not carry over
    shifted = _values(digits_zoo, mu + 1.0)
    assert transfer("test.m", (vals, digits_zoo), (shifted, digits_zoo)).r2 < 0
    wide = vals.assign(**{"test.m[0]": mu, "test.m[1]": mu}).drop(columns=["test.m"])
    with pytest.raises(gb.GenbenchError, match="same length"):
        transfer("test.m", (vals, digits_zoo), (wide, digits_zoo))
