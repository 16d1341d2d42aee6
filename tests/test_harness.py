"""The registry, evaluate() with its cache and per-model failures, the CLI, and the conformance suite."""
from __future__ import annotations

import math
import re
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.measures import registry
from genbench.harness import check_measure
from genbench.harness.check import varied_ids


def test_registry_lists_by_glob_and_refuses_duplicates(temp_measures):
    assert "margin.qrt_log" in gb.list_measures("margin.*")
    assert all(n.startswith("norm.") for n in gb.list_measures("norm.*"))
    assert gb.get_measure("margin.qrt_log").kind == "signature"
    assert gb.get_measure("margin.qrt_log").transform == "log"
    assert gb.get_measure("margin.qrt_linear").transform == "linear"
    assert gb.get_measure("margin.qrt_log_unnorm").transform == "log"
    with pytest.raises(gb.GenbenchError, match="already registered"):
        gb.register_measure("margin.qrt_log")(lambda ctx: 0.0)
    with pytest.raises(gb.GenbenchError, match="Did you mean 'margin.qrt_log'"):
        gb.get_measure("margin.qrtlog")
    with pytest.raises(gb.GenbenchError, match="family.variant"):
        gb.register_measure("nodot")
    with pytest.raises(gb.GenbenchError, match="need"):
        gb.register_measure("x.y", needs=("test_data",))


def test_registration_mistakes_get_a_way_out(temp_measures, digits_zoo):
    """Each was an AttributeError, a need read letter by letter, or a fix that did not work (bump its version)."""
    def plain(ctx):
        return 1.0
    with pytest.raises(gb.GenbenchError, match=r'takes the measure\'s name first: write @register_measure\("family'
                                               r'\.variant", \.\.\.\) above plain'):
        gb.register_measure(plain)  # @gb.register_measure without its arguments
    with pytest.raises(gb.GenbenchError, match="a measure's name is a string 'family.variant', got int 5"):
        gb.register_measure(5)
    temp_measures("mine.one_need", needs="train_data")(plain)  # one need as a string: that need
    assert gb.get_measure("mine.one_need").needs == ("train_data",)
    with pytest.raises(gb.GenbenchError, match="pass replace=True to register it again"):
        gb.register_measure("mine.one_need", version=2)(plain)
    gb.register_measure("mine.one_need", replace=True)(plain)
    builtin = gb.get_measure("norm.params")
    try:
        with pytest.warns(UserWarning, match="norm.params now runs your function, not genbench's built-in"):
            gb.register_measure("norm.params", replace=True)(plain)
    finally:
        registry._MEASURES["norm.params"] = builtin  # the built-in back, as it was
    for bad, says in ((0, "a model id in zoo 'digits-mlp' is a string, got int 0"),
                      ("nope", "unknown model id in zoo 'digits-mlp': 'nope'. Known: 24 of them, e.g. ")):
        with pytest.raises(gb.GenbenchError, match=re.escape(says)):
            digits_zoo.load_model(bad)
    with pytest.raises(gb.GenbenchError, match="measures are named by names, glob patterns .* got NoneType None"):
        gb.evaluate(None, digits_zoo)
    with pytest.raises(gb.GenbenchError, match=r"overrides is a mapping of dotted recipe keys .* got list \['epochs'\]"):
        gb.build_zoo("digits-mlp", overrides=["epochs"])
    with pytest.raises(gb.GenbenchError, match="device takes a name .* got list"):
        gb.evaluate("norm.params", digits_zoo, [digits_zoo.model_ids[0]])  # models given where device goes


def test_transform_is_declared_never_read_from_the_name(temp_measures):
    # a regression: "newcomer.mean_log_spec" was log-transformed because its name contains "_log_"
    temp_measures("newcomer.mean_log_spec")(lambda ctx: 1.0)
    temp_measures("newcomer.spec_log")(lambda ctx: 1.0)
    temp_measures("newcomer.declared", transform="log")(lambda ctx: 1.0)
    assert gb.get_measure("newcomer.mean_log_spec").transform == "select"
    assert gb.get_measure("newcomer.spec_log").transform == "select"
    assert gb.get_measure("newcomer.declared").transform == "log"
    with pytest.raises(gb.GenbenchError, match="'select'"):
        temp_measures("newcomer.bad", transform=None)
    assert all(gb.get_measure(n).transform in ("log", "linear", "select") for n in gb.list_measures())


