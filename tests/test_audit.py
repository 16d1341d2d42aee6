"""The fragility audit. Unit level: its one rule (a statistic changed when |Q| > t * SE(Q), the same test for the
measure and for the test error) on planted synthetic tables where the outcome is known exactly. On the real zoo (a
reduced build of `mnist1d-fragility`): planted controls, the test error itself (robust: it cannot be fragile
with respect to itself), the test error with multiplicative noise of known size (passes where the noise is small
against the test error's own changes, turns data-blind where it swamps them), a random measure (data-blind, its
trend and scaling inconclusive), planted twin-only changes (fragile-value, fragile-trend); the learning-curve
plot; and the rescaling control on real networks."""
from __future__ import annotations

import hashlib
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

import genbench as gb
from genbench.measures.registry import unregister_measure
from genbench.measures.weights import weight_layers
from genbench.scoring.audit import (BASE, Thresholds, assemble_report, audit_table, cell_stats, critical, cross_fit,
                                    data_sensitivity, learning_curves, twin_cells)

SIZES = [100, 300, 1000, 3000]
NOISE = [0.0, 0.1, 0.2]
SEEDS = [0, 1, 2]
AXES = ["train_size", "label_noise", "seed"]
CRIT4 = float(student_t.ppf(0.975, 4))  # 3 seeds per arm: 2 + 2 degrees of freedom


def err_of(n: float, noise: float) -> float:
    return 0.3 * (n / 100) ** -0.3 + 0.5 * noise


