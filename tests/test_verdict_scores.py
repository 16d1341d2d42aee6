"""The verdict's scores against independent computations: the direction-held k-fold R^2 against a brute-force loop of
clamped least squares, the "against its claim" mark planted both ways, and what a measure adds to the recipe
(delta_r2) against scikit-learn's cross_val_predict of the same ridge pipelines on the same folds."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler

from genbench.scoring.recipe import ALPHAS
from genbench.scoring.regression import K_FOLDS, REPEATS, PhiRegression
from genbench.scoring.resample import percentile_interval, pooled_scores
from genbench.scoring.scores import score, zoo_resamples
from planted import GRID, assert_honest, gap_of, planted_gap, pooled_cv, values_of, write_zoo

N_BOOT = 200


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return write_zoo(tmp_path_factory.mktemp("zoos") / "planted", GRID, planted_gap)


def clamped_kfold_r2(x, y, sign):
    """The direction-held k-fold R^2 by hand: per shuffle and training fold, the least-squares line of y on x; a slope
    whose sign is not `sign` gives way to the fold's mean; pooled R^2 of each shuffle, averaged."""
    r2s, flat = [], 0
    for r in range(REPEATS):
        pred = np.empty_like(y)
        for train, test in KFold(K_FOLDS, shuffle=True, random_state=r).split(x):
            slope, intercept = np.polyfit(x[train], y[train], 1)
            if slope * sign < 0:
                flat += 1
                slope, intercept = 0.0, y[train].mean()
            pred[test] = slope * x[test] + intercept
        r2s.append(r2_score(y, pred))
    return float(np.mean(r2s)), flat


def test_a_measure_running_against_its_claim_is_held_to_it_and_marked(zoo):
    y = gap_of(zoo)
    x = -y + 0.01 * np.random.default_rng(1).normal(size=len(y))  # higher value, SMALLER gap ...
    s = score(values_of(zoo, x, higher_means="larger_gap"), zoo, n_boot=N_BOOT)["test.m"]  # ... claims larger
    expected, flat = clamped_kfold_r2(x, y, +1.0)
    assert flat == K_FOLDS * REPEATS  # every training fold wants the other sign
    assert s.kfold_r2 == pytest.approx(expected, abs=1e-12) and s.kfold_r2 < 0
    _, free, _ = pooled_cv(PhiRegression("linear"), x[:, None], y)
    assert s.kfold_r2_free == pytest.approx(free.mean(), rel=1e-10) and s.kfold_r2_free > 0.9
    assert s.direction == {"claim": "larger_gap", "slope": -1.0, "tau": -1.0, "against": True, "flat_folds": 100,
                           "folds": 100}
    assert any(n.startswith("against its claim: it declares 'larger_gap' but its free slope and Kendall \u03c4 run "
                            "the other way") for n in s.notes)
    assert_honest(s)
    # the same values declared the right way: nothing held, nothing marked, the ranking score is the free one
    right = score(values_of(zoo, x, higher_means="smaller_gap"), zoo, n_boot=N_BOOT)["test.m"]
    assert right.kfold_r2 == pytest.approx(free.mean(), rel=1e-10) == right.kfold_r2_free
    assert right.direction["against"] is False and right.direction["flat_folds"] == 0


def test_the_held_slope_agrees_with_a_brute_force_loop_when_only_some_folds_flip(zoo):
    y = gap_of(zoo)
    rng = np.random.default_rng(1)
    x = 0.05 * (y - y.mean()) / y.std() + rng.normal(size=len(y))  # weak: some training folds flip the slope
    flats = []
    for claim, sign in (("larger_gap", 1.0), ("smaller_gap", -1.0)):
        s = score(values_of(zoo, x, higher_means=claim), zoo, n_boot=N_BOOT)["test.m"]
        expected, flat = clamped_kfold_r2(x, y, sign)
        assert s.kfold_r2 == pytest.approx(expected, abs=1e-12)
        assert s.direction["flat_folds"] == flat
        flats.append(flat)
    assert flats == [5, 95], "the planted measure must flip in some folds only, each way"


def test_test_accuracy_as_target_turns_the_claim_around(zoo):
    y = gap_of(zoo)
    x = y + 0.01 * np.random.default_rng(2).normal(size=len(y))  # larger gap, as claimed: lower test accuracy
    s = score(values_of(zoo, x, higher_means="larger_gap"), zoo, target="test_acc", n_boot=N_BOOT)["test.m"]
    acc = zoo.table.sort_values("model_id")["test_acc"].to_numpy(float)
    expected, flat = clamped_kfold_r2(x, acc, -1.0)
    assert s.kfold_r2 == pytest.approx(expected, abs=1e-12) and s.direction["against"] is False


