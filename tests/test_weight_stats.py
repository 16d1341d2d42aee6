"""baseline.weight_stats (Unterthiner et al. 2020): per-layer statistics of the final weights equal numpy's by hand,
layers in module order (not the checkpoint's alphabetical order), the first / last / pooled fallback for models of
different depths, the regressor chosen inside each training fold (the held-out predictions equal a manual loop's;
trees where the gap is a nonlinear function of a statistic, ridge where it is linear), non-finite weights imputed,
determinism, and its record on a zoo, which verifies."""
from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from genbench.scoring import baselines, weight_stats
from genbench.scoring.baselines import BASELINE_NAMES, BASELINES, score_baselines
from genbench.scoring.recipe import ALPHAS
from genbench.scoring.regression import cross_validate
from genbench.scoring.weight_stats import STATS, ChosenInFold, design, state_layers, tensor_stats, weight_features

from planted import GRID, planted_gap, write_zoo

WS = "baseline.weight_stats"


def by_hand(x) -> list[float]:
    """mean, variance, min, quartiles, max: the paper's statistics of one tensor, by numpy."""
    x = np.asarray(x, dtype=np.float64).ravel()
    return [x.mean(), x.var(), x.min(), np.percentile(x, 25), np.median(x), np.percentile(x, 75), x.max()]


def net(depth: int, seed: int = 0, *, scale: float = 1.0) -> OrderedDict:
    """A conv net's state dict in module order: `depth` conv layers (a batchnorm after the first, with its 1-D
    scale, shift and running statistics) and a dense head without bias."""
    rng = np.random.default_rng(seed)
    s = OrderedDict()
    for i in range(depth):
        s[f"convs.{i}.weight"] = (scale * rng.normal(size=(4, 4 if i else 1, 3))).astype(np.float32)
        s[f"convs.{i}.bias"] = rng.normal(size=4).astype(np.float32)
        if i == 0:
            s["convs.0.bn.weight"], s["convs.0.bn.bias"] = np.full(4, 1.5, np.float32), np.zeros(4, np.float32)
            s["convs.0.bn.running_mean"], s["convs.0.bn.running_var"] = np.zeros(4, np.float32), np.ones(4, np.float32)
    s["head.weight"] = rng.normal(size=(10, 4)).astype(np.float32)
    return s


# ---------------------------------------------------------------- features


def test_statistics_of_a_tensor_by_hand():
    w = np.array([[1.0, -2.0], [3.0, 0.5]])
    assert list(tensor_stats(w)) == pytest.approx([0.625, 3.171875, -2.0, -0.125, 0.75, 1.5, 3.0], rel=1e-15)
    assert list(tensor_stats(w)) == pytest.approx(by_hand(w), rel=1e-15) and STATS[0] == "mean" and len(STATS) == 7
    for absent in (None, np.zeros(0), np.array([1.0, np.inf]), np.array([np.nan, 2.0])):
        assert np.isnan(tensor_stats(absent)).all()


def test_layers_are_kernels_with_their_biases_in_the_state_dicts_order_and_batchnorm_is_left_out():
    s = net(2)
    ls = state_layers(s)
    assert [n for n, _, _ in ls] == ["convs.0", "convs.1", "head"]  # the bn's 1-D scale and shift are not layers
    assert ls[2][2] is None and all(w.dtype == np.float64 for _, w, _ in ls)
    # module order, not alphabetical (a checkpoint's keys are sorted: "head" < "layers.10" < "layers.2" < "stem")
    rng = np.random.default_rng(1)
    order = ["stem", "layers.2", "layers.10", "head"]
    ordered = OrderedDict((f"{k}.weight", rng.normal(size=(3, 3))) for k in order)
    assert [n for n, _, _ in state_layers(ordered)] == order


def test_models_with_the_same_layers_get_every_layers_statistics():
    nets = [net(2, seed) for seed in range(3)]
    x, names, how = design(state_layers(s) for s in nets)
    # convs.0 weight + bias, convs.1 weight + bias, head weight: no model's head has a bias, so no column for it
    assert x.shape == (3, 5 * 7) and len(names) == 35
    assert names[:8] == [f"convs.0.weight:{s}" for s in STATS] + ["convs.0.bias:mean"]
    assert names[-7:] == [f"head.weight:{s}" for s in STATS]
    for row, s in zip(x, nets):
        expected = [v for key in ("convs.0.weight", "convs.0.bias", "convs.1.weight", "convs.1.bias", "head.weight")
                    for v in by_hand(s[key])]
        np.testing.assert_allclose(row, expected, rtol=1e-12)
    assert how == ("per layer: the 3 layers every model has (same names and shapes), 7 statistics of each one's "
                   "weights and biases: 35 features")