def planted(mu_base, twins, *, seed: int = 0, noise=NOISE, seeds=SEEDS, wobble_sd: float = 0.01) -> pd.DataFrame:
    """A learning-curve zoo table: the baseline and each twin {name: (mu(n, r, err), err shift or shift(n, r))};
    seed noise on the error (sd 0.004 baseline, +0.001 twin) and a 1% seed wobble on mu."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        for r in noise:
            for s in seeds:
                e = err_of(n, r) + rng.normal(0, 0.004)
                wobble = 1 + rng.normal(0, wobble_sd)
                rows.append({"arm": BASE, "train_size": n, "label_noise": r, "seed": s, "err": e,
                             "mu": mu_base(n, r, e) * wobble})
                for arm, (mu_twin, shift) in twins.items():
                    e_twin = e + (shift(n, r) if callable(shift) else shift) + rng.normal(0, 0.001)
                    rows.append({"arm": arm, "train_size": n, "label_noise": r, "seed": s, "err": e_twin,
                                 "mu": mu_twin(n, r, e_twin) * wobble})
    return pd.DataFrame(rows)


def run(t: pd.DataFrame, **kw):
    return audit_table(t, axes=AXES, **kw)


def checks_by(parts) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in parts["checks"]:
        out.setdefault(c.part, []).append(c)
    return out


def failed_labels(parts) -> set[str]:
    return {c.label for c in parts["checks"] if c.failed}


TRACK = lambda n, r, e: 2 * e  # noqa: E731  a measure that follows the test error, twin or not


# ---------------------------------------------------------------- the one rule, exactly


def one_cell(d_mu: float, d_err: float, sd: float = 0.01, mc: float | None = None, twin: str = "sgd_no_momentum"):
    """One grid point, 3 seeds per arm whose values are mean -/0/+ sd (sample sd exactly `sd`), the twin's means
    shifted by d_mu and d_err."""
    rows = []
    for arm, dm, de in ((BASE, 0.0, 0.0), (twin, d_mu, d_err)):
        for s, k in enumerate((-1, 0, 1)):
            rows.append({"arm": arm, "train_size": 100, "seed": s, "mu": 1.0 + dm + k * sd, "err": 0.3 + de + k * sd,
                         **({"mu_mc_se": mc} if mc is not None else {})})
    return pd.DataFrame(rows)


def cell_of(t: pd.DataFrame, th: Thresholds | None = None) -> pd.Series:
    return twin_cells(cell_stats(t, ["train_size"]), ["train_size"], th or Thresholds(), "log").iloc[0]


def test_admission_and_movement_are_one_test_at_the_same_critical_value():
    se = 0.01 * math.sqrt(2 / 3)  # two arms, 3 seeds each, seed sd 0.01
    assert critical(4, 0.05) == pytest.approx(CRIT4)
    edge = CRIT4 * se
    below, above = cell_of(one_cell(0.999 * edge, 0.999 * edge)), cell_of(one_cell(1.001 * edge, 1.001 * edge))
    assert below["admitted"] and not below["changed"]
    assert not above["admitted"] and above["changed"]
    assert below["t"] == pytest.approx(0.999 * CRIT4) and below["t_err"] == pytest.approx(0.999 * CRIT4)
    assert below["err_tol"] == pytest.approx(edge)
    # the absolute cap: a change within the seed noise but above err_abs_tol is not admitted
    wide = cell_of(one_cell(0.0, 0.06, sd=0.1))
    assert not wide["admitted"] and abs(wide["t_err"]) < CRIT4
    assert cell_of(one_cell(0.0, 0.06, sd=0.1), Thresholds(err_abs_tol=0.1))["admitted"]


def test_the_measures_monte_carlo_noise_enters_its_standard_error():
    mc = 0.02
    se_mc = math.sqrt(2 * (0.01 ** 2 + mc ** 2) / 3)
    d = 2.0 * CRIT4 * 0.01 * math.sqrt(2 / 3)  # twice the seed-only threshold, below the one with Monte-Carlo noise
    assert d < CRIT4 * se_mc
    assert cell_of(one_cell(d, 0.0))["changed"]
    with_mc = cell_of(one_cell(d, 0.0, mc=mc))
    assert not with_mc["changed"] and with_mc["mu_se"] == pytest.approx(se_mc)
    stats = cell_stats(one_cell(d, 0.0, mc=mc), ["train_size"]).set_index("arm")
    assert stats.loc[BASE, "mu_se"] == pytest.approx(math.sqrt((0.01 ** 2 + mc ** 2) / 3))
    assert stats.loc[BASE, "err_se"] == pytest.approx(0.01 / math.sqrt(3))  # the error's own SE is untouched


@pytest.mark.parametrize("scale", [1.0, 1e-3, 250.0])
def test_the_test_error_itself_never_fails_a_part_on_random_tables(scale):
    """mu = c * err (c > 0): every statistic of mu equals the error's, so no admitted cell or curve can have
    changed, whatever the tables; twins that moved the error are left out rather than judged."""
    for k in range(12):
        rng = np.random.default_rng(k)
        shifts = {name: float(rng.choice([0.0, 0.002, 0.01, 0.08])) for name in ("lr_x3", "adam", "batch_x2")}
        twins = {name: (lambda n, r, e: scale * e, (lambda n, r, s=s, g=rng.normal(): s * (1 + g) * (n / 100) ** 0.2))
                 for name, s in shifts.items()}
        t = planted(lambda n, r, e: scale * e, twins, seed=k, seeds=list(range(int(rng.integers(3, 6)))),
                    wobble_sd=0.0)
        parts = run(t)
        assert not any(c.failed for c in parts["checks"]), (k, [c for c in parts["checks"] if c.failed])
        cells = parts["cells"]
        assert np.allclose(cells["t"], cells["t_err"])
        assert not (cells["admitted"] & cells["changed"]).any()
        curves = parts["curves"]
        ok = curves["admitted"].astype(bool)
        assert not (ok & curves["flip"].astype(bool)).any() and not (ok & curves["exponent_changed"].astype(bool)).any()
        assert np.allclose(curves["t_d_beta_mu"], curves["t_d_beta_err"])
        base = parts["data"].query("arm == @BASE and judged > 0")
        assert (base["tau"] == 1.0).all() and np.allclose(base["elasticity"], 1.0)


def test_a_measure_that_tracks_the_error_is_robust_with_any_twin_names():
    parts = run(planted(TRACK, {"lr_x3": (TRACK, 0.0), "sgd_no_momentum": (TRACK, 0.0)}))
    assert parts["admitted"] == {"lr_x3": 1.0, "sgd_no_momentum": 1.0, "all": 1.0}
    assert parts["verdict"] == "robust", parts["missing"]
    assert all(c.failed is False for c in parts["checks"])
    ev = {e.part: e for e in parts["evidence"]}
    assert ev["value"].by_twin == {"lr_x3": 12, "sgd_no_momentum": 12}
    assert ev["trend"].by_twin == {"lr_x3": 3, "sgd_no_momentum": 3} and ev["trend"].n == 6
    curves = parts["curves"]
    # mu = 2 err: the slope of log mu equals the slope of log err, so the trend is right and the sign-error 0
    assert np.allclose(curves["beta_mu_base"], curves["beta_err_base"], atol=0.01)
    assert curves["correct_trend_base"].all() and (curves["sign_error_base"] == 0).all()


def test_a_planted_fragile_measure_gets_every_label():
    # the twin's mu is 5x larger and grows with n while the base's falls; mu does not see label noise
    fragile = (lambda n, r, e: 5 * (n / 100) ** 0.5, 0.0)
    parts = run(planted(lambda n, r, e: (n / 100) ** -0.5, {"lr_div3": fragile, "adam": fragile}))
    assert failed_labels(parts) == {"fragile-value", "fragile-trend", "fragile-scale", "data-blind"}
    curves = parts["curves"].set_index(["arm", "label_noise"])
    # exact power laws up to the 1% wobble: the fitted slopes are the planted exponents
    assert curves.loc[("adam", 0.0), "beta_mu_base"] == pytest.approx(-0.5, abs=0.02)
    assert curves.loc[("adam", 0.0), "beta_mu"] == pytest.approx(0.5, abs=0.02)
    assert curves["flip"].all() and curves["exponent_changed"].all()
    data = parts["data"].query("arm == @BASE")  # mu is flat across noise levels up to its 1% wobble
    assert data["tau"].mean() <= 0 and np.abs(data["elasticity"]).max() < 0.1


def test_only_the_exponent_changes_gives_fragile_scale_not_a_trend_flip():
    steeper = (lambda n, r, e: 2 * e * (n / 100) ** -1.0, 0.0)
    parts = run(planted(TRACK, {"lr_x3": steeper}))
    labels = failed_labels(parts)
    assert "fragile-scale" in labels and "fragile-trend" not in labels
    assert parts["curves"]["d_beta_mu"].to_numpy() == pytest.approx([-1.0] * 3, abs=0.03)


def test_a_constant_measure_has_no_trend_and_rounding_is_no_change():
    """A measure that is the same number on every model (norm.params on a zoo of one width): its learning curves'
    slopes are rounding (1e-14 against a standard error of 0), which was judged a trend, so trend and scaling
    passed on nothing; twins 1e-15 off (double rounding) were 'changed'. A real change of a deterministic value
    (1e-6) still is one."""
    const = planted(lambda n, r, e: 39168.0, {"lr_x3": (lambda n, r, e: 39168.0, 0.0)}, wobble_sd=0.0)
    parts = run(const)
    assert (parts["curves"]["beta_mu_base"] != 0).any()  # the rounding this guards against is there
    assert not parts["curves"]["base_trend"].any() and not parts["curves"]["exponent_changed"].any()
    c = checks_by(parts)
    assert c["trend"][0].failed is None and c["scaling"][0].failed is None
    assert {"trend", "scaling"} <= set(parts["missing"]) and parts["verdict"].startswith("data-blind; inconclusive")
    assert c["value"][0].failed is False

    def rounded(scale: float):
        return planted(lambda n, r, e: math.log(n), {"lr_x3": (lambda n, r, e: math.log(n) * (1 + scale), 0.0)},
                       wobble_sd=0.0)

    assert not run(rounded(1e-15))["cells"]["changed"].any()
    assert run(rounded(1e-6))["cells"]["changed"].all()
    assert "fragile-value" not in failed_labels(run(rounded(1e-15)))


def test_a_twin_that_moves_the_error_is_not_admitted_and_nothing_is_judged_on_it():
    parts = run(planted(TRACK, {"lr_x10": (lambda n, r, e: 50 * e, 0.1)}))
    assert parts["admitted"]["lr_x10"] == 0.0
    c = checks_by(parts)
    assert c["value"][0].failed is None and "no twin is admissible" in c["value"][0].detail
    assert c["trend"][0].failed is None and c["scaling"][0].failed is None
    assert set(parts["missing"]) == {"value", "trend", "scaling"}


def test_a_twin_kind_is_judged_only_on_enough_admitted_curves():
    """adam moves the error at the highest noise level: 2 admitted curves, too few to judge its flip; lr_x3 has 3
    and is judged alone. Its cells (8 admitted) are enough for the value part, which it fails."""
    flipped = lambda n, r, e: 2 * e * (n / 100) ** 0.8  # noqa: E731
    parts = run(planted(TRACK, {"lr_x3": (TRACK, 0.0), "adam": (flipped, lambda n, r: 0.1 if r == 0.2 else 0.0)}))
    ev = {e.part: e for e in parts["evidence"]}
    assert ev["trend"].by_twin == {"adam": 2, "lr_x3": 3} and ev["trend"].n == 3
    trend = checks_by(parts)["trend"][0]
    assert trend.failed is False and "not judged: adam (2 < 3)" in trend.detail
    assert failed_labels(parts) == {"fragile-value"}
    assert ev["value"].by_twin == {"adam": 8, "lr_x3": 12}
    block = assemble_report("m", "z", parts, control_table(2), Thresholds()).to_dict()
    assert block["evidence"]["trend"] == {"n": 3, "unit": "judged twin curves", "minimum": 3,
                                          "by_twin": {"adam": 2, "lr_x3": 3}}


def test_a_measure_that_fails_on_some_models_says_how_many_points_each_curve_lost():
    t = planted(TRACK, {"lr_x3": (TRACK, 0.0)})
    twin = t["arm"] == "lr_x3"
    # noise 0.1: 2 of 3 values missing at n=300 (1 point lost); noise 0.2: at n=300 and n=1000 (2 points lost)
    t.loc[twin & (t["label_noise"] == 0.1) & (t["train_size"] == 300) & (t["seed"] < 2), "mu"] = np.nan
    t.loc[twin & (t["label_noise"] == 0.2) & t["train_size"].isin([300, 1000]) & (t["seed"] < 2), "mu"] = np.nan
    parts = run(t)
    curves = parts["curves"].set_index("label_noise")
    assert curves["points"].to_dict() == {0.0: 4, 0.1: 3, 0.2: 2}
    assert curves["lost"].to_dict() == {0.0: 0, 0.1: 1, 0.2: 2}
    assert curves["no_value"].to_dict() == {0.0: 0, 0.1: 2, 0.2: 4}
    assert any("lr_x3@label_noise=0.2 lost 2" in n and "not judged" in n for n in parts["notes"])
    ev = {e.part: e for e in parts["evidence"]}
    assert ev["trend"].by_twin == {"lr_x3": 2}  # the curve with 2 points is not judged: 2 < 3 curves
    assert parts["missing"]["trend"].startswith("0 judged twin curves < 3 per twin kind (2 of 3 twin curves "
                                                "admitted with >= 3 points (1 with fewer points not judged)")
    # the admission does not depend on the measure: every twin cell is admitted on the test error alone
    assert parts["cells"]["admitted"].all()
    assert ev["value"].by_twin == {"lr_x3": 9}  # 3 cells without 2 values of mu in the twin arm


def test_data_sensitivity_counts_only_detectable_changes():
    sd = 0.01
    rows = []
    # three groups of 2 noise levels: A errors differ and mu follows; B errors differ, mu flat; C errors equal
    for n, d_err, d_mu in ((100, 0.1, 0.5), (300, 0.1, 0.0), (1000, 0.0, 0.5)):
        for r, k_err, k_mu in ((0.0, 0.0, 0.0), (0.2, d_err, d_mu)):
            for s, k in enumerate((-1, 0, 1)):
                rows.append({"arm": BASE, "train_size": n, "label_noise": r, "seed": s,
                             "err": 0.3 + k_err + k * sd, "mu": 1.0 + k_mu + k * sd})
    cells = cell_stats(pd.DataFrame(rows), ["train_size", "label_noise"])
    d = data_sensitivity(cells, ["train_size", "label_noise"], "log", 1.0, Thresholds()).set_index("train_size")
    assert d.loc[100, ["distinguishable", "judged", "agree", "oppose", "tau"]].tolist() == [1, 1, 1, 0, 1.0]
    assert d.loc[300, ["distinguishable", "judged", "agree", "oppose", "tau"]].tolist() == [1, 1, 0, 0, 0.0]
    assert d.loc[1000, "distinguishable"] == 0 and np.isnan(d.loc[1000, "tau"])
    assert d.loc[100, "elasticity"] == pytest.approx(np.log(1.5) / np.log(0.4 / 0.3))
    # oriented for measures where larger means a smaller gap
    flipped = data_sensitivity(cells, ["train_size", "label_noise"], "log", -1.0, Thresholds()).set_index("train_size")
    assert flipped.loc[100, "tau"] == -1.0


def test_learning_curve_slopes_and_their_standard_errors():
    t = planted(lambda n, r, e: 3.0 * n ** -0.7, {"adam": (lambda n, r, e: 3.0 * n ** -0.7, 0.0)})
    keys = ["train_size", "label_noise"]
    cells = cell_stats(t, keys)
    curves = learning_curves(cells, twin_cells(cells, keys, Thresholds(), "log"), keys, "log", 1.0, Thresholds())
    x = np.log(SIZES)
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    for _, c in curves.iterrows():
        g = t[(t["arm"] == BASE) & (t["label_noise"] == c["label_noise"])].groupby("train_size")["mu"]
        mean, sd = g.mean().loc[SIZES].to_numpy(), g.std().loc[SIZES].to_numpy()
        assert c["beta_mu_base"] == pytest.approx(np.polyfit(x, np.log(mean), 1)[0])
        assert c["beta_mu_base_se"] == pytest.approx(np.sqrt((w ** 2 * (sd / (mean * np.sqrt(3))) ** 2).sum()))
        assert c["beta_mu_base"] == pytest.approx(-0.7, abs=0.02)


def test_audit_refuses_values_that_are_not_the_zoos_before_any_work(digits_zoo, tmp_path, monkeypatch):
    """Values of another zoo gave a verdict on no value at all ('fragile-value; inconclusive: ...'); a path was an
    AttributeError from inside."""
    import importlib

    from genbench.errors import GenbenchError
    harness = importlib.import_module("genbench.harness.evaluate")
    monkeypatch.setattr(harness, "evaluate", lambda *a, **k: pytest.fail("audit computed values"))
    other = pd.DataFrame({"model_id": [f"elsewhere_{i}" for i in range(24)], "norm.params": 1.0})
    with pytest.raises(GenbenchError, match=r"24 model id\(s\) of the value table are not in zoo 'digits-mlp' "
                                            r"\(e\.g\. 'elsewhere_0'\): were the values computed on another zoo\?"):
        gb.audit("norm.params", digits_zoo, values=other)
    ours = pd.DataFrame({"model_id": digits_zoo.model_ids, "norm.params": 1.0})
    with pytest.raises(GenbenchError, match=r"holds 1 model id\(s\) more than once"):
        gb.audit("norm.params", digits_zoo, values=pd.concat([ours, ours.iloc[:1]]))
    with pytest.raises(GenbenchError, match=r"audit takes a value table .*pd\.read_parquet\(PATH\)\), got str"):
        gb.audit("norm.params", digits_zoo, values=str(tmp_path / "values.parquet"))
    with pytest.raises(GenbenchError, match=r"24 model id\(s\) of the value table are not in zoo"):
        gb.audit(gb.get_measure("norm.params").fn, digits_zoo, values=other)  # the function, as evaluate takes it


def test_a_zoo_without_twins_or_curves_says_what_it_cannot_compute():
    rng = np.random.default_rng(0)
    t = pd.DataFrame([{"arm": BASE, "width": w, "label_noise": r, "seed": s, "err": 0.2 + r + rng.normal(0, .01),
                       "mu": 1 + r} for w in (16, 32) for r in (0.0, 0.2) for s in SEEDS])
    parts = audit_table(t, axes=["width", "label_noise", "seed"])
    by_part = checks_by(parts)
    assert by_part["value"][0].failed is None and "no twins" in by_part["value"][0].detail
    assert by_part["trend"][0].failed is None and "train_size" in by_part["trend"][0].detail
    assert by_part["scaling"][0].failed is None
    assert all(c.failed is None for c in by_part["data"])  # 2 groups: too few to judge
    assert (parts["data"]["tau"] == 1.0).all()  # mu rises with noise as the error does
    assert any("no twins" in n for n in parts["notes"])
    assert set(parts["missing"]) == {"value", "trend", "scaling", "data"}
    assert parts["verdict"] == ("inconclusive (no value: 0 admitted twin cells < 6; no trend, scaling: 0 judged "
                                "twin curves < 3; no data: 2 baseline noise groups with distinguishable errors < 3)")


# ---------------------------------------------------------------- the verdict: robust only on enough evidence


def control_table(models: int, rv: float = 0.0) -> pd.DataFrame:
    """A rescaling control (part 6) on `models` models whose change under rescaling is rv."""
    return pd.DataFrame([{"model_id": f"m{i}", "alpha": a, "mu": 1.0, "mu_rescaled": 1.0 + rv, "rv": rv}
                         for i in range(models) for a in (0.1, 10.0)])


def report_of(t: pd.DataFrame, control: pd.DataFrame):
    return assemble_report("planted", "planted-zoo", run(t), control, Thresholds())


def test_robust_only_when_every_part_rests_on_enough_evidence_and_passes():
    t = planted(TRACK, {"lr_x3": (TRACK, 0.0), "adam": (TRACK, 0.0)})
    report = report_of(t, control_table(2))
    assert report.verdict == "robust" and report.missing == {}
    ev = {e.part: e.n for e in report.evidence}
    assert ev == {"value": 24, "trend": 6, "scaling": 6, "data": 4, "control": 2}
    for c in report.checks:  # each check states the evidence it rests on
        assert f"{ev[c.part]} " in c.detail, (c.part, c.detail)
    # the same table with the control on one model: every check still passes, but the control rests on too little
    thin = report_of(t, control_table(1))
    assert all(c.failed is False for c in thin.checks)
    assert thin.verdict == "inconclusive (no control: 1 control models < 2)"
    assert thin.to_dict()["missing"] == [{"part": "control", "reason": "1 control models < 2"}]


def test_too_few_curves_per_twin_kind_make_the_verdict_inconclusive_naming_trend_and_scaling():
    parts = run(planted(TRACK, {"lr_x10": (TRACK, 0.0)}, noise=[0.0, 0.2]))  # 2 noise levels: 2 curves
    assert all(c.failed is not True for c in parts["checks"])
    assert set(parts["missing"]) == {"trend", "scaling"}
    assert parts["verdict"] == "inconclusive (no trend, scaling: 0 judged twin curves < 3 per twin kind)"
    assert parts["missing"]["trend"].startswith("0 judged twin curves < 3 per twin kind (2 of 2 twin curves "
                                                "admitted with >= 3 points")
    assert parts["missing"]["trend"].endswith("lr_x10: 2)")
    # with a third noise level the same measure is judged on its trend and scaling
    assert run(planted(TRACK, {"lr_x10": (TRACK, 0.0)}))["missing"] == {}


def test_a_failed_part_and_a_missing_part_are_both_in_the_verdict():
    # the twin's measure is 5x the base's at the same test error and slope: a value failure, trend and scale intact
    report = report_of(planted(TRACK, {"lr_x10": (lambda n, r, e: 10 * e, 0.0)}, noise=[0.0, 0.2]),
                       control_table(2))
    assert failed_labels({"checks": report.checks}) == {"fragile-value"}
    assert report.verdict == "fragile-value; inconclusive: trend, scaling"
    block = report.to_dict()
    assert block["verdict"] == report.verdict
    assert [m["part"] for m in block["missing"]] == ["trend", "scaling"]
    assert all(m["reason"].startswith("0 judged twin curves < 3 per twin kind") for m in block["missing"])
    assert block["evidence"]["trend"] == {"n": 0, "unit": "judged twin curves", "minimum": 3,
                                          "by_twin": {"lr_x10": 2}}
    assert block["evidence"]["value"]["by_twin"] == {"lr_x10": 8}
    assert "value" not in report.missing


def test_the_report_carries_the_seed_means_compactly():
    t = planted(TRACK, {"lr_x3": (TRACK, 0.0)})
    block = report_of(t, control_table(2)).to_dict()
    means = pd.DataFrame(block["means"])
    assert list(means.columns) == ["arm", "train_size", "label_noise", "n", "mu", "mu_se", "n_err", "err", "err_se"]
    assert len(means) == 2 * len(SIZES) * len(NOISE)
    expect = t.groupby(["arm", "train_size", "label_noise"])["mu"].mean()
    for _, r in means.iterrows():
        assert r["mu"] == pytest.approx(expect[(r["arm"], r["train_size"], r["label_noise"])], rel=1e-5)


# ---------------------------------------------------------------- signatures: cross-fitted, never in-sample


def test_signature_predictions_are_cross_fitted_and_twins_share_their_baselines_fold():
    from sklearn.base import clone

    from genbench.scoring.audit import _signature_fit
    rng = np.random.default_rng(0)
    n_base, p = 30, 21
    x_base = rng.lognormal(size=(n_base, p))
    x = np.vstack([x_base, x_base * rng.lognormal(0, 0.05, size=(n_base, p))])  # twins next to their baselines
    gap = np.log(x[:, 0]) + rng.normal(0, 0.3, len(x))
    fold = np.tile(np.arange(n_base) % 3, 2)  # leave-one-seed-out: a twin takes its baseline's fold
    is_base = np.arange(2 * n_base) < n_base
    pred, full = cross_fit(x, gap, fold, is_base, "log")
    for k in range(3):
        fit = clone(_signature_fit()).fit(np.log(x[is_base & (fold != k)]), gap[is_base & (fold != k)])
        assert np.allclose(pred[fold == k], fit.predict(np.log(x[fold == k])))
    # the baselines are out of sample like the twins: no better fitted than the twins are
    in_sample = full.predict(np.log(x))
    resid = lambda p_, sel: float(np.mean((gap[sel] - p_[sel]) ** 2))  # noqa: E731
    assert resid(in_sample, is_base) < resid(pred, is_base)
    assert resid(pred, is_base) == pytest.approx(resid(pred, ~is_base), rel=0.5)


# ---------------------------------------------------------------- on the real zoo: planted controls

# A reduced mnist1d-fragility: 3 train sizes x 3 label-noise levels x 3 seeds, one twin (lr x3): 54 models. The
# recipe's SGD baseline needs hundreds of epochs on MNIST-1D; Adam reaches a learning curve in 40, so the reduced
# build uses it (and a narrower MLP, a smaller test set) to build in well under a minute.
REDUCED = {"dataset.num_samples": 4000, "dataset.train_split": 0.5, "arch.width": 64,
           "grid.train_size": [100, 250, 625], "grid.label_noise": [0.0, 0.2, 0.4], "grid.seed": [0, 1, 2],
           "train.epochs": 40, "train.optimizer": "adam", "train.lr": 0.005, "train.momentum": 0.0,
           "twins": [{"name": "lr_x3", "scale": {"lr": 3}}]}


@pytest.fixture(scope="session")
def fragility_zoo(home, tmp_path_factory):
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny stacked MLPs: one thread is faster, and no worse on a shared machine
    try:
        return gb.build_zoo("mnist1d-fragility", tmp_path_factory.mktemp("fragility") / "mnist1d-fragility",
                            overrides=REDUCED, progress=False)
    finally:
        torch.set_num_threads(threads)


def error_of(zoo):
    """The zoo's test error of a network, computed as the build computed test_acc."""
    from genbench.zoo.train import evaluate_model
    x, y = zoo.test_data(zoo.model_ids[0])
    return lambda model: 1.0 - evaluate_model(model, x, y)[0]


