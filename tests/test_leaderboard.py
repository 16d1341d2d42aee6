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


# ---------------------------------------------------------------- where records go: local, shipped, and add


def _files(folder):
    """Every file under `folder` with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_leaderboard_add_verifies_and_copies_a_good_record_and_refuses_tampered_and_failed_ones(records_dir, tmp_path,
                                                                                               monkeypatch):
    import genbench.paths as paths

    runner = CliRunner()
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    good = records_dir / "digits-mlp" / "norm.params.json"
    out = runner.invoke(app, ["leaderboard", "add", str(good), "--to", str(shipped)])
    assert out.exit_code == 0, out.output
    assert "added" in out.output and "reproduced" in out.output
    assert _files(shipped) == {"digits-mlp/norm.params.json": good.read_bytes()}  # the file as it was, no temp left

    rec = read_record(good)
    rec["values"]["value"][0] *= 1.001  # one value changed
    tampered = tmp_path / "tampered" / "norm.params.json"
    tampered.parent.mkdir()
    tampered.write_text(json.dumps(rec))
    out = runner.invoke(app, ["leaderboard", "add", str(tampered), "--to", str(shipped)])
    assert out.exit_code == 1 and "refused" in out.output and "does not reproduce" in out.output
    assert "values.value[0]" in out.output
    assert _files(shipped) == {"digits-mlp/norm.params.json": good.read_bytes()}  # the verified record is kept

    failed = records_dir / "digits-mlp" / "broken.entry.json"
    out = runner.invoke(app, ["leaderboard", "add", str(failed), "--to", str(shipped)])
    assert out.exit_code == 1 and "a failed record is not added" in " ".join(out.output.split())
    assert "ZeroDivisionError: on purpose" in " ".join(out.output.split())
    assert sorted(_files(shipped)) == ["digits-mlp/norm.params.json"]

    rec = read_record(good)
    rec["zoo"].update(complete=False, models=12, expected_models=24)  # scored on a partial zoo
    partial = tmp_path / "partial" / "norm.fro_prod.json"
    partial.parent.mkdir()
    partial.write_text(json.dumps({**rec, "name": "norm.fro_prod"}))
    out = runner.invoke(app, ["leaderboard", "add", str(partial), "--to", str(shipped)])
    assert out.exit_code == 1 and "a record on a partial zoo (12 of 24 models) is not added" in " ".join(out.output.split())
    assert sorted(_files(shipped)) == ["digits-mlp/norm.params.json"]

    out = runner.invoke(app, ["leaderboard", "add", str(good), "--to", str(tmp_path / "nowhere")])
    assert out.exit_code != 0 and "is not a folder" in str(out.exception)
    monkeypatch.setattr(paths, "shipped_results_dir", lambda: None)  # an installed package: no shipped folder
    out = runner.invoke(app, ["leaderboard", "add", str(good)])
    assert out.exit_code != 0 and "installed package" in str(out.exception) and "--to" in str(out.exception)


def test_leaderboard_shows_shipped_and_local_records_together_and_failed_ones_apart(records_dir, tmp_path,
                                                                                   monkeypatch):
    import shutil

    import genbench.cli as cli
    import genbench.paths as paths

    shipped, home = tmp_path / "shipped", tmp_path / "home"
    for folder, names in ((shipped, ["norm.params"]), (home / "results", ["norm.params", "norm.fro_prod",
                                                                          "broken.entry"])):
        (folder / "digits-mlp").mkdir(parents=True)
        for name in names:  # norm.params in both: the same record, added to the shipped folder
            shutil.copy(records_dir / "digits-mlp" / f"{name}.json", folder / "digits-mlp")
    monkeypatch.setattr(paths, "shipped_results_dir", lambda: shipped)
    monkeypatch.setenv("GENBENCH_HOME", str(home))
    monkeypatch.setattr(cli.console, "width", 80)
    runner = CliRunner()

    out = runner.invoke(app, ["leaderboard"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = {line.split()[2]: line for line in lines if line.split()[:1] in (["1"], ["2"])}
    assert sorted(rows) == ["norm.fro_prod", "norm.params"]  # ranked together; the failed one is not in the table
    assert "norm.fro_prod *" in rows["norm.fro_prod"] and "*" not in rows["norm.params"]
    failed_at = lines.index("failed on digits-mlp, not ranked:")
    assert failed_at > max(lines.index(rows[n]) for n in rows)
    assert not any("broken.entry" in line for line in lines[:failed_at])
    assert lines[failed_at + 1] == "  broken.entry *: ZeroDivisionError: on purpose"
    assert any(line.startswith("* local: your own record, not verified") for line in lines)

    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv"]).output))
    assert dict(zip(got["entry"], got["local"])) == {"norm.fro_prod": True, "norm.params": False,
                                                     "broken.entry": True}

    # --results replaces the defaults; any folder but the shipped one is local
    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv",
                                                      "--results", str(shipped)]).output))
    assert got["entry"].tolist() == ["norm.params"] and not got["local"].any()
    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv",
                                                      "--results", str(records_dir)]).output))
    assert got["local"].all() and len(got) == 3

    out = runner.invoke(app, ["leaderboard", "--html", str(tmp_path / "site")])
    assert out.exit_code == 0, out.output
    index = (tmp_path / "site" / "index.html").read_text()
    table, _, after = index.partition("</table>")
    assert 'data-name="norm.fro_prod"' in table and 'data-name="broken.entry"' not in table
    fro_row = table[table.index('data-name="norm.fro_prod"'):].split("</tr>")[0]
    params_row = table[table.index('data-name="norm.params"'):].split("</tr>")[0]
    assert "badge-local" in fro_row and "badge-local" not in params_row
    failed = after[after.index('class="failed-entries"'):]
    assert 'data-name="broken.entry"' in failed and "ZeroDivisionError: on purpose" in failed


# ---------------------------------------------------------------- records on partial zoos


@pytest.fixture(scope="module")
def partial_zoo(home, tmp_path_factory):
    """digits-mlp with 12 of its 24 models (an interrupted build), in a GENBENCH_HOME of its own."""
    import genbench as gb

    return gb.build_zoo("digits-mlp", tmp_path_factory.mktemp("partial_home") / "zoos" / "digits-mlp", limit=12,
                        progress=False)


def test_score_and_leaderboard_run_refuse_a_partial_zoo_saying_what_is_missing_and_how_to_finish_it(partial_zoo,
                                                                                                     tmp_path):
    import genbench as gb
    from genbench.errors import GenbenchError

    finish = f"finish it with `genbench zoo build digits-mlp --out {partial_zoo.root}`"
    values, results = tmp_path / "values.parquet", tmp_path / "results"
    for args in (["score", "norm.fro_sum", "--zoo", str(partial_zoo.root), "--values", str(values)],
                 ["leaderboard", "run", "norm.fro_sum", "--zoo", str(partial_zoo.root), "--results", str(results),
                  "--audit-zoo", ""]):
        out = CliRunner().invoke(app, args)
        assert isinstance(out.exception, GenbenchError), out.output
        message = " ".join(str(out.exception).split())
        assert message.startswith(f"zoo 'digits-mlp' is partial: 12 of 24 models, 12 missing; {finish}"), message
        assert "(or pass --allow-partial to score it anyway" in message
    assert not values.exists() and not results.exists()  # refused before any value was computed
    df = gb.evaluate(["norm.fro_sum"], partial_zoo, progress=False)
    with pytest.raises(GenbenchError, match=r"12 missing; .* \(or pass allow_partial=True to score it anyway"):
        gb.score(df, partial_zoo)
    with pytest.raises(GenbenchError, match="12 missing"):
        run_entry("norm.fro_sum", partial_zoo, audit_zoo=None)
    assert gb.score(df, partial_zoo, n_boot=20, allow_partial=True)["norm.fro_sum"].n == 12
    out = CliRunner().invoke(app, ["score", "norm.fro_sum", "--zoo", str(partial_zoo.root), "--values", str(values),
                                   "--n-boot", "20", "--allow-partial"])
    assert out.exit_code == 0, out.output
    assert "note: zoo 'digits-mlp' is partial: 12 of 24 models" in " ".join(out.output.split())


def test_a_record_on_a_partial_zoo_is_marked_partial_and_listed_apart_unranked(partial_zoo, records_dir, tmp_path,
                                                                               monkeypatch):
    import shutil

    import genbench.cli as cli
    from genbench.leaderboard import write_site
    from genbench.leaderboard.ranking import mean_ranks
    from genbench.leaderboard.schema import Record

    results = tmp_path / "results"
    shutil.copytree(records_dir, results)
    out = CliRunner().invoke(app, ["leaderboard", "run", "norm.fro_sum", "--zoo", str(partial_zoo.root), "--results",
                                   str(results), "--audit-zoo", "", "--n-boot", "20", "--allow-partial"])
    assert out.exit_code == 0, out.output
    assert "not audited, unranked: partial zoo (12 of 24 models) ->" in " ".join(out.output.split())
    path = results / "digits-mlp" / "norm.fro_sum.json"
    rec = Record.read(path)
    assert rec.ok and not rec.zoo_complete and (rec.zoo_models, rec.zoo_expected_models) == (12, 24)
    assert rec.zoo["complete"] is False and rec.command.endswith(" --allow-partial")
    complete = read_record(results / "digits-mlp" / "norm.params.json")  # made on the complete zoo: as before
    assert sorted(complete["zoo"]) == ["name", "revision", "table_sha256", "version"]

    records = load_records(results)
    ranked = rank_records(records)
    assert [r.rank for r in ranked] == [1, 2, None, None]  # two complete records ranked, then the partial, failed
    assert [r.name for r in ranked][2:] == ["norm.fro_sum", "broken.entry"]
    assert "norm.fro_sum" not in {m.entry for m in mean_ranks(ranked)}
    table = leaderboard_table(records).set_index("entry")
    assert table.loc["norm.fro_sum", "note"] == "unranked: partial zoo (12 of 24 models)"
    assert table.loc["norm.fro_sum", "fragility"] == "not audited; unranked: partial zoo (12 of 24 models)"
    assert table.loc["norm.params", "note"] == "" and table.loc["norm.params", "fragility"] == "not audited"

    monkeypatch.setattr(cli.console, "width", 200)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(results)])
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if "norm.fro_sum" in line)
    assert row.replace("\u2502", " ").split()[:3] == ["-", "-", "norm.fro_sum"] and "unranked: partial" in row

    index = write_site(records, tmp_path / "site").read_text()
    tr = next(t for t in index.split("<tr ") if 'data-name="norm.fro_sum"' in t)
    assert tr.startswith('class="partial') and "badge-partial" in tr
    assert "Unranked: partial zoo (12 of 24 models): its scores describe only the models the zoo held" in tr
    assert "2 ranked entries" in index and "1 unranked: scored on a partial zoo" in index
    page = (tmp_path / "site" / "entries" / "digits-mlp" / "norm.fro_sum.html").read_text()
    assert '<section class="partial" id="partial">' in page and "Unranked: partial zoo (12 of 24 models)" in page

    monkeypatch.setenv("GENBENCH_HOME", str(partial_zoo.root.parents[1]))  # where verify finds the zoo by name
    assert verify_record(path).ok  # re-run on the same partial zoo, as recorded


def test_shipped_records_are_on_complete_zoos_and_carry_no_completeness_fields():
    from pathlib import Path

    from genbench.leaderboard.schema import Record

    paths = sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "results").glob("*/*.json"))
    assert len(paths) >= 44
    for path in paths:
        rec = Record.read(path)
        assert rec.zoo_complete and sorted(rec.zoo) == ["name", "revision", "table_sha256", "version"], path