def test_models_of_two_depths_get_first_last_and_pooled_statistics():
    shallow, deep = net(2, 1), net(3, 2)
    x, names, how = design([state_layers(shallow), state_layers(deep)])
    assert how == ("of the first layer, the last layer (the head) and all layers pooled, as the models' layers "
                   "differ (names or shapes): 7 statistics of their weights and biases, 35 features")
    # first weight + bias, last weight (the head: no bias anywhere), pooled weights + biases
    assert [n.split(":")[0] for n in names[::7]] == ["first.weight", "first.bias", "last.weight", "all.weight",
                                                    "all.bias"]
    for row, s, depth in zip(x, (shallow, deep), (2, 3)):
        convs = [f"convs.{i}" for i in range(depth)]
        pooled_w = np.concatenate([np.ravel(s[f"{c}.weight"]) for c in convs] + [np.ravel(s["head.weight"])])
        pooled_b = np.concatenate([s[f"{c}.bias"] for c in convs])
        expected = by_hand(s["convs.0.weight"]) + by_hand(s["convs.0.bias"]) + by_hand(s["head.weight"]) \
            + by_hand(pooled_w) + by_hand(pooled_b)
        np.testing.assert_allclose(row, expected, rtol=1e-12)
    # the same depth but another width: shapes differ, so the fallback too
    wide = net(2, 3)
    wide["head.weight"] = np.ones((10, 5), np.float32)
    assert design([state_layers(shallow), state_layers(wide)])[2].startswith("of the first layer, the last layer")


def test_a_non_finite_weight_gives_nan_statistics_of_its_tensor_only():
    bad = net(2, 5)
    bad["convs.1.weight"][0, 0, 0] = np.inf
    x, names, _ = design([state_layers(net(2, 4)), state_layers(bad)])
    nan = np.isnan(x[1])
    assert [n for n, m in zip(names, nan) if m] == [f"convs.1.weight:{s}" for s in STATS]
    assert np.isfinite(x[0]).all()


def test_features_of_a_zoo_are_its_models_weights_in_module_order(digits_zoo, nin_zoo):
    # digits-mlp varies the width: first layer, head and pooled
    ids = sorted(digits_zoo.model_ids)
    x, names, how = weight_features(digits_zoo, ids)
    assert x.shape == (len(ids), 6 * 7) and how.startswith("of the first layer, the last layer (the head) and all")
    for i in (0, len(ids) - 1):
        p = {k: v.detach().double().numpy() for k, v in digits_zoo.load_model(ids[i]).state_dict().items()}
        fc = [k[:-7] for k in p if k.endswith("fc.weight")]
        expected = (by_hand(p["blocks.0.fc.weight"]) + by_hand(p["blocks.0.fc.bias"]) + by_hand(p["head.weight"])
                    + by_hand(p["head.bias"])
                    + by_hand(np.concatenate([p[f"{f}.weight"].ravel() for f in fc] + [p["head.weight"].ravel()]))
                    + by_hand(np.concatenate([p[f"{f}.bias"] for f in fc] + [p["head.bias"]])))
        np.testing.assert_allclose(x[i], expected, rtol=1e-12)
    # digits-nin: every model has the same ten layers, each one's statistics in the model's order
    ids = sorted(nin_zoo.model_ids)
    x, names, how = weight_features(nin_zoo, ids)
    assert how.startswith("per layer: the 10 layers") and x.shape == (len(ids), 10 * 2 * 7)
    assert names[0] == "blocks.0.conv1.weight:mean" and names[-7] == "head.bias:mean"
    p = dict(nin_zoo.load_model(ids[1]).named_parameters())
    kernels = [k[:-7] for k, v in p.items() if k.endswith(".weight") and v.ndim >= 2]
    expected = [v for k in kernels for t in ("weight", "bias") for v in by_hand(p[f"{k}.{t}"].detach().double())]
    np.testing.assert_allclose(x[1], expected, rtol=1e-12)


# ---------------------------------------------------------------- the regressor chosen inside each training fold


def _ridge():
    return make_pipeline(SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
                         StandardScaler(), RidgeCV(alphas=ALPHAS))


def _trees():
    return make_pipeline(SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
                         GradientBoostingRegressor(n_estimators=50, learning_rate=0.1, max_depth=3,
                                                   max_features="sqrt", random_state=0))


def _by_hand(x, y, train, test):
    """The inner choice written out: pooled MSE over a shuffled 3-fold split of the training fold only."""
    xt, yt = x[train], y[train]
    mse = []
    for make in (_ridge, _trees):
        sse = 0.0
        for a, b in KFold(3, shuffle=True, random_state=0).split(xt):
            sse += float(np.sum((yt[b] - make().fit(xt[a], yt[a]).predict(xt[b])) ** 2))
        mse.append(sse)
    best = (_ridge, _trees)[int(np.argmin(mse))]
    return best().fit(xt, yt).predict(x[test]), ("ridge", "trees")[int(np.argmin(mse))]


def _planted(kind: str, n: int = 80):
    """Weight statistics of n nets whose layers' scales vary, and a gap that is a function of the head's variance:
    linear, or a step (nonlinear)."""
    rng = np.random.default_rng(7)
    x, names, _ = design(state_layers(net(2, i, scale=float(rng.uniform(0.3, 3.0)))) for i in range(n))
    v = x[:, names.index("convs.1.weight:var")]
    v = (v - v.mean()) / v.std()
    signal = v if kind == "linear" else np.where(np.abs(v) < 0.5, 1.0, 0.0)
    return x, 0.1 + 0.05 * signal + 0.002 * rng.normal(size=n)


