"""The fragility audit: its statistics on planted synthetic learning curves (values known by construction),
and the rescaling control on real networks (a planted fragile measure is flagged, an invariant one passes)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import genbench as gb
from genbench.scoring.audit import (BASE, Thresholds, _cells, assemble_report, audit_table, data_sensitivity,
                                    learning_curves)
from genbench.measures.registry import unregister_measure
from genbench.measures.weights import weight_layers
from genbench.scoring.rank import hoeffding_weight

SIZES = [100, 300, 1000, 3000]
NOISE = [0.0, 0.2]
SEEDS = [0, 1, 2]
N_TEST = 10_000


def err_of(n: float, noise: float) -> float:
    return 0.3 * (n / 100) ** -0.3 + 0.5 * noise


def planted(mu_base, mu_twin, twin_err_shift: float = 0.0, seed: int = 0, twins=("lr_x10",)) -> pd.DataFrame:
    """A learning-curve zoo table: base + twins, seed noise on the error, mu from the given functions."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        for r in NOISE:
            for s in SEEDS:
                e = err_of(n, r) + rng.normal(0, 0.004)
                e_twin = e + twin_err_shift + rng.normal(0, 0.001)
                wobble = 1 + rng.normal(0, 0.01)
                rows.append({"arm": BASE, "train_size": n, "label_noise": r, "seed": s, "err": e,
                             "mu": mu_base(n, r, e) * wobble})
                rows += [{"arm": arm, "train_size": n, "label_noise": r, "seed": s, "err": e_twin,
                          "mu": mu_twin(n, r, e_twin) * wobble} for arm in twins]
    return pd.DataFrame(rows)


AXES = ["train_size", "label_noise", "seed"]


def run(t: pd.DataFrame, **kw):
    return audit_table(t, axes=AXES, n_test=N_TEST, n_boot=300, **kw)


def checks_by(parts) -> dict[tuple[str, str], object]:
    return {(c.part, c.statistic): c for c in parts["checks"]}


def failed_labels(parts) -> set[str]:
    return {c.label for c in parts["checks"] if c.failed}


def test_a_measure_that_tracks_the_error_is_robust():
    parts = run(planted(lambda n, r, e: 2 * e, lambda n, r, e: 2 * e))
    assert parts["admitted"]["lr_x10"] == 1.0
    assert failed_labels(parts) == set()
    assert all(c.failed is False for c in parts["checks"]), [c for c in parts["checks"] if c.failed is not False]
    curves = parts["curves"]
    base = curves[curves["arm"] == BASE]
    # mu = 2 err: the slope of log mu equals the slope of log err, so the trend is right and the sign-error 0
    assert np.allclose(base["beta_mu"], base["beta_err"], atol=0.02)
    assert base["correct_trend"].all() and (base["sign_error"] == 0).all()


def test_a_planted_fragile_measure_gets_every_label():
    # the twin's mu is 5x larger and grows with n while the base's falls; mu does not see label noise
    parts = run(planted(lambda n, r, e: (n / 100) ** -0.5, lambda n, r, e: 5 * (n / 100) ** 0.5))
    assert failed_labels(parts) == {"fragile-value", "fragile-trend", "fragile-scale", "data-blind"}
    curves = parts["curves"].set_index(["arm", "label_noise"])
    # exact power laws up to the 1% wobble: the fitted slopes are the planted exponents
    assert curves.loc[(BASE, 0.0), "beta_mu"] == pytest.approx(-0.5, abs=0.02)
    assert curves.loc[("lr_x10", 0.0), "beta_mu"] == pytest.approx(0.5, abs=0.02)
    assert curves.loc[("lr_x10", 0.0), "p_flip"] == 1.0
    data = parts["data"]
    assert np.abs(data[data["arm"] == BASE]["elasticity"]).max() < 0.1


def test_only_the_exponent_changes_gives_fragile_scale_not_a_trend_flip():
    parts = run(planted(lambda n, r, e: 2 * e, lambda n, r, e: 2 * e * (n / 100) ** -1.0))
    labels = failed_labels(parts)
    assert "fragile-scale" in labels and "fragile-trend" not in labels
    twin = parts["curves"].query("arm == 'lr_x10'")
    assert twin["d_alpha_mu"].to_numpy() == pytest.approx([1.0, 1.0], abs=0.05)


def test_a_twin_that_moves_the_error_is_not_admitted_and_nothing_is_judged_on_it():
    parts = run(planted(lambda n, r, e: 2 * e, lambda n, r, e: 50 * e, twin_err_shift=0.1))
    assert parts["admitted"]["lr_x10"] == 0.0
    c = checks_by(parts)
    value = next(v for k, v in c.items() if k[0] == "value")
    trend = next(v for k, v in c.items() if k[0] == "trend")
    assert value.failed is None and "admissible" in value.detail
    assert trend.failed is None


