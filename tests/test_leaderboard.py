"""Result records, ranking with rank groups, the leaderboard command and `genbench verify`."""
from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.leaderboard.export import leaderboard_table
from genbench.leaderboard.ranking import aggregate_table, rank_records
from genbench.leaderboard.records import failure_record, run_entry
from genbench.leaderboard.schema import load_records, read_record, score_spec, write_record
from genbench.leaderboard.verify import verify_record


@pytest.fixture(scope="module")
def records_dir(digits_zoo, tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    for name in ("norm.fro_prod", "norm.params"):
        write_record(run_entry(name, digits_zoo, audit_zoo=None, n_boot=50), root)
    write_record(failure_record("broken.entry", "norm.params", digits_zoo, "ZeroDivisionError: on purpose"), root)
    return root


def test_a_record_holds_scores_values_and_provenance_as_strict_json(records_dir, digits_zoo):
    path = records_dir / "digits-mlp" / "norm.fro_prod.json"
    text = path.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    rec = read_record(path)
    assert rec["status"] == "ok" and rec["builtin"] and rec["kind"] == "scalar"
    assert rec["zoo"]["table_sha256"] == digits_zoo.table_sha256
    assert len(rec["values"]["model_id"]) == len(digits_zoo) == len(rec["values"]["value"])
    assert rec["values"]["gap"] == pytest.approx(
        digits_zoo.table.set_index("model_id").loc[rec["values"]["model_id"], "gap"].tolist())
    lo, hi = rec["scores"]["intervals"]["tau"]
    assert lo <= rec["scores"]["values"]["tau"] <= hi
    prov = rec["provenance"]
    for key in ("genbench_version", "measure_source_hash", "device", "seconds", "date", "command", "seed", "n_boot"):
        assert prov[key] is not None, key
    assert "no fragility audit" not in " ".join(rec["scores"]["notes"])  # audit_zoo=None: not attempted


def _rec(name, zoo, kf, lo, hi, status="ok"):
    return {"name": name, "zoo": {"name": zoo}, "status": status, "kind": "scalar", "citation": "",
            "scores": {"values": {"kfold_r2": kf}, "intervals": {"kfold_r2": [lo, hi]}}}


@pytest.mark.parametrize("failing, status", [(1, "ok"), (6, "failed")])
def test_an_entry_failing_on_more_than_5_percent_of_models_gets_a_failure_record(digits_zoo, failing, status):
    import genbench as gb
    from genbench.measures import registry

    def weight_sum(model):
        return round(float(sum(p.detach().abs().sum() for p in model.parameters())), 4)

    bad = {weight_sum(digits_zoo.load_model(mid)) for mid in digits_zoo.model_ids[:failing]}
    name = f"test.partly_nan_{failing}"

    @gb.register_measure(name, citation="test")
    def partly_nan(ctx):
        w = weight_sum(ctx.model)
        return float("nan") if w in bad else w

    try:
        rec = run_entry(name, digits_zoo, audit_zoo=None, n_boot=20, cache=False)
    finally:
        registry.unregister_measure(name)
    assert rec["status"] == status  # 1 of 24 models is within the 5% allowed, 6 of 24 is not
    if status == "failed":
        assert f"failed on {failing} of {len(digits_zoo)} models" in rec["failure"]


def test_rank_groups_follow_overlapping_intervals_and_failures_come_last():
    recs = [_rec("a", "z", 0.9, 0.85, 0.95), _rec("b", "z", 0.8, 0.7, 0.86), _rec("c", "z", 0.6, 0.5, 0.84),
            _rec("d", "z", 0.4, 0.3, 0.45), _rec("e", "z", None, None, None, status="failed")]
    ranked = {r["name"]: (r["rank"], r["rank_group"]) for r in rank_records(recs)}
    # b overlaps a (0.86 >= 0.85); c does not overlap a (0.84 < 0.85): a new group led by c; d is below c's
    assert ranked == {"a": (1, 1), "b": (2, 1), "c": (3, 2), "d": (4, 3), "e": (None, None)}
    assert [r["name"] for r in rank_records(recs)][-1] == "e"


def test_aggregate_is_the_mean_rank_over_zoos():
    recs = [_rec("a", "z1", 0.9, 0.8, 1.0), _rec("b", "z1", 0.5, 0.4, 0.6),
            _rec("a", "z2", 0.1, 0.0, 0.2), _rec("b", "z2", 0.7, 0.6, 0.8), _rec("c", "z2", 0.3, 0.2, 0.4)]
    agg = aggregate_table(recs).set_index("entry")
    assert agg.loc["a", "mean_rank"] == 2.0 and agg.loc["b", "mean_rank"] == 1.5 and agg.loc["c", "zoos"] == 1


def test_leaderboard_command_formats_agree_with_the_table(records_dir):
    runner = CliRunner()
    expected = leaderboard_table(load_records(records_dir))
    out = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "csv"])
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.output))
    assert got["entry"].tolist() == expected["entry"].tolist()
    assert got["entry"].iloc[-1] == "broken.entry" and pd.isna(got["rank"].iloc[-1])
    js = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "json"])
    assert [r["entry"] for r in json.loads(js.output)] == expected["entry"].tolist()
    md = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "markdown"])
    assert md.output.startswith("| zoo") and "norm.fro_prod" in md.output
    bad = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--sort", "kfold"])
    assert bad.exit_code != 0 and "kfold_r2" in str(bad.exception or bad.output)