def test_every_builtin_carries_citation_and_docstring():
    names = gb.list_measures()
    catalogue = """margin.qrt_log margin.qrt_linear margin.qrt_log_unnorm margin.moment_log margin.sf_log
    margin.best4_log margin.sl_log margin.input margin.h1 margin.h2 margin.h3 margin.spectral_log margin.jacobian_log
    margin.lm_linear norm.params norm.fro_prod norm.fro_sum norm.spec_prod norm.spec_sum norm.spec_orig_margin
    norm.spec_init_margin norm.fro_prod_margin norm.path norm.path_margin norm.param init.dist_fro init.dist_spec
    pacbayes.init pacbayes.orig pacbayes.flatness pacbayes.mag_init pacbayes.mag_orig pacbayes.mag_flatness
    sharpness.flatness output.margin_inv output.entropy layer.utilization_last layer.utilization_all
    layer.contribution pgdl.dbi_mixup pgdl.augment_robustness pgdl.vpm""".split()
    assert set(catalogue) <= set(names), sorted(set(catalogue) - set(names))
    for n in names:
        m = gb.get_measure(n)
        assert m.citation and m.doc.endswith((".", ")", "]")), (n, m.doc)  # a whole summary, never its first line


def test_a_measures_doc_is_its_whole_summary_paragraph(temp_measures):
    @temp_measures("test.documented")
    def documented(ctx):
        """What it computes, in a summary
        wrapped over two lines.

        Details the listing leaves out."""
        return 1.0

    assert gb.get_measure("test.documented").doc == "What it computes, in a summary wrapped over two lines."


def test_third_party_measures_are_discovered_through_entry_points(tmp_path, monkeypatch):
    pkg = tmp_path / "gbplugin_demo.py"
    pkg.write_text("import genbench as gb\n\n@gb.register_measure('plugin.const', citation='test')\n"
                   "def const(ctx):\n    '''Always 1.'''\n    return 1.0\n")
    dist = tmp_path / "gbplugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gbplugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[genbench.measures]\nconst = gbplugin_demo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    try:
        assert "plugin.const" in gb.list_measures("plugin.*")
    finally:
        registry.unregister_measure("plugin.const")
        sys.modules.pop("gbplugin_demo", None)


def test_evaluate_columns_match_direct_calls(digits_zoo, tmp_path):
    df = gb.evaluate(["margin.qrt_log", "output.entropy"], digits_zoo, cache=tmp_path / "c", progress=False)
    assert list(df["model_id"]) == digits_zoo.model_ids
    assert [c for c in df.columns if c.startswith("margin.qrt_log[")] == [f"margin.qrt_log[{i}]" for i in range(20)]
    assert df["margin.qrt_log:error"].isna().all() and df["output.entropy:error"].isna().all()
    from genbench.measures.context import MeasureContext
    mid = digits_zoo.model_ids[5]
    model = digits_zoo.load_model(mid)
    ctx = MeasureContext(model=model, probe_layers=model.probe_layers(), needs=("train_data",),
                         train=digits_zoo.training_set(mid))
    row = df.set_index("model_id").loc[mid]
    assert row["output.entropy"] == pytest.approx(gb.get_measure("output.entropy")(ctx), rel=1e-12)


def test_failures_are_recorded_per_model_and_the_run_goes_on(digits_zoo, tmp_path, temp_measures):
    first, second = digits_zoo.model_ids[:2]

    @temp_measures("test.raises")
    def raises(ctx):
        """Raises on the first model."""
        if ctx.model.config["width"] == 16 and not ctx.model.config["batchnorm"]:
            raise RuntimeError("boom")
        return 1.0

    @temp_measures("test.nan")
    def nan(ctx):
        """NaN always."""
        return math.nan

    @temp_measures("test.shape", kind="signature")
    def shape(ctx):
        """Length depends on the model."""
        return np.ones(3 if ctx.model.config["batchnorm"] else 2)

    @temp_measures("test.scalar_vector")
    def scalar_vector(ctx):
        """A scalar measure returning a vector."""
        return [1.0, 2.0]

    @temp_measures("test.slow")
    def slow(ctx):
        """Spends its budget."""
        import time
        while True:
            time.sleep(0.01)
            ctx.check_time()

    df = gb.evaluate("test.*", digits_zoo, cache=tmp_path / "c", progress=False, budget_s=0.05)
    by_id = df.set_index("model_id")
    assert "RuntimeError: boom" in by_id.loc[first, "test.raises:error"]
    assert by_id["test.raises"].notna().sum() == len(df) - by_id["test.raises:error"].notna().sum() > 0
    assert df["test.nan:error"].str.contains("non-finite").all()
    assert df["test.scalar_vector:error"].str.contains("wrong shape").all()
    bad_shape = df["test.shape:error"].dropna()
    assert len(bad_shape) == len(df) // 2 and bad_shape.str.contains("wrong shape").all()
    assert df["test.slow:error"].str.contains("over budget").all()
    assert by_id.loc[second, "test.raises"] == 1.0 or by_id.loc[second, "test.raises:error"]


