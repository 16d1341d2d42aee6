"""The Ray executor on a local Ray instance: the same values as the local executor, failures kept to their
task, the value cache shared, measures defined here shipped to the workers, and zoo builds."""
from __future__ import annotations

import os
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.measures import registry

MEASURES = ["norm.params", "norm.fro_prod", "test.ray_weights"]
runner = CliRunner()


def weights_or_boom(ctx):
    """Sum of squared weights; raises on the narrow batch-norm models (a module-level function of a test file)."""
    if ctx.model.config["width"] == 16 and ctx.model.config["batchnorm"]:
        raise RuntimeError("boom on a narrow batchnorm model")
    return float(sum((p.detach() ** 2).sum() for p in ctx.model.parameters()))


def kill_worker(ctx):
    """Kills the process it runs in on one model, as a segfault or the OOM killer would."""
    if ctx.model.config["width"] == 32 and ctx.model.config["batchnorm"]:
        os._exit(1)
    return 1.0


@pytest.fixture(scope="module")
def ray_session():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    gb.register_measure("test.ray_weights", citation="test")(weights_or_boom)
    gb.register_measure("test.ray_crash", citation="test")(kill_worker)
    yield ray
    registry.unregister_measure("test.ray_weights")
    registry.unregister_measure("test.ray_crash")
    ray.shutdown()


def test_ray_gives_the_local_values_and_shares_the_cache(ray_session, digits_zoo, tmp_path):
    local = gb.evaluate(MEASURES, digits_zoo, cache=tmp_path / "local", progress=False)
    on_ray = gb.evaluate(MEASURES, digits_zoo, executor="ray", cache=tmp_path / "shared", progress=False)
    pd.testing.assert_frame_equal(on_ray, local)
    errors = on_ray["test.ray_weights:error"].dropna()
    assert len(errors) == 6 and errors.str.contains("RuntimeError: boom on a narrow batchnorm model").all()
    assert on_ray["norm.fro_prod"].notna().all() and on_ray.attrs["executor"] == "ray"
    assert set(on_ray.attrs["seconds"]) == set(MEASURES)  # all computed by the workers
    # the workers wrote the cache: a local run reads every value from it, and a second Ray run too
    cached = list((tmp_path / "shared" / "norm.params").rglob("*.json"))
    assert len(cached) == len(digits_zoo)
    again = gb.evaluate(MEASURES, digits_zoo, cache=tmp_path / "shared", progress=False)
    pd.testing.assert_frame_equal(again, local)
    assert again.attrs["seconds"] == {}
    assert gb.evaluate(MEASURES, digits_zoo, executor="ray", cache=tmp_path / "shared",
                       progress=False).attrs["seconds"] == {}


def test_a_crashing_task_fails_only_its_model(ray_session, digits_zoo, tmp_path):
    some = ["w16_bn0_ln0.0_s0", "w32_bn1_ln0.3_s2", "w32_bn0_ln0.0_s1"]
    df = gb.evaluate(["norm.params", "test.ray_crash"], digits_zoo, models=some, executor="ray",
                     cache=tmp_path / "c", progress=False).set_index("model_id")
    assert list(df.index) == some
    crashed = ["w32_bn1_ln0.3_s2"]
    for name in ("norm.params", "test.ray_crash"):
        assert df.loc[crashed, f"{name}:error"].str.startswith("Ray task failed").all()
        assert df.drop(index=crashed)[f"{name}:error"].isna().all()
    assert (df.drop(index=crashed)["test.ray_crash"] == 1.0).all()
    assert not list((tmp_path / "c").rglob(f"{digits_zoo.row(crashed[0])['checkpoint_sha256']}.json"))


def test_cli_builds_and_evaluates_on_ray(ray_session, home, tmp_path):
    out = tmp_path / "zoo"
    result = runner.invoke(app, ["zoo", "build", "digits-mlp", "--limit", "12", "--set", "train.epochs=1",
                                 "--out", str(out), "--executor", "ray"])
    assert result.exit_code == 0, result.output
    local = gb.build_zoo("digits-mlp", tmp_path / "local", limit=12, overrides={"train.epochs": 1}, progress=False)
    on_ray = gb.load_zoo(out)
    assert on_ray.table["family"].size == 12 and len({*on_ray.table["hp.batchnorm"]}) == 2  # two groups, two tasks
    pd.testing.assert_frame_equal(on_ray.table.drop(columns="train_seconds"), local.table.drop(columns="train_seconds"))
    assert on_ray.verify() == []
    result = runner.invoke(app, ["evaluate", "norm.params", "--zoo", str(out), "--executor", "ray",
                                 "--out", str(tmp_path / "values.parquet")])
    assert result.exit_code == 0, result.output
    values = gb.harness.load_values(tmp_path / "values.parquet")
    assert list(values["model_id"]) == on_ray.model_ids and values["norm.params:error"].isna().all()


def test_without_ray_the_error_says_how_to_install_it(digits_zoo, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    with pytest.raises(gb.GenbenchError, match=r"pip install 'genbench\[ray\]'"):
        gb.evaluate("norm.params", digits_zoo, executor="ray", progress=False, cache=False)
    with pytest.raises(gb.GenbenchError, match="executor='ray'"):
        gb.evaluate("norm.params", digits_zoo, address="ray://head:10001", progress=False)
    with pytest.raises(gb.GenbenchError, match="Did you mean 'ray'"):
        gb.build_zoo("digits-mlp", executor="rey")