def test_held_out_predictions_equal_a_manual_loop_that_chooses_inside_each_training_fold():
    x, y = _planted("step", 40)
    y[:20] += 0.05 * x[:20, 0]  # neither purely linear nor a step: folds may choose either
    x[3, :7] = np.nan           # a model with non-finite first-layer weights: imputed inside the folds
    cv = cross_validate(ChosenInFold(), x, y, k=5, repeats=2)
    heldout, chosen = np.empty((2, len(y))), {}
    for r in range(2):
        for train, test in KFold(5, shuffle=True, random_state=r).split(x):
            heldout[r, test], c = _by_hand(x, y, train, test)
            chosen[c] = chosen.get(c, 0) + 1
    np.testing.assert_array_equal(cv.heldout, heldout)  # bit for bit: the same fits on the same folds
    assert cv.chosen == chosen and np.isfinite(cv.heldout).all()


@pytest.mark.parametrize("kind, winner", [("linear", "ridge"), ("step", "trees")])
def test_trees_win_where_the_gap_is_nonlinear_in_a_statistic_and_ridge_where_it_is_linear(kind, winner):
    x, y = _planted(kind)
    cv = cross_validate(ChosenInFold(), x, y, k=10, repeats=1)
    assert cv.chosen.get(winner, 0) >= 9, cv.chosen
    fit = ChosenInFold().fit(x, y)
    assert fit.choice_ == winner and fit.inner_mse_[winner] == min(fit.inner_mse_.values())


def test_the_choice_is_deterministic_bit_for_bit():
    x, y = _planted("step", 60)
    a, b = ChosenInFold().fit(x[:45], y[:45]), clone(ChosenInFold()).fit(x[:45], y[:45])
    assert a.inner_mse_ == b.inner_mse_ and np.array_equal(a.predict(x[45:]), b.predict(x[45:]))


# ---------------------------------------------------------------- the baseline row


def test_weight_stats_is_a_baseline_row_scored_on_the_shared_folds(digits_zoo):
    assert WS in BASELINE_NAMES and len(BASELINES) == 6
    assert "Unterthiner" in {b.name: b.citation for b in BASELINES}[WS]
    run = [score_baselines(digits_zoo, only=(WS,), n_boot=50, repeats=2) for _ in range(2)]
    (scores, notes), (again, _) = run
    s = scores[WS]
    assert notes == [] and s.kind == "baseline" and s.n == len(digits_zoo) and s.transform is None
    assert "adj_r2" in s.refused and np.isfinite(s.values["kfold_r2"]) and s.transform_used == {}
    assert any(n.startswith("weight statistics of the first layer, the last layer") for n in s.notes)
    assert any(n.startswith("regressor chosen inside the 20 training folds (inner 3-fold MSE): ridge ")
               for n in s.notes)
    # the same held-out predictions as the estimator cross-validated by hand on the same features and folds
    ids = sorted(digits_zoo.model_ids)
    x, _, _ = weight_features(digits_zoo, ids)
    y = digits_zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float)
    np.testing.assert_array_equal(s.heldout, cross_validate(ChosenInFold(), x, y, repeats=2).heldout)
    # deterministic: two runs equal, bit for bit
    assert np.array_equal(s.heldout, again[WS].heldout) and s.values == again[WS].values
    assert s.intervals == again[WS].intervals


def test_a_zoo_without_checkpoints_gets_a_note(tmp_path):
    flat = write_zoo(tmp_path / "z", GRID, planted_gap, name="nockpt")
    scores, notes = score_baselines(flat, n_boot=20, repeats=1, only=(WS, "baseline.train_loss"))
    assert WS not in scores.items and "baseline.train_loss" in scores.items
    assert notes == [f"no {WS}: zoo 'nockpt' has no checkpoints to read weights from"]


def test_the_source_hash_covers_both_modules():
    from genbench.entries.run import baselines_source_hash
    both = inspect.getsource(baselines) + inspect.getsource(weight_stats)
    assert baselines_source_hash() == hashlib.sha256(both.encode()).hexdigest()


def test_a_weight_stats_record_verifies(digits_zoo, tmp_path, monkeypatch):
    from genbench.entries.run import run_baselines
    from genbench.entries.verify import verify_record
    from genbench.record import Record, write_record

    # The record's path, not the regressor's size, is under test here (the shipped regressor is tested above): five
    # trees instead of fifty, in the run and in verify's re-run alike.
    shipped = weight_stats.candidates
    monkeypatch.setattr(weight_stats, "candidates",
                        lambda: tuple((n, e.set_params(gradientboostingregressor__n_estimators=5) if n == "trees" else e)
                                      for n, e in shipped()))
    (rec,) = run_baselines(digits_zoo, only=(WS,), n_boot=50)
    r = Record(rec)
    assert r.ok and r.data.get("baseline") is True and np.isfinite(r.score("kfold_r2"))
    assert any(n.startswith("weight statistics") for n in rec["scores"]["notes"])
    v = verify_record(write_record(rec, tmp_path))
    assert v.ok, (v.problems, v.differences[:3])