def test_each_measure_gets_its_own_model_copied_only_when_it_reads_it(digits_zoo, temp_measures, monkeypatch):
    import copy
    import importlib

    import torch

    ev = importlib.import_module("genbench.harness.evaluate")

    @temp_measures("test.a_vandal")
    def vandal(ctx):
        """Zeroes the weights it was given (a measure may do anything to its own copy, its mode included)."""
        assert not ctx.model.training
        ctx.model.train()
        with torch.no_grad():
            for p in ctx.model.parameters():
                p.zero_()
        return float(ctx.model.training)

    @temp_measures("test.b_reader")
    def reader(ctx):
        """Sums the weights: must see the trained ones whatever ran before it."""
        return float(sum(p.detach().abs().sum() for p in ctx.model.parameters()))

    @temp_measures("test.c_memo_only")
    def memo_only(ctx):
        """Reads only shared work: never copies the model."""
        return ctx.memo("test.shared", lambda: 2.0)

    ids = digits_zoo.model_ids[:2]
    alone = gb.evaluate("test.b_reader", digits_zoo, models=ids, cache=False, progress=False)
    copies = []
    real = copy.deepcopy

    def counted(x, *args):
        if isinstance(x, torch.nn.Module):  # torch deep-copies each buffer's storage too: not a model copy
            copies.append(x)
        return real(x, *args)

    monkeypatch.setattr(ev.copy, "deepcopy", counted)
    both = gb.evaluate("test.*", digits_zoo, models=ids, cache=False, progress=False)
    np.testing.assert_array_equal(both["test.b_reader"], alone["test.b_reader"])
    assert (both["test.a_vandal"] == 1.0).all()  # the mode it set stayed set
    assert (both["test.c_memo_only"] == 2.0).all()
    assert len(copies) == 2 * len(ids)  # the vandal's and the reader's, not the memo reader's


def test_cache_makes_reruns_free_and_resumes(digits_zoo, tmp_path, temp_measures):
    calls = []

    @temp_measures("test.counted")
    def counted(ctx):
        """Counts its calls."""
        calls.append(1)
        return float(sum(p.detach().sum() for p in ctx.model.parameters()))

    cache = tmp_path / "cache"
    some = digits_zoo.model_ids[:3]
    part = gb.evaluate("test.counted", digits_zoo, models=some, cache=cache, progress=False)
    assert len(calls) == 3
    full = gb.evaluate("test.counted", digits_zoo, cache=cache, progress=False)
    assert len(calls) == len(digits_zoo)  # the first three came from the cache
    again = gb.evaluate("test.counted", digits_zoo, cache=cache, progress=False)
    assert len(calls) == len(digits_zoo)
    pd.testing.assert_frame_equal(full, again)
    np.testing.assert_array_equal(part["test.counted"], full["test.counted"][:3])
    assert (part.attrs["cached"], full.attrs["cached"], again.attrs["cached"]) == (
        {"test.counted": 0}, {"test.counted": 3}, {"test.counted": len(digits_zoo)})


def test_the_evaluate_command_says_how_many_values_came_from_the_cache(digits_zoo, tmp_path, temp_measures):
    @temp_measures("test.cached")
    def constant(ctx):
        """One."""
        return 1.0

    args = ["evaluate", "test.cached", "--zoo", "digits-mlp", "--out", str(tmp_path / "v.parquet"), "--device", "cpu"]
    rows = []
    for extra in ([], [], ["--no-cache"]):
        out = CliRunner().invoke(app, [*args, *extra])
        assert out.exit_code == 0, out.output
        line = next(line for line in out.output.splitlines() if "test.cached" in line)
        rows.append([cell.strip() for cell in line.split("\u2502") if cell.strip()])
    n = str(len(digits_zoo))
    # measure, kind, ok, failed, cached: none at first, all the second time, none with --no-cache
    assert [r[:5] for r in rows] == [["test.cached", "scalar", n, "0", c] for c in ("0", n, "0")]