def test_a_measure_without_a_direction_is_not_held_and_says_so(zoo):
    y = gap_of(zoo)
    x = -y + 0.01 * np.random.default_rng(1).normal(size=len(y))
    s = score(values_of(zoo, x, higher_means=None), zoo, n_boot=N_BOOT)["test.m"]
    assert s.kfold_r2 == s.kfold_r2_free > 0.9 and s.direction == {"claim": None, "against": False}
    assert "no direction check: the measure declares no direction (higher_means)" in s.notes


def _recipe_design(zoo):
    t = zoo.table.sort_values("model_id")
    return t[["hp.width", "hp.lr", "hp.noise"]].astype(str).to_numpy(dtype=object)


def _heldout(pipe, x, y):
    return np.array([cross_val_predict(pipe, x, y, cv=KFold(K_FOLDS, shuffle=True, random_state=r))
                     for r in range(REPEATS)])


def test_what_a_measure_adds_to_the_recipe_is_sklearns_ridge_with_and_without_it_on_the_same_folds(zoo):
    y, hp = gap_of(zoo), _recipe_design(zoo)
    levels = make_pipeline(OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                           PolynomialFeatures(2, interaction_only=True, include_bias=False))
    alone = make_pipeline(levels, RidgeCV(alphas=ALPHAS))
    h_alone = _heldout(alone, hp, y)
    residual = y - h_alone.mean(0)  # what the recipe does not predict
    rng = np.random.default_rng(8)
    for name, x, adds in (("knows", residual + 0.002 * rng.normal(size=len(y)), True),
                          ("noise", rng.normal(size=len(y)), False)):
        s = score(values_of(zoo, x, higher_means="larger_gap"), zoo, n_boot=N_BOOT)["test.m"]
        both = make_pipeline(ColumnTransformer([("recipe", levels, [0, 1, 2]),
                                                ("measure", StandardScaler(), [3])]), RidgeCV(alphas=ALPHAS))
        design = np.hstack([hp, x[:, None].astype(object)])
        h_both = _heldout(both, design, y)
        expected = np.mean([r2_score(y, p) for p in h_both]) - np.mean([r2_score(y, p) for p in h_alone])
        assert s.values["delta_r2"] == pytest.approx(expected, abs=1e-9), name
        w = zoo_resamples(zoo, seed=0, n_boot=N_BOOT)
        draws = pooled_scores(y, h_both, w)[0] - pooled_scores(y, h_alone, w)[0]
        lo, hi = percentile_interval(draws)
        assert s.intervals["delta_r2"] == pytest.approx((lo, hi), abs=1e-9), name
        assert (lo > 0) is adds, (name, lo, hi)
        assert_honest(s)


def test_what_a_signature_adds_uses_all_its_columns_and_log_when_declared(zoo):
    y, hp = gap_of(zoo), _recipe_design(zoo)
    rng = np.random.default_rng(9)
    sig = np.exp(np.stack([y + 0.01 * rng.normal(size=len(y)), rng.normal(size=len(y))], 1))
    s = score(values_of(zoo, sig, kind="signature", transform="log"), zoo, n_boot=N_BOOT)["test.m"]
    levels = make_pipeline(OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                           PolynomialFeatures(2, interaction_only=True, include_bias=False))
    both = make_pipeline(ColumnTransformer([("recipe", levels, [0, 1, 2]), ("measure", StandardScaler(), [3, 4])]),
                         RidgeCV(alphas=ALPHAS))
    h_both = _heldout(both, np.hstack([hp, np.log(sig).astype(object)]), y)
    h_alone = _heldout(make_pipeline(levels, RidgeCV(alphas=ALPHAS)), hp, y)
    expected = np.mean([r2_score(y, p) for p in h_both]) - np.mean([r2_score(y, p) for p in h_alone])
    assert s.values["delta_r2"] == pytest.approx(expected, abs=1e-9)
    assert s.direction == {}  # a signature's fit predicts the gap: no claim to check


def test_the_recipe_baselines_add_nothing_to_themselves_and_a_zoo_without_a_recipe_refuses(zoo, tmp_path):
    from genbench.scoring.baselines import score_baselines
    scores, _ = score_baselines(zoo, n_boot=50, only=("baseline.hparams", "baseline.train_loss"))
    assert scores["baseline.hparams"].refused["delta_r2"] == "it is the recipe"
    assert "delta_r2" in scores["baseline.train_loss"].values
    flat = write_zoo(tmp_path / "flat", {"width": [32], "seed": list(range(30))},
                     lambda t, rng: 0.1 + 0.02 * rng.normal(size=len(t)), name="flat")
    s = score(values_of(flat, np.arange(30.0)), flat, n_boot=50)["test.m"]
    assert s.refused["delta_r2"] == "zoo 'flat' varies no hyperparameter but the seed: there is no recipe to add to"