def prediction_noise(zoo):
    """A standard normal draw that is a function of the network's function: seeded by a hash of its predicted
    classes on 512 test inputs (unchanged by the rescaling control, different for every trained network)."""
    import torch
    x, _ = zoo.test_data(zoo.model_ids[0])

    def z(model) -> float:
        with torch.no_grad():
            model.eval()
            pred = model(x[:512]).argmax(1).numpy().astype(np.int8)
        return float(np.random.default_rng(int.from_bytes(hashlib.sha256(pred.tobytes()).digest()[:8], "little"))
                     .standard_normal())
    return z


@pytest.fixture(scope="module")
def controls(fragility_zoo):
    """Planted measures on the real zoo, each computed by the harness from the network: the test error, the
    test error times exp(sigma z) (z a standard normal drawn per network) and a random exp(z)."""
    err, z = error_of(fragility_zoo), prediction_noise(fragility_zoo)
    names = []

    def register(name, fn):
        gb.register_measure(name, kind="scalar", citation="planted control", higher_means="larger_gap",
                            replace=True)(fn)
        names.append(name)
        return name
    made = {"err": register("control.test_error", lambda ctx: float(err(ctx.model))),
            "random": register("control.random", lambda ctx: float(np.exp(z(ctx.model))))}
    for sigma in NOISY:
        made[sigma] = register("control.noisy_" + f"{sigma:g}".replace(".", "_"),
                               lambda ctx, s=sigma: float(err(ctx.model) * np.exp(s * z(ctx.model))))
    yield made
    for name in names:
        unregister_measure(name)


