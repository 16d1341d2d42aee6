"""baseline.weight_stats (Unterthiner et al. 2020): per-layer statistics of the final weights checked against numpy by
hand, the first / last / pooled fallback for models of different shapes, the regressor chosen inside each training
fold (ridge where the gap is linear in a statistic, trees where it is a step), deterministic, and its row on a zoo."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from genbench.scoring.baselines import BASELINE_NAMES, score_baselines
from genbench.scoring.weight_stats import (STATS, layer_features, layers, summary_features, tensor_stats,
                                           weight_features, weight_stats_estimator)


def by_hand(x) -> list[float]:
    x = np.asarray(x, dtype=float).ravel()
    return [x.mean(), x.var(), x.min(), np.percentile(x, 25), np.median(x), np.percentile(x, 75), x.max()]


def test_statistics_of_a_tensor_by_hand():
    w = np.array([[1.0, -2.0], [3.0, 0.5]])
    assert tensor_stats(w) == pytest.approx([0.625, 3.171875, -2.0, -0.125, 0.75, 1.5, 3.0])
    assert tensor_stats(w) == pytest.approx(by_hand(w)) and len(STATS) == 7
    assert np.isnan(tensor_stats(None)).all() and np.isnan(tensor_stats(np.array([1.0, np.inf]))).all()


def state(depth: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A conv net's state dict: `depth` conv layers (a batchnorm after the first), a dense head without bias."""
    rng = np.random.default_rng(seed)
    s = {}
    for i in range(depth):
        s[f"convs.{i}.weight"] = rng.normal(size=(4, 4 if i else 1, 3)).astype(np.float32)
        s[f"convs.{i}.bias"] = rng.normal(size=4).astype(np.float32)
        if i == 0:
            s["bn.weight"], s["bn.bias"] = np.ones(4, np.float32), np.zeros(4, np.float32)
            s["bn.running_mean"], s["bn.running_var"] = np.zeros(4, np.float32), np.ones(4, np.float32)
    s["head.weight"] = rng.normal(size=(10, 4)).astype(np.float32)
    return s


def test_layers_pair_each_kernel_with_its_bias_and_leave_batchnorm_out():
    s = state(2)
    ls = layers(s)
    assert [n for n, _, _ in ls] == ["convs.0", "convs.1", "head"]
    f = layer_features(ls)
    assert f.shape == (3 * 2 * 7,)
    assert f[:7] == pytest.approx(by_hand(s["convs.0.weight"])) and f[7:14] == pytest.approx(by_hand(s["convs.0.bias"]))
    assert f[28:35] == pytest.approx(by_hand(s["head.weight"])) and np.isnan(f[35:]).all()  # the head has no bias


def test_models_of_two_depths_get_first_last_and_pooled_statistics():
    shallow, deep = layers(state(2, 1)), layers(state(3, 2))
    a, b = summary_features(shallow), summary_features(deep)
    assert a.shape == b.shape == (3 * 2 * 7,)
    s = state(3, 2)
    pooled = np.concatenate([s[f"convs.{i}.weight"].ravel() for i in range(3)] + [s["head.weight"].ravel()])
    assert b[:7] == pytest.approx(by_hand(s["convs.0.weight"]))
    assert b[14:21] == pytest.approx(by_hand(s["head.weight"]))
    assert b[28:35] == pytest.approx(by_hand(pooled), rel=1e-6)
    assert b[35:42] == pytest.approx(by_hand(np.concatenate([s[f"convs.{i}.bias"] for i in range(3)])), rel=1e-6)


def test_features_of_a_zoo_read_from_its_checkpoints(digits_zoo):
    """Models of one width share their layers (per-layer features); both widths together fall back to first, last
    and pooled."""
    from safetensors.numpy import load_file

    t = digits_zoo.table
    ids = sorted(t.loc[t["hp.width"] == 16, "model_id"])
    x, how = weight_features(digits_zoo, ids)
    assert how.startswith("per layer") and x.shape[0] == len(ids)
    first = load_file(digits_zoo.root / t.set_index("model_id").at[ids[0], "checkpoint"])
    assert x[0] == pytest.approx(layer_features(layers(first)), nan_ok=True)
    both, how = weight_features(digits_zoo, sorted(t["model_id"]))
    assert how.startswith("the models' layers differ") and both.shape == (len(t), 42)


def planted(kind: str, n: int = 120):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 6))
    y = 0.5 * x[:, 0] if kind == "linear" else np.where(x[:, 0] > 0.3, 1.0, 0.0) * (x[:, 1] > 0)
    return x, y + 0.01 * rng.normal(size=n)


@pytest.mark.parametrize("kind, chosen", [("linear", "RidgeCV"), ("step", "HistGradientBoostingRegressor")])
def test_the_regressor_is_chosen_inside_the_training_fold(kind, chosen):
    x, y = planted(kind)
    fit = clone(weight_stats_estimator()).fit(x[:90], y[:90])
    assert type(fit.best_params_["model"]).__name__ == chosen
    again = clone(weight_stats_estimator()).fit(x[:90], y[:90])
    assert np.array_equal(fit.predict(x[90:]), again.predict(x[90:]))  # deterministic, bit for bit


def test_weight_stats_is_a_baseline_row_of_a_zoo(digits_zoo):
    assert "baseline.weight_stats" in BASELINE_NAMES
    scores, notes = score_baselines(digits_zoo, only=("baseline.weight_stats",), n_boot=50, k=4, repeats=1)
    s = scores["baseline.weight_stats"]
    assert not notes and s.kind == "baseline" and np.isfinite(s.values["kfold_r2"])
    assert any(n.startswith("weight statistics the models' layers differ") for n in s.notes)  # two widths