@pytest.mark.parametrize("width", [80, 200])
def test_terminal_table_keeps_names_and_intervals_whole_at_any_width(records_dir, monkeypatch, width):
    import genbench.cli as cli

    monkeypatch.setattr(cli.console, "width", width)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(records_dir)])
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.output.splitlines()) <= width
    row = next(line for line in out.output.splitlines() if "norm.fro_prod " in line)
    rec = next(r for _, r in leaderboard_table(load_records(records_dir)).iterrows() if r["entry"] == "norm.fro_prod")
    assert f"{rec['kfold_r2']:.2f} [{rec['kfold_r2_lo']:.2f}, {rec['kfold_r2_hi']:.2f}]" in row
    assert ("citation" in out.output) == (width >= cli.WIDE_TABLE)
    assert ("--format markdown" in out.output) == (width < cli.WIDE_TABLE)


@pytest.mark.parametrize("sort", ["cmi_pgdl", "sign_error_p90", "sign_error_mean"])
def test_narrow_terminal_table_shows_a_sort_score_that_is_no_column_of_the_table(tmp_path, monkeypatch, sort):
    import genbench.cli as cli

    for name, v, lo, hi in (("a", 0.12, 0.05, 0.2), ("b", 0.3, 0.25, 0.41)):
        write_record({"schema": 1, "name": name, "measure": name, "zoo": {"name": "z"}, "status": "ok",
                      "kind": "scalar", "citation": "", "scores": {"values": {sort: v, "tau": 0.5},
                                                                   "intervals": {sort: [lo, hi]}}}, tmp_path)
    monkeypatch.setattr(cli.console, "width", 80)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(tmp_path), "--sort", sort])
    assert out.exit_code == 0, out.output
    assert f"{sort} [95%]" in out.output and max(len(line) for line in out.output.splitlines()) <= 80
    rows = {line.split()[2]: line for line in out.output.splitlines() if line.split()[2:3] in (["a"], ["b"])}
    assert "0.12 [0.05, 0.20]" in rows["a"] and "0.30 [0.25, 0.41]" in rows["b"]
    best = "a" if score_spec(sort).lower_is_better else "b"
    assert rows[best].split()[0] == "1"


def test_verify_reproduces_a_record_and_shows_what_differs_in_a_tampered_one(records_dir, tmp_path):
    path = records_dir / "digits-mlp" / "norm.params.json"
    assert verify_record(path).ok
    rec = read_record(path)
    rec["scores"]["values"]["tau"] += 0.01
    rec["values"]["value"][0] *= 1.001
    tampered = tmp_path / "t.json"
    tampered.write_text(json.dumps(rec))
    v = verify_record(tampered)
    fields = [d[0] for d in v.differences]
    assert not v.ok and "scores.values.tau" in fields and "values.value[0]" in fields
    rec["provenance"]["measure_source_hash"] = "0" * 64
    tampered.write_text(json.dumps(rec))
    v = verify_record(tampered)
    assert v.problems and "source" in v.problems[0]
    out = CliRunner().invoke(app, ["verify", str(tampered)])
    assert out.exit_code == 1 and "does not reproduce" in out.output