NOISY = (0.0005, 0.5)  # log-scale sizes of the planted noise: far below and far above the data part's margin


def audit_of(name, zoo, **kw):
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return gb.audit(name, zoo, progress=False, cache=False, control_models=2, **kw)
    finally:
        torch.set_num_threads(threads)


def test_the_test_error_itself_is_robust_on_the_real_zoo(fragility_zoo, controls):
    report = audit_of(controls["err"], fragility_zoo)
    table = fragility_zoo.table
    # the harness's value is the recorded test error, so the audit compares the test error with itself
    values = report.means.set_index(["arm", "train_size", "label_noise"])
    assert np.allclose(values["mu"], values["err"], rtol=0, atol=1e-12)
    assert report.verdict == "robust", (report.missing, [c for c in report.checks if c.failed])
    ev = {e.part: e.n for e in report.evidence}
    assert ev == {"value": 9, "trend": 3, "scaling": 3, "data": 3, "control": 2}
    assert report.admitted["lr_x3"] == 1.0
    assert len(table) == 54 and set(table["perturbation"].dropna()) == {"lr_x3"}


def data_margins(zoo) -> list[float]:
    """For each pair of noise levels (at fixed train size) whose baseline test errors differ detectably, the
    log-noise size sigma* at which the planted measure err * exp(sigma z) stops detecting that change: its
    standard error grows to |d err| / t, approximately sqrt(se_lo^2 + se_hi^2 + sigma^2 (err_lo^2 + err_hi^2)/S)."""
    t = zoo.table[zoo.table["twin_of"].isna() | (zoo.table["twin_of"].astype(str) == "")]
    g = (1 - t["test_acc"]).groupby([t["hp.train_size"], t["hp.label_noise"]])
    mean, se, n = g.mean(), g.std() / np.sqrt(g.count()), g.count()
    out = []
    for size in sorted(t["hp.train_size"].unique()):
        levels = sorted(t["hp.label_noise"].unique())
        for i, lo in enumerate(levels):
            for hi in levels[i + 1:]:
                a, b = (size, lo), (size, hi)
                crit = student_t.ppf(0.975, n[a] + n[b] - 2)
                d, s2 = abs(mean[b] - mean[a]), se[a] ** 2 + se[b] ** 2
                if d > crit * np.sqrt(s2):
                    out.append(float(np.sqrt((d ** 2 / crit ** 2 - s2) * n[a] / (mean[a] ** 2 + mean[b] ** 2))))
    return out