def test_error_tolerance_is_seed_standard_errors_floored_by_hoeffding_and_capped():
    th = Thresholds()
    t = planted(lambda n, r, e: e, lambda n, r, e: e, twin_err_shift=0.0)
    cells = run(t)["cells"]
    floor = 2 * np.sqrt(np.log(2 / 0.05) / (2 * N_TEST))
    g = t.groupby(["arm", "train_size", "label_noise"])["err"]
    sd, mean = g.std(), g.mean()
    for _, c in cells.iterrows():
        key_b, key_t = (BASE, c["train_size"], c["label_noise"]), ("lr_x10", c["train_size"], c["label_noise"])
        se = np.sqrt(sd[key_b] ** 2 / 3 + sd[key_t] ** 2 / 3)
        assert c["err_tol"] == pytest.approx(min(max(2 * se, floor), th.err_abs_tol))
        assert c["admitted"] == (abs(mean[key_t] - mean[key_b]) <= c["err_tol"])


def test_data_sensitivity_with_two_levels_is_a_hoeffding_weighted_sign_agreement():
    t = pd.DataFrame({"arm": BASE, "train_size": [100, 100, 300, 300], "label_noise": [0.0, 0.2] * 2,
                      "seed": 0, "err": [0.30, 0.40, 0.20, 0.201], "mu": [1.0, 2.0, 3.0, 1.0]})
    cells = _cells(t, ["train_size", "label_noise"])
    d = data_sensitivity(cells, ["train_size", "label_noise"], "log", 1.0, N_TEST).set_index("train_size")
    assert d.loc[100, "tau"] == 1.0 and d.loc[300, "tau"] == -1.0
    assert d.loc[100, "weight"] == pytest.approx(hoeffding_weight(np.array([0.1]), N_TEST)[0])
    assert d.loc[300, "weight"] == 0.0  # 0.001 apart: indistinguishable with 10k test points
    assert d.loc[100, "elasticity"] == pytest.approx(np.log(2) / np.log(0.4 / 0.3))
    # oriented for measures where larger means a smaller gap
    flipped = data_sensitivity(cells, ["train_size", "label_noise"], "log", -1.0, N_TEST).set_index("train_size")
    assert flipped.loc[100, "tau"] == -1.0


def test_learning_curve_slopes_are_least_squares_on_log_log():
    t = planted(lambda n, r, e: 3.0 * n ** -0.7, lambda n, r, e: 3.0 * n ** -0.7)
    t["mu"] = 3.0 * t["train_size"] ** -0.7  # no wobble: exact
    curves = learning_curves(t, ["label_noise"], "log", 1.0, Thresholds(), 200, 0)
    assert np.allclose(curves["beta_mu"], -0.7)
    assert np.allclose(curves["powerlaw_r2"], 1.0)
    x = np.log(SIZES)
    for _, c in curves.iterrows():
        sub = t[(t["arm"] == c["arm"]) & (t["label_noise"] == c["label_noise"])].groupby("train_size")["err"].mean()
        assert c["beta_err"] == pytest.approx(np.polyfit(x, np.log(sub.loc[SIZES].to_numpy()), 1)[0])


def test_a_zoo_without_twins_or_curves_says_what_it_cannot_compute():
    rng = np.random.default_rng(0)
    t = pd.DataFrame([{"arm": BASE, "width": w, "label_noise": r, "seed": s, "err": 0.2 + r + rng.normal(0, .01),
                       "mu": 1 + r} for w in (16, 32) for r in NOISE for s in SEEDS])
    parts = audit_table(t, axes=["width", "label_noise", "seed"], n_test=N_TEST, n_boot=100)
    by_part = {c.part: c for c in parts["checks"]}
    assert by_part["value"].failed is None and "no twins" in by_part["value"].detail
    assert by_part["trend"].failed is None and "train_size" in by_part["trend"].detail
    assert by_part["scaling"].failed is None
    data = [c for c in parts["checks"] if c.part == "data"]
    assert all(c.failed is False for c in data)  # mu rises with noise as the error does
    assert any("no twins" in n for n in parts["notes"])
    # nothing failed, yet nothing is robust: every part is missing, the data part because 2 groups < 3
    assert set(parts["missing"]) == {"value", "trend", "scaling", "data"}
    assert parts["verdict"] == ("inconclusive (no value: 0 admitted twin cells < 6; no trend, scaling: 0 admitted "
                                "twin curves < 3; no data: 2 baseline noise groups with distinguishable errors < 3)")


# ---------------------------------------------------------------- the verdict: robust only on enough evidence

TRACKS = (lambda n, r, e: 2 * e, lambda n, r, e: 2 * e)  # a measure that follows the test error, twin or not


def control_table(models: int, rv: float = 0.0) -> pd.DataFrame:
    """A rescaling control (part 6) on `models` models whose change under rescaling is rv."""
    return pd.DataFrame([{"model_id": f"m{i}", "alpha": a, "mu": 1.0, "mu_rescaled": 1.0 + rv, "rv": rv}
                         for i in range(models) for a in (0.1, 10.0)])


def report_of(t: pd.DataFrame, control: pd.DataFrame):
    return assemble_report("planted", "planted-zoo", run(t), control, Thresholds())