def test_the_evaluate_command_shows_whole_names_and_each_measures_first_failure(digits_zoo, tmp_path,
                                                                                temp_measures):
    """On an 80-column terminal the table keeps every measure's name whole and the first failure is printed whole
    below it (a column cut both to a few letters)."""
    name, calls = "test.a_rather_long_measure_name", []

    @temp_measures(name)
    def fails_on_one(ctx):
        """Fails on the second model it sees."""
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a planted failure whose message is long enough to be cut by a narrow table cell, "
                             "and longer than the 200 characters the line was cut to, as genbench's own errors "
                             "can be: rebuild the zoo (`genbench zoo build`) or download it again")
        return 1.0

    values = tmp_path / "v.parquet"
    out = CliRunner().invoke(app, ["evaluate", name, "--zoo", "digits-mlp", "--out", str(values), "--device", "cpu"],
                             env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if name in line and "\u2502" in line)
    assert [c.strip() for c in row.split("\u2502") if c.strip()][:4] == [name, "scalar", str(len(digits_zoo) - 1), "1"]
    df = gb.harness.load_values(values)
    failed, error = next((m, e) for m, e in zip(df["model_id"], df[f"{name}:error"]) if isinstance(e, str))
    assert "a planted failure" in error
    assert f"{name}, first failure: {failed}: {error}" in " ".join(out.output.split())


def test_bad_evaluate_input_is_named(digits_zoo):
    with pytest.raises(gb.GenbenchError, match="Did you mean"):
        gb.evaluate("margin.qrt_lgo", digits_zoo, progress=False)
    with pytest.raises(gb.GenbenchError, match="no measure matches"):
        gb.evaluate("nothing.*", digits_zoo, progress=False)
    with pytest.raises(gb.GenbenchError, match="model id"):
        gb.evaluate("output.entropy", digits_zoo, models=["w16_bn0_ln0.0_s9"], progress=False)
    with pytest.raises(gb.GenbenchError, match="executor"):
        gb.evaluate("output.entropy", digits_zoo, executor="dask", progress=False)
    if not __import__("torch").cuda.is_available():
        with pytest.raises(gb.GenbenchError, match="no CUDA GPU"):
            gb.evaluate("output.entropy", digits_zoo, device="cuda", progress=False)