def test_the_test_error_with_noise_passes_or_fails_where_its_size_says(fragility_zoo, controls):
    margins = data_margins(fragility_zoo)
    small, large = NOISY
    assert len(margins) >= 3 and small < min(margins) / 10 and large > 3 * max(margins), margins
    quiet, loud = audit_of(controls[small], fragility_zoo), audit_of(controls[large], fragility_zoo)
    # far below every margin: it sees every change the test error sees, and is robust like the test error
    assert quiet.verdict == "robust", quiet.missing
    assert next(c for c in quiet.checks if c.part == "data").value == 1.0
    # far above: blind to the data complexity, no detectable learning curve; noise is not value fragility
    assert loud.verdict == "data-blind; inconclusive: trend, scaling"
    value = next(c for c in loud.checks if c.part == "value")
    assert value.failed is False and value.value < 0.5
    assert next(c for c in loud.checks if c.part == "data").value <= 0.5


def test_a_random_measure_is_data_blind_and_its_learning_curves_inconclusive(fragility_zoo, controls):
    """A random number cannot be value-fragile (its distribution does not move with training) and has no trend
    or exponent to keep: those parts are honestly inconclusive. It fails where an uninformative measure must:
    it does not see the data complexity the test error sees."""
    report = audit_of(controls["random"], fragility_zoo)
    assert report.verdict == "data-blind; inconclusive: trend, scaling"
    by = {c.part: c for c in report.checks if c.part != "data"}
    tau = next(c for c in report.checks if c.part == "data")
    assert by["value"].failed is False and by["control"].failed is False
    assert tau.failed and tau.value <= 0.5
    assert "without a detectable baseline trend" in report.missing["trend"]