def test_robust_only_when_every_part_rests_on_enough_evidence_and_passes():
    t = planted(*TRACKS, twins=("lr_x10", "adam"))  # 2 twins x 2 noise levels: 4 twin curves, 16 twin cells
    report = report_of(t, control_table(2))
    assert report.verdict == "robust" and report.missing == {}
    ev = {e.part: e.n for e in report.evidence}
    assert ev == {"value": 16, "trend": 4, "scaling": 4, "data": 4, "control": 2}
    for c in report.checks:  # each check states the evidence it rests on
        assert f"{ev[c.part]} " in c.detail, (c.part, c.detail)
    # the same table with the control on one model: every check still passes, but the control rests on too little
    thin = report_of(t, control_table(1))
    assert all(c.failed is False for c in thin.checks)
    assert thin.verdict == "inconclusive (no control: 1 control models < 2)"
    assert thin.to_dict()["missing"] == [{"part": "control", "reason": "1 control models < 2"}]


def test_too_few_admitted_curves_make_the_verdict_inconclusive_naming_trend_and_scaling():
    parts = run(planted(*TRACKS))  # one twin: 2 twin curves (one per noise level)
    assert all(c.failed is False for c in parts["checks"])  # every check passes, as the old verdict 'robust' said
    assert set(parts["missing"]) == {"trend", "scaling"}
    assert parts["verdict"] == "inconclusive (no trend, scaling: 2 admitted twin curves < 3)"
    assert parts["missing"]["trend"] == "2 admitted twin curves < 3 (0 of 2 twin curves not admissible)"
    assert "of 2 admitted twin curves" in next(c for c in parts["checks"] if c.part == "trend").detail
    # with a third curve (a second twin gives 4) the same measure is judged on its trend and scaling
    assert run(planted(*TRACKS, twins=("lr_x10", "adam")))["missing"] == {}


def test_a_failed_part_and_a_missing_part_are_both_in_the_verdict():
    # the twin's measure is 5x the base's at the same test error and slope: a value failure, trend and scale intact
    report = report_of(planted(lambda n, r, e: 2 * e, lambda n, r, e: 10 * e), control_table(2))
    assert failed_labels({"checks": report.checks}) == {"fragile-value"}
    assert report.verdict == "fragile-value; inconclusive: trend, scaling"
    block = report.to_dict()
    assert block["verdict"] == report.verdict
    assert [m["part"] for m in block["missing"]] == ["trend", "scaling"]
    assert all(m["reason"].startswith("2 admitted twin curves < 3") for m in block["missing"])
    assert block["evidence"]["trend"] == {"n": 2, "unit": "admitted twin curves", "minimum": 3}
    # a failure needs no minimum: the value part fails on 8 cells and is not listed as missing
    assert "value" not in report.missing


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
    bad = gb.audit(fragile, digits_zoo, control_models=2, n_boot=100, progress=False, cache=False)
    good = gb.audit(invariant, digits_zoo, control_models=2, n_boot=100, progress=False, cache=False)
    ctl_bad = next(c for c in bad.checks if c.part == "control")
    ctl_good = next(c for c in good.checks if c.part == "control")
    assert ctl_bad.failed and "fragile-value" in bad.verdict
    assert ctl_good.failed is False and ctl_good.value < 1e-5
    assert set(bad.control["alpha"]) == {0.1, 10.0} and bad.control["model_id"].nunique() == 2
    # the digits zoo has no twins: the report says so instead of judging, and the verdict is not 'robust'
    assert any(c.part == "trend" and c.failed is None for c in good.checks)
    assert good.to_dict()["verdict"] == good.verdict
    assert good.verdict.startswith("inconclusive (no value: 0 admitted twin cells < 6; no trend, scaling: 0 admitted")
    assert {"value", "trend", "scaling"} <= set(good.missing)
    assert "control" not in good.missing
    assert good.to_dict()["missing"] == [{"part": k, "reason": v} for k, v in good.missing.items()]
    assert bad.verdict.startswith("fragile-value; inconclusive: value, trend, scaling")


def test_the_audit_command_on_the_digits_zoo_is_inconclusive_and_says_why(digits_zoo, tmp_path):
    import json

    from typer.testing import CliRunner

    from genbench.cli import app
    out = tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit", "norm.path", "--zoo", "digits-mlp", "--control-models", "2",
                                   "--n-boot", "100", "--json", str(out)])
    assert res.exit_code == 0, res.output
    block = json.loads(out.read_text())
    missing = {m["part"]: m["reason"] for m in block["missing"]}
    assert block["verdict"].startswith("inconclusive (") and "robust" not in block["verdict"]
    assert {"value", "trend", "scaling"} <= set(missing) and "control" not in missing
    assert "the zoo has no twins" in missing["value"]
    assert "verdict: inconclusive (" in res.output
    for part in missing:
        assert f"missing {part}: " in res.output


def test_the_seed_bootstrap_is_the_same_in_every_process():
    import os
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'tests'); from test_audit import *; "
            "p = run(planted(lambda n, r, e: 2 * e, lambda n, r, e: 2 * e * (n / 100) ** -0.05)); "
            "print(p['curves']['p_flip'].fillna(-1).round(6).tolist(), [c['beta_mu_ci'] for _, c in p['curves'].iterrows()])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": h}).stdout for h in ("1", "2")}
    assert len(outs) == 1, outs