def test_cli_evaluate_writes_and_merges_the_value_table(digits_zoo, home):
    runner = CliRunner()
    r = runner.invoke(app, ["evaluate", "margin.qrt_log", "--zoo", "digits-mlp"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", "output.*", "--zoo", "digits-mlp", "--models", "w16_*"])
    assert r.exit_code == 0, r.output
    df = gb.harness.load_values(gb.harness.values_path("digits-mlp"))
    assert "margin.qrt_log[0]" in df.columns and "output.entropy" in df.columns
    assert set(df.attrs["measures"]) == {"margin.qrt_log", "output.entropy", "output.margin_inv"}
    assert df["output.entropy"].notna().sum() == len(digits_zoo) // 2
    r = runner.invoke(app, ["measures", "list", "pacbayes.*"])
    assert r.exit_code == 0 and "pacbayes.init" in r.output
    said = " ".join(r.output.split())
    assert all(k in said for k in ("kind: scalar", "needs: what the measure sees", "phi: the transform"))
    r = runner.invoke(app, ["measures", "list", "nrm.path"])  # a mistyped name, not a pattern: a suggestion
    assert isinstance(r.exception, gb.GenbenchError) and "Did you mean 'norm.path'" in str(r.exception), r.output
    r = runner.invoke(app, ["measures", "list", "nrm.*"])  # a pattern that matches nothing: said as before
    assert isinstance(r.exception, gb.GenbenchError) and "no measure matches 'nrm.*'" in str(r.exception)


def test_conformance_suite_catches_what_it_should(digits_zoo, temp_measures):
    @temp_measures("test.random")
    def random_measure(ctx):
        """Not seeded."""
        return float(np.random.rand())

    @temp_measures("test.unnorm", kind="signature", needs=("train_data",), invariances=("relu_rescale",))
    def unnorm(ctx):
        """Claims an invariance it does not have."""
        from genbench.measures.margin import margins
        return margins(ctx).distance.mean(axis=1)

    @temp_measures("test.sneaky")
    def sneaky(ctx):
        """Uses training data without declaring it."""
        return float(ctx.train_data()[1].float().mean())

    assert not check_measure("test.random", digits_zoo).passed
    report = check_measure("test.unnorm", digits_zoo)
    assert [r.name for r in report.results if not r.passed] == [
        "invariant to rescaling a ReLU layer pair by 3 and 1/3"]
    report = check_measure("test.sneaky", digits_zoo)
    assert not report.passed and "did not declare" in str(report)

    @temp_measures("test.per_layer", kind="signature")
    def per_layer(ctx):
        """One number per parameter tensor: batchnorm's add some, so its length depends on the architecture."""
        return np.array([float(p.detach().norm()) for p in ctx.model.parameters()])

    report = check_measure("test.per_layer", digits_zoo)  # the first two models were two seeds of one network
    assert [r.name for r in report.results if not r.passed] == ["stable shape across models"], str(report)
    ids = varied_ids(digits_zoo, 2)
    assert [digits_zoo.row(i)["hp.batchnorm"] for i in ids] == [False, True] and ids[0] == digits_zoo.model_ids[0]
    for models, says in ((1, "an integer of at least 2, got 1"), ("w32*", "an integer of at least 2, got 'w32*'")):
        with pytest.raises(gb.GenbenchError, match=re.escape(says)):
            check_measure("test.per_layer", digits_zoo, models=models)
    with pytest.raises(gb.GenbenchError, match=r"check_measure checks one measure; 'test\.\*' names 4: "):
        check_measure("test.*", digits_zoo)
    with pytest.raises(gb.GenbenchError, match="budget_s must be a positive finite number of seconds, got 0"):
        check_measure("test.per_layer", digits_zoo, budget_s=0)
    assert not report and bool(check_measure("norm.params", digits_zoo))  # truth is passing


@pytest.mark.parametrize("name", gb.list_measures())
def test_every_builtin_passes_the_conformance_suite(name, digits_zoo):
    report = check_measure(name, digits_zoo)
    assert report.passed, str(report)


def test_measures_check_says_it_builds_its_test_zoo_first_and_how_long_it_took(digits_zoo, tmp_path, monkeypatch):
    import genbench.zoo as zoo_package
    built = []

    def build(name, **kw):
        built.append(name)
        return digits_zoo

    monkeypatch.setattr(zoo_package, "local_zoos", lambda: [])  # as on a fresh machine: the test zoo is missing
    monkeypatch.setattr(zoo_package, "build_zoo", build)
    out = CliRunner().invoke(app, ["measures", "check", "norm.params", "--device", "cpu"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "building the conformance suite's test zoo digits-mlp first" in text and built == ["digits-mlp"]
    assert re.search(r"built digits-mlp in \d+ s", text) and "norm.params: PASSED" in text
    monkeypatch.undo()
    out = CliRunner().invoke(app, ["measures", "check", "norm.params", "--device", "cpu"])  # built: nothing said
    assert out.exit_code == 0 and "building" not in out.output


def test_an_evaluation_where_every_model_failed_fails_and_no_cache_is_said(digits_zoo, tmp_path):
    """Planted: `evaluate ... --budget-s 1e-9` exited 0 with every model failed, which a script reads as done; and
    --no-cache printed the caption about values read from the cache."""
    from typer.testing import CliRunner

    from genbench.cli import app
    out = CliRunner().invoke(app, ["evaluate", "norm.params", "--zoo", str(digits_zoo.root), "--budget-s", "1e-9",
                                   "--no-cache", "--out", str(tmp_path / "v.parquet")])
    said = " ".join(out.output.split())
    assert out.exit_code == 1 and "no value was computed: every model failed" in said, said
    assert "over budget" in said and "--no-cache: every value computed again" in said
    assert (tmp_path / "v.parquet").is_file()  # each model's failure is kept
    ok = CliRunner().invoke(app, ["evaluate", "norm.params", "--zoo", str(digits_zoo.root), "--out",
                                  str(tmp_path / "w.parquet")])
    said = " ".join(ok.output.split())
    assert ok.exit_code == 0 and "no value was computed" not in said and "cached: values read from the value" in said