def table_values(zoo, name: str, fn) -> pd.DataFrame:
    """Per-model values fn(err, arm) from the zoo's table (arm: 'base' or the twin's name)."""
    t = zoo.table
    arm = t["perturbation"].where(t["twin_of"].notna() & (t["twin_of"].astype(str) != ""), BASE).astype(str)
    return pd.DataFrame({"model_id": t["model_id"], name: [fn(1 - a, b) for a, b in zip(t["test_acc"], arm)]})


@pytest.fixture(scope="module")
def error_measure(fragility_zoo):
    err = error_of(fragility_zoo)
    gb.register_measure("control.twin_planted", kind="scalar", citation="planted control",
                        higher_means="larger_gap", replace=True)(lambda ctx: float(err(ctx.model)))
    yield "control.twin_planted"
    unregister_measure("control.twin_planted")


@pytest.mark.parametrize("shift, fails", [(1e-4, False), (0.3, True)])
def test_a_twin_only_shift_fails_the_value_part_where_it_exceeds_the_seed_noise(fragility_zoo, error_measure,
                                                                                   shift, fails):
    values = table_values(fragility_zoo, error_measure, lambda e, arm: e * (1 + shift * (arm != BASE)))
    report = audit_of(error_measure, fragility_zoo, values=values)
    value = next(c for c in report.checks if c.part == "value")
    assert value.failed is fails and (report.verdict == "fragile-value") is fails
    if not fails:
        assert report.verdict == "robust"


def test_a_twin_whose_learning_curve_reverses_fails_the_trend(fragility_zoo, error_measure):
    values = table_values(fragility_zoo, error_measure, lambda e, arm: e if arm == BASE else 1 / e)
    report = audit_of(error_measure, fragility_zoo, values=values)
    assert {"fragile-trend", "fragile-scale", "fragile-value"} <= {c.label for c in report.checks if c.failed}
    assert report.curves["flip"].all()


# ---------------------------------------------------------------- the learning-curve plot


def svg_series(svg: str) -> dict[str, list[tuple[float, float]]]:
    """The vertices of each plotted series (group id 'curve-STAT-ARM-PANEL') of a matplotlib SVG."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        gid = g.get("id", "")
        if re.fullmatch(r"curve-(mu|err)-.+-\d+", gid):
            path = next(g.iter("{http://www.w3.org/2000/svg}path"))
            nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", path.get("d"))]
            out[gid] = list(zip(nums[::2], nums[1::2]))
    return out


def test_audit_plot_draws_one_series_per_arm_at_the_seed_means(fragility_zoo, controls, tmp_path):
    from typer.testing import CliRunner

    from genbench.cli import app
    from genbench.leaderboard.curves import curve_figure, gid, panels
    out = tmp_path / "curves.svg"
    res = CliRunner().invoke(app, ["audit", controls["err"], "--zoo", str(fragility_zoo.root), "--control-models",
                                   "0", "--plot", str(out), "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    svg = out.read_text()
    series = svg_series(svg)
    t = fragility_zoo.table
    arm = t["perturbation"].where(t["twin_of"].notna() & (t["twin_of"].astype(str) != ""), BASE).astype(str)
    expect = (1 - t["test_acc"]).groupby([arm, t["hp.label_noise"], t["hp.train_size"]]).mean()
    noise, sizes = sorted(t["hp.label_noise"].unique()), sorted(t["hp.train_size"].unique())
    # one series per arm in each panel, for the measure and for the test error
    assert set(series) == {gid(s, a, i) for s in ("mu", "err") for a in (BASE, "lr_x3") for i in range(3)}
    # the drawn vertices, mapped back through the figure's axes, are the seed means computed here
    import json
    means = pd.DataFrame(json.loads((tmp_path / "a.json").read_text())["means"])
    fig = curve_figure(means, measure=controls["err"])
    fig.set_dpi(72)  # the SVG backend draws at 72 dpi
    height = fig.get_figheight() * 72
    assert [p["label_noise"] for p in panels(means)] == noise
    for (i, r), stat in ((ij, s) for ij in enumerate(noise) for s in ("mu", "err")):
        ax = fig.axes[i + (0 if stat == "mu" else len(noise))]
        for a in (BASE, "lr_x3"):
            pts = np.array(series[gid(stat, a, i)])
            pts[:, 1] = height - pts[:, 1]
            data = ax.transData.inverted().transform(pts)
            assert np.allclose(data[:, 0], sizes, rtol=1e-3)
            assert np.allclose(data[:, 1], [expect[(a, r, n)] for n in sizes], rtol=1e-3)
    # PNG by extension; anything else is refused before the audit runs
    png = tmp_path / "curves.png"
    res = CliRunner().invoke(app, ["audit", controls["err"], "--zoo", str(fragility_zoo.root), "--control-models",
                                   "0", "--plot", str(png)], env={"COLUMNS": "80"})
    assert res.exit_code == 0 and "\u2026" not in res.output, res.output  # at 80 columns nothing is cut short
    import matplotlib.image
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and matplotlib.image.imread(png).shape[0] > 100
    bad = CliRunner().invoke(app, ["audit", controls["err"], "--zoo", str(fragility_zoo.root), "--plot",
                                   str(tmp_path / "curves.pdf")])
    assert bad.exit_code != 0 and ".svg or .png" in str(bad.exception)


# ---------------------------------------------------------------- on real networks: the rescaling control


@pytest.fixture(scope="module")
def planted_measures():
    import torch

    @gb.register_measure("audittest.sqsum", kind="scalar", citation="planted fragile", replace=True)
    def sqsum(ctx):
        return float(sum((p.detach() ** 2).sum() for p in ctx.model.parameters()))

    @gb.register_measure("audittest.froprod", kind="scalar", citation="planted invariant", replace=True)
    def froprod(ctx):  # product of Frobenius norms after folding batchnorm: invariant under the rescaling
        mats = [layer.weight for layer in weight_layers(ctx.model)]
        return float(torch.prod(torch.stack([torch.linalg.norm(w.detach()) for w in mats])))

    yield "audittest.sqsum", "audittest.froprod"
    unregister_measure("audittest.sqsum")
    unregister_measure("audittest.froprod")


def test_the_rescaling_control_flags_a_planted_fragile_measure_and_passes_an_invariant_one(digits_zoo,
                                                                                           planted_measures):
    fragile, invariant = planted_measures
    bad = gb.audit(fragile, digits_zoo, control_models=2, progress=False, cache=False)
    good = gb.audit(invariant, digits_zoo, control_models=2, progress=False, cache=False)
    ctl_bad = next(c for c in bad.checks if c.part == "control")
    ctl_good = next(c for c in good.checks if c.part == "control")
    assert ctl_bad.failed and "fragile-value" in bad.verdict
    assert ctl_good.failed is False and ctl_good.value < 1e-5
    assert set(bad.control["alpha"]) == {0.1, 10.0} and bad.control["model_id"].nunique() == 2
    # the digits zoo has no twins: the report says so instead of judging, and the verdict is not 'robust'
    assert any(c.part == "trend" and c.failed is None for c in good.checks)
    assert good.to_dict()["verdict"] == good.verdict
    assert good.verdict != "robust" and good.verdict.endswith("inconclusive: value, trend, scaling") \
        or good.verdict.startswith("inconclusive (no value: 0 admitted twin cells < 6; no trend, scaling: 0 "
                                   "judged twin curves < 3")
    assert {"value", "trend", "scaling"} <= set(good.missing)
    assert good.missing["value"] == "0 admitted twin cells < 6 (the zoo has no twins)"
    assert "control" not in good.missing
    assert good.to_dict()["missing"] == [{"part": k, "reason": v} for k, v in good.missing.items()]
    assert bad.verdict.startswith("fragile-value") and bad.verdict.endswith("inconclusive: value, trend, scaling")


def test_the_audit_command_on_a_zoo_without_twins_refuses_in_one_line(digits_zoo, fragility_zoo, tmp_path):
    """Without twins the audit can only be inconclusive: the command says so in one line and runs nothing (the
    API still reports every missing part, as the test above shows)."""
    from typer.testing import CliRunner

    import genbench as gb
    from genbench.cli import app
    from genbench.leaderboard.curves import write_curve_plot
    from genbench.scoring.audit import has_twins
    assert not has_twins(digits_zoo) and has_twins(fragility_zoo)
    out = tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit", "norm.path", "--zoo", "digits-mlp", "--json", str(out)])
    assert res.exit_code != 0 and not out.exists() and not res.output.strip()
    message = str(res.exception)
    assert message.startswith("zoo 'digits-mlp' has no twins") and "`--zoo mnist1d-fragility`" in message
    assert "\n" not in message
    res = CliRunner().invoke(app, ["audit", "norm.pth", "--zoo", "digits-mlp"])  # the misspelt name said first
    assert str(res.exception).startswith("unknown measure 'norm.pth'. Did you mean 'norm.path'")
    # no train-size axis either: a plot of its learning curves says why there is none
    report = gb.audit("norm.path", digits_zoo, control_models=0, progress=False)
    with pytest.raises(gb.GenbenchError, match="no learning curves to plot"):
        write_curve_plot(report, tmp_path / "c.svg", measure="norm.path", form=report.form)


def test_a_negative_control_count_is_refused_before_the_audit():
    """--control-models -1 used to run and report control_models=0; 0 (skip the control) stays allowed."""
    from typer.testing import CliRunner

    from genbench.cli import app
    from genbench.errors import GenbenchError
    bad = CliRunner().invoke(app, ["audit", "norm.path", "--control-models", "-1"])
    assert isinstance(bad.exception, GenbenchError), bad.output
    assert str(bad.exception) == "--control-models must be 0 or more (0 skips the rescaling control), got -1"


def test_a_plot_write_that_dies_leaves_the_old_plot(tmp_path, monkeypatch):
    """Planted: `audit --plot p.png` killed while matplotlib wrote left p.png at 0 bytes (savefig wrote in place);
    the plot is now written beside it and renamed, so the previous plot stays whole."""
    from pathlib import Path

    import genbench.leaderboard.curves as curves

    class Dying:
        def savefig(self, target, **kw):
            Path(target).write_bytes(b"\x89PNG half")
            raise KeyboardInterrupt

    class Whole:
        def savefig(self, target, **kw):
            assert kw["format"] == "png" and Path(target).name != "p.png"  # written beside, then renamed
            Path(target).write_bytes(b"\x89PNG whole")

    plot = tmp_path / "p.png"
    monkeypatch.setattr(curves, "curve_figure", lambda *a, **k: Whole())
    curves.write_curve_plot(None, plot)
    monkeypatch.setattr(curves, "curve_figure", lambda *a, **k: Dying())
    with pytest.raises(KeyboardInterrupt):
        curves.write_curve_plot(None, plot)
    assert plot.read_bytes() == b"\x89PNG whole" and [p.name for p in tmp_path.iterdir()] == ["p.png"]


@pytest.fixture(scope="module")
def partial_fragility(home, tmp_path_factory):
    """The reduced fragility zoo cut after 18 of its 54 models (an interrupted build)."""
    return gb.build_zoo("mnist1d-fragility", tmp_path_factory.mktemp("partial") / "mnist1d-fragility",
                        overrides=REDUCED, limit=18, progress=False)


def test_a_partial_audit_zoo_is_refused_or_said_and_the_report_cites_its_table(partial_fragility, fragility_zoo,
                                                                                digits_zoo):
    """An interrupted build's verdict (other cells, another verdict) was printed and recorded as the audit's."""
    from typer.testing import CliRunner

    from genbench.cli import app
    from genbench.cli.options import audit_choice
    assert not partial_fragility.complete and len(partial_fragility) == 18
    with pytest.raises(gb.GenbenchError, match=r"audit zoo 'mnist1d-fragility' is partial: 18 of 54 models; finish "
                                               r"it with .*pass allow_partial=True to audit it anyway"):
        gb.audit("norm.path", partial_fragility, control_models=0, progress=False)
    report = gb.audit("norm.path", partial_fragility, control_models=0, progress=False, allow_partial=True)
    assert report.notes[0] == "the audit zoo is partial (18 of 54 models): the verdict rests on those models only"
    assert report.to_dict()["zoo_table_sha256"] == partial_fragility.table_sha256
    whole = gb.audit("norm.path", fragility_zoo, control_models=0, progress=False).to_dict()
    assert whole["zoo_table_sha256"] == fragility_zoo.table_sha256 != partial_fragility.table_sha256
    res = CliRunner().invoke(app, ["audit", "norm.path", "--zoo", str(partial_fragility.root)])
    assert res.exit_code != 0 and "pass --allow-partial to audit it anyway" in str(res.exception)
    assert "\n" not in str(res.exception)
    # leaderboard run / submit --audit-zoo: refused before the scoring, as `genbench audit` refuses
    with pytest.raises(gb.GenbenchError, match=r"--audit-zoo .*: audit zoo 'mnist1d-fragility' is partial"):
        audit_choice(False, str(partial_fragility.root))
    with pytest.raises(gb.GenbenchError, match=r"--audit-zoo .*: zoo 'digits-mlp' has no twins"):
        audit_choice(False, str(digits_zoo.root))
    assert audit_choice(False, str(fragility_zoo.root)) == str(fragility_zoo.root)


@pytest.mark.parametrize("field, value, says", [
    ("alpha", 1.5, "between 0 and 1"), ("alpha", 0, "between 0 and 1"), ("alpha", "0.05", "a finite number"),
    ("err_abs_tol", float("nan"), "a finite number"), ("scr", -1, "a share between 0 and 1"),
    ("min_cells", 0, "1 or more"), ("min_points", 2.5, "a finite whole number"), ("elasticity", True, "number"),
])
def test_thresholds_no_audit_can_mean_are_refused_naming_the_field(field, value, says):
    """Thresholds(alpha=1.5) gave verdicts; alpha='0.05' a TypeError from inside a part."""
    with pytest.raises(gb.GenbenchError, match=rf"Thresholds\({field}=.*\): {field} must be .*{says}"):
        Thresholds(**{field: value})


def test_the_audit_says_what_it_rests_on_per_twin_kind_and_when_nothing_has_a_value():
    """The evidence line said 'needs >= 6' of a minimum that holds per twin kind, and '1 control models'; a table
    without any value got the note 'the measure takes values <= 0'."""
    import io

    from rich.console import Console

    from genbench.leaderboard.terminal import print_verdict
    parts = run(planted(TRACK, {"lr_x3": (TRACK, 0.0)}))
    control = pd.DataFrame([{"model_id": "m", "alpha": 10.0, "mu": 1.0, "mu_rescaled": 1.0, "rv": 0.0, "tol": 0.05}])
    out = io.StringIO()
    print_verdict(Console(file=out, width=200), assemble_report("m", "z", parts, control, Thresholds()))
    text = out.getvalue()
    assert "value rests on 12 admitted twin cells (needs >= 6 per twin kind)" in text
    assert "control rests on 1 control model (needs >= 2)" in text
    empty = planted(TRACK, {"lr_x3": (TRACK, 0.0)}).assign(mu=np.nan)
    assert run(empty)["notes"][0] == "no model has a value of the measure: no part could be judged"


def test_a_submission_entry_is_named_as_such_and_a_name_in_capitals_finds_its_measure():
    from typer.testing import CliRunner

    from genbench.cli import app
    res = CliRunner().invoke(app, ["audit", "gradnoise.noise_scale_log"])
    assert str(res.exception).startswith("gradnoise.noise_scale_log is the entry of the submission "
                                         "submissions/gradient_noise_scale, not a registered measure")
    res = CliRunner().invoke(app, ["audit", "NORM.PATH"])
    assert "Did you mean 'norm.path'?" in str(res.exception)


def test_reaudit_remakes_only_the_audit_block_of_a_record(fragility_zoo, digits_zoo, tmp_path):
    """After the audit changed (the rounding rule), records were re-made whole, which needs the scored zoo and its
    trainings; `leaderboard reaudit` needs only the audit zoo, and keeps the scores and values."""
    import json

    from typer.testing import CliRunner

    from genbench.cli import app
    from genbench.entries.reaudit import reaudit_record
    from genbench.entries.run import run_entry
    rec = run_entry("norm.path", digits_zoo, audit_zoo=str(fragility_zoo.root), n_boot=50, progress=False)
    fresh = rec["audit"]
    stale = {**rec, "audit": {**fresh, "verdict": "robust", "checks": [], "missing": []}}
    path = tmp_path / "digits-mlp" / "norm.path.json"
    path.parent.mkdir()
    path.write_text(json.dumps(stale))
    res = CliRunner().invoke(app, ["leaderboard", "reaudit", "--results", str(tmp_path)])
    assert res.exit_code == 0, res.output
    new = json.loads(path.read_text())
    assert new["audit"]["verdict"] == fresh["verdict"] != "robust"
    assert new["audit"]["checks"] == json.loads(json.dumps(fresh["checks"]))
    assert new["scores"] == json.loads(json.dumps(rec["scores"]))
    assert new["values"] == json.loads(json.dumps(rec["values"]))
    assert new["provenance"]["reaudited"]["command"] == "genbench leaderboard reaudit"
    with pytest.raises(gb.GenbenchError, match=r"a submission's record: its audit runs in the sandbox; `genbench "
                                               r"submit submissions/x` re-makes it"):
        reaudit_record({**rec, "submission": {"path": "submissions/x"}})
    # a folder goes on past a submission's record (skipped) and a record audited on another build (refused: the new
    # block would cite this build and hide the swap); the command then exits 1, the other records re-made
    sub = tmp_path / "digits-mlp" / "a_submission.json"
    sub.write_text(json.dumps({**stale, "name": "a_submission", "submission": {"path": "submissions/x"}}))
    other = tmp_path / "digits-mlp" / "norm.other.json"
    other.write_text(json.dumps({**stale, "name": "norm.other", "audit": {**fresh, "zoo_table_sha256": "00" * 32}}))
    path.write_text(json.dumps(stale))
    res = CliRunner().invoke(app, ["leaderboard", "reaudit", "--results", str(tmp_path)])
    flat = " ".join(res.output.split())
    assert res.exit_code == 1 and "re-audited 1 record(s)" in flat and "1 could not be" in flat, flat
    assert "a submission's record, skipped" in flat and "with table 000000000000, the one here has" in flat, flat
    assert json.loads(path.read_text())["audit"]["verdict"] == fresh["verdict"]
    assert json.loads(sub.read_text())["audit"]["verdict"] == "robust"  # left as it was
