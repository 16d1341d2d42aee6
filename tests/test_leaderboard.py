"""Result records, ranking with rank groups, the leaderboard command and `genbench verify`."""
from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.leaderboard.export import leaderboard_table
from genbench.leaderboard.standings import aggregate_table, rank_records
from genbench.entries.run import failure_record, run_entry
from genbench.leaderboard.columns import score_spec
from genbench.errors import GenbenchError
from genbench.record import Record, load_records, read_record, shown_records, write_record
from genbench.entries.verify import misplaced, verify_record
from helpers import parsed_command


@pytest.fixture(scope="module")
def records_dir(digits_zoo, tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    for name in ("norm.fro_prod", "norm.params"):
        write_record(run_entry(name, digits_zoo, audit_zoo=None, n_boot=50), root)
    # a built-in's record is named by its measure, as `leaderboard run` names it
    write_record(failure_record("broken.entry", "broken.entry", digits_zoo, "ZeroDivisionError: on purpose"), root)
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


def test_leaderboard_command_formats_agree_with_the_table(records_dir):
    runner = CliRunner()
    expected = leaderboard_table(load_records(records_dir))
    out = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "csv"])
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.stdout))  # stdout is the data; its notes go to stderr
    assert got["entry"].tolist() == expected["entry"].tolist()
    assert got["entry"].iloc[-1] == "broken.entry" and pd.isna(got["rank"].iloc[-1])
    js = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "json"])
    assert [r["entry"] for r in json.loads(js.stdout)] == expected["entry"].tolist()
    assert "group: entries whose paired 95% bootstrap interval" in js.stderr
    md = runner.invoke(app, ["leaderboard", "--results", str(records_dir), "--format", "markdown"])
    verdict, table = md.output.split("\n\n", 1)  # each zoo's table opens with its verdict, in bold
    assert verdict.startswith("**digits-mlp (test zoo): The best measure, norm.fro_prod, reaches k-fold R\u00b2 ")
    assert verdict.endswith("**")
    assert table.startswith("| zoo") and "norm.fro_prod" in table
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
    head = next(line for line in out.output.splitlines() if line.split()[:3] == ["rank", "group", "entry"])
    assert "k-fold R2 [95%]" in head and ("citation" in head) == (width == 200)  # every column where they fit
    assert ("--format markdown or csv gives them all" in " ".join(out.output.split())) == (width == 80)


def test_the_measured_width_of_a_terminal_table_is_its_printed_width(monkeypatch):
    """terminal.width measures a table instead of printing it: on every table a narrow leaderboard of a shipped zoo
    tries (the wide one, the headline ones, wrapping fragility and long citations), the two agree."""
    import genbench.cli as cli
    import genbench.leaderboard.terminal as terminal
    from rich.console import Console

    def printed(table) -> int:
        out = Console(file=io.StringIO(), width=100_000, color_system=None)
        out.print(table)
        return max(len(line) for line in out.file.getvalue().splitlines())

    pairs = []
    measured = terminal.width
    monkeypatch.setattr(terminal, "width", lambda t: pairs.append((measured(t), printed(t))) or pairs[-1][0])
    monkeypatch.setattr(cli.console, "width", 80)
    out = CliRunner().invoke(app, ["leaderboard", "--zoo", "mnist1d-demogen"])
    assert out.exit_code == 0, out.output
    assert len(pairs) >= 3 and all(a == b for a, b in pairs), pairs


def test_a_citation_with_a_tab_is_one_line_of_the_terminal_table_and_not_cut():
    """Rich counts a tab as no cells, so a no-wrap cell holding one was cut with an ellipsis on any terminal."""
    from rich.console import Console
    from rich.table import Column, Table

    from genbench.leaderboard.terminal import short_citation

    assert short_citation("Doe\tand  Roe 2020. A title") == "Doe and Roe 2020"
    assert short_citation("A\tcitation   without a year") == "A citation without a year"
    t = Table(Column("citation", no_wrap=True))
    t.add_row(short_citation("Doe\tet al. 2021, a title"))
    out = Console(file=io.StringIO(), width=200, color_system=None)
    out.print(t)
    assert "Doe et al. 2021" in out.file.getvalue() and "\u2026" not in out.file.getvalue()


@pytest.mark.parametrize("sort", ["cmi_pgdl", "sign_error_p90", "sign_error_mean"])
def test_narrow_terminal_table_shows_a_sort_score_that_is_no_column_of_the_table(tmp_path, monkeypatch, sort):
    import genbench.cli as cli

    for name, v, lo, hi in (("a", 0.12, 0.05, 0.2), ("b", 0.3, 0.25, 0.41)):
        write_record({"schema": 3, "name": name, "measure": name, "zoo": {"name": "z"}, "status": "ok",
                      "kind": "scalar", "citation": "", "scores": {"values": {sort: v, "tau": 0.5},
                                                                   "intervals": {sort: [lo, hi]}}}, tmp_path)
    monkeypatch.setattr(cli.console, "width", 80)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(tmp_path), "--sort", sort])
    assert out.exit_code == 0, out.output
    assert f"{score_spec(sort).ascii} [95%]" in out.output and max(len(line) for line in out.output.splitlines()) <= 80
    rows = {line.split()[2]: line for line in out.output.splitlines()
            if line.split()[2:3] in (["a"], ["b"]) and line.split()[0].isdigit()}
    assert "0.12 [0.05, 0.20]" in rows["a"] and "0.30 [0.25, 0.41]" in rows["b"]
    best = "a" if score_spec(sort).lower_is_better else "b"
    assert rows[best].split()[0] == "1"
    assert f"group: none when ranked by {sort}" in " ".join(out.output.split())  # no paired groups for this score


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
    out = CliRunner().invoke(app, ["verify", str(tampered)])  # not re-run: the code that made it is gone
    assert out.exit_code == 1 and "cannot verify" in out.output and "does not reproduce" not in out.output
    rec["provenance"]["measure_source_hash"] = read_record(path)["provenance"]["measure_source_hash"]
    tampered.write_text(json.dumps(rec))
    out = CliRunner().invoke(app, ["verify", str(tampered), str(path)])
    assert out.exit_code == 1 and "does not reproduce" in out.output and "scores.values.tau" in out.output
    assert "2 records: 1 does not reproduce, 1 reproduced" in out.output
    two = tmp_path / "two"  # a folder of records: each verified, in name order
    two.mkdir()
    shutil.copy(path, two / "norm.params.json")
    shutil.copy(tampered, two / "t.json")
    (two / "u.json").write_text("not a record")  # said, and the others still verified
    out = CliRunner().invoke(app, ["verify", str(two)])
    assert out.exit_code == 1 and "3 records: 1 reproduced, 1 does not reproduce, 1 cannot verify" in out.output
    assert "u.json: not JSON (" in " ".join(out.output.split())
    assert "evaluate digits-mlp: 100%|" in out.output  # the progress of its evaluation (minutes on a search measure)


def test_verify_says_when_a_record_it_reproduces_lies_where_a_leaderboard_skips_it(records_dir, tmp_path):
    """A record renamed inside its zoo's folder still reproduces, but the leaderboard of that folder skips it."""
    path = records_dir / "digits-mlp" / "norm.params.json"
    (tmp_path / "digits-mlp").mkdir()
    renamed = tmp_path / "digits-mlp" / "best.json"
    shutil.copy(path, renamed)
    out = CliRunner().invoke(app, ["verify", str(renamed), str(path)])
    said = " ".join(out.output.split())
    assert out.exit_code == 0 and "2 records: 2 reproduced" in said
    assert said.count("note: this file is the record of entry") == 1
    place = f"whose place in the results folder is {tmp_path / 'digits-mlp' / 'norm.params.json'}"
    assert "".join(place.split()) in "".join(out.output.split())  # a long path is wrapped anywhere
    assert "rename it to norm.params.json" in said
    assert misplaced(Record.read(path), path) is None  # at its place: nothing to say
    assert misplaced(Record.read(renamed), tmp_path / "elsewhere.json") is None  # not in a zoo's folder


def test_leaderboard_run_says_once_why_its_records_are_not_audited(digits_zoo, tmp_path):
    """The audit zoo not built here: the first record's line says why and how to build it, the next refer to it."""
    out = CliRunner().invoke(app, ["leaderboard", "run", "norm.params", "norm.fro_prod", "--zoo", "digits-mlp",
                                   "--audit-zoo", "mnist1d-fragility", "--n-boot", "20", "--no-baselines",
                                   "--results", str(tmp_path)])
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    assert "norm.params: ok, k-fold R2" in said and "not audited (no fragility audit on mnist1d-fragility: " in said
    assert "genbench zoo build mnist1d-fragility" in said
    assert said.count("no fragility audit on") == 1 and "not audited (as above) ->" in said


def test_a_zoos_folder_given_as_results_is_told_to_name_the_folder_above(records_dir):
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(records_dir / "digits-mlp")])
    said = " ".join(str(out.exception).split())
    assert out.exit_code == 1 and f"{records_dir / 'digits-mlp'} holds records itself (NAME.json), not in zoo " \
        f"folders (ZOO/NAME.json): a results folder (--results) is the folder of zoo folders above it, " \
        f"{records_dir}" in said
    with pytest.raises(GenbenchError, match="holds records itself"):  # the API: an empty list before
        load_records(records_dir / "digits-mlp")
    with pytest.raises(GenbenchError, match="load_records takes a results folder .* got int 3"):
        load_records(3)
    assert {r.name for r in shown_records(str(records_dir))} == {r.name for r in load_records(records_dir)}
    import genbench.paths as paths
    home = records_dir.parent / "home-with-a-stray-record"
    (home / "results").mkdir(parents=True, exist_ok=True)
    shutil.copy(records_dir / "digits-mlp" / "norm.params.json", home / "results" / "norm.params.json")
    said = []
    with pytest.MonkeyPatch.context() as mp:  # the default folders: the user's own one holds a record itself
        mp.setenv("GENBENCH_HOME", str(home))
        mp.setattr(paths, "shipped_results_dir", lambda: records_dir)
        shown = shown_records(say=lambda text, kind: said.append(text))
    assert {r.name for r in shown} == {r.name for r in load_records(records_dir)}  # the shipped ones still shown
    assert any("holds records itself (NAME.json)" in line for line in said)


def test_record_files_are_the_files_named_and_the_records_of_the_folders_named(tmp_path):
    from genbench.errors import GenbenchError
    from genbench.record import record_files
    results = tmp_path / "results"
    for name in ("z1/b.json", "z1/a.json", "z2/c.json"):
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_text("{}")
    loose = tmp_path / "loose.json"
    assert record_files([loose, results]) == [loose, results / "z1/a.json", results / "z1/b.json", results / "z2/c.json"]
    assert record_files([results / "z2"]) == [results / "z2/c.json"]
    with pytest.raises(GenbenchError, match="no result records in the folder .*empty"):
        (tmp_path / "empty").mkdir()
        record_files([tmp_path / "empty"])


def test_verify_refuses_a_record_whose_audit_zoo_is_not_built_and_can_check_the_scores_alone(records_dir, tmp_path,
                                                                                              monkeypatch):
    """The audit zoo missing here: verify says so, with the command that builds it and its size, and runs nothing;
    --scores-only re-runs the entry without its audit and compares the status, scores and values."""
    import genbench.entries.verify as verify_module
    rec = read_record(records_dir / "digits-mlp" / "norm.params.json")
    rec["provenance"]["audit_zoo"] = "mnist1d-fragility"  # a recipe, not built in the tests' home
    rec["audit"] = {"zoo": "mnist1d-fragility", "verdict": "robust", "checks": [], "missing": [], "evidence": []}
    path = tmp_path / "audited.json"
    path.write_text(json.dumps(rec))
    real = verify_module.run_entry
    monkeypatch.setattr(verify_module, "run_entry", lambda *a, **k: pytest.fail("verify ran without its audit zoo"))
    v = verify_record(path)
    assert not v.ok and not v.differences and len(v.problems) == 1
    assert ("fragility audit ran on mnist1d-fragility, which is not built here: build it with `genbench zoo build "
            "mnist1d-fragility` (750 models to train)") in v.problems[0] and "--scores-only" in v.problems[0]
    out = CliRunner().invoke(app, ["verify", str(path)])
    assert out.exit_code == 1 and "genbench zoo build mnist1d-fragility" in " ".join(out.output.split())
    assert "cannot verify" in out.output and "does not reproduce" not in out.output
    monkeypatch.setattr(verify_module, "run_entry", real)
    assert verify_record(path, scores_only=True).ok
    rec["scores"]["values"]["tau"] += 0.01  # --scores-only still compares every score
    path.write_text(json.dumps(rec))
    v = verify_record(path, scores_only=True)
    assert [d[0] for d in v.differences] == ["scores.values.tau"]
    out = CliRunner().invoke(app, ["verify", str(path), "--scores-only"])
    assert out.exit_code == 1 and "scores.values.tau" in out.output


def test_add_refuses_a_record_whose_audit_zoo_is_not_built_without_offering_scores_only(records_dir, tmp_path,
                                                                                       monkeypatch):
    """`leaderboard add` has no --scores-only (a shipped record is verified with its audit), so its refusal does
    not offer it, and nothing is re-run."""
    import genbench.entries.verify as verify_module
    from genbench.entries.verify import add_record
    rec = read_record(records_dir / "digits-mlp" / "norm.params.json")
    rec["provenance"]["audit_zoo"] = "mnist1d-fragility"
    rec["audit"] = {"zoo": "mnist1d-fragility", "verdict": "robust", "checks": [], "missing": [], "evidence": []}
    path = tmp_path / "audited.json"
    path.write_text(json.dumps(rec))
    (tmp_path / "shipped").mkdir()
    monkeypatch.setattr(verify_module, "run_entry", lambda *a, **k: pytest.fail("add ran without its audit zoo"))
    v = add_record(path, tmp_path / "shipped")
    assert not v.ok and v.added is None and len(v.problems) == 1
    assert "build it with `genbench zoo build mnist1d-fragility`" in v.problems[0]
    assert "--scores-only" not in v.problems[0] and "added only with its audit repeated" in v.problems[0]


@pytest.mark.parametrize("flag,value", [("--rtol", "-1"), ("--atol", "-1e-8"), ("--atol", "nan"), ("--rtol", "inf")])
@pytest.mark.parametrize("command", [["verify"], ["leaderboard", "add", "--to", "."]])
def test_verify_and_add_refuse_a_tolerance_that_is_not_a_finite_number_at_least_zero(command, flag, value, tmp_path):
    """A negative tolerance called equal numbers different (thousands of 'differences' of 0 against 0), a nan one
    every number equal: refused before any record is read."""
    from genbench.errors import GenbenchError
    out = CliRunner().invoke(app, [*command, str(tmp_path / "missing.json"), flag, value])
    assert isinstance(out.exception, GenbenchError), out.output
    assert f"{flag} must be a finite number >= 0 (0: exact), got" in str(out.exception)
    with pytest.raises(GenbenchError, match=f"{flag} must be a finite number >= 0"):
        verify_record(tmp_path / "missing.json", **{flag[2:]: float(value)})


def test_verify_says_when_the_zoo_given_with_zoo_cannot_be_opened(records_dir):
    """A mistyped --zoo is the user's argument, not the record's zoo 'differing': said with its suggestion."""
    v = verify_record(records_dir / "digits-mlp" / "norm.params.json", zoo="digits-mpl")
    assert not v.ok and not v.differences and len(v.problems) == 1, v.problems
    said = " ".join(v.problems[0].split())
    assert said.startswith("--zoo: unknown zoo 'digits-mpl'") and "Did you mean 'digits-mlp'" in said, said
    assert "differs from the one this record cites" not in said


def test_verify_allows_rounding_in_the_rescaling_control_only():
    """The control's value is float rounding (1e-6) that moves with the thread count: within CONTROL_ATOL it
    reproduces; a real change, a flipped `failed` flag, or the same rounding in any other check does not."""
    from genbench.entries.verify import CONTROL_ATOL, _compare

    def diffs(old, new):
        out = []
        _compare("audit.checks", old, new, out, 1e-5, 1e-8)
        return [d[0] for d in out]

    control = {"part": "control", "label": "fragile-value", "value": 1.2628e-06, "failed": False}
    assert diffs([control], [{**control, "value": 1.2372e-06}]) == []
    assert diffs([control], [{**control, "value": 2 * CONTROL_ATOL}]) == ["audit.checks[0].value"]
    assert diffs([control], [{**control, "failed": True}]) == ["audit.checks[0].failed"]
    value = {"part": "value", "label": "fragile-value", "value": 1.2628e-06, "failed": False}
    assert diffs([value], [{**value, "value": 1.2372e-06}]) == ["audit.checks[0].value"]


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
    junk = tmp_path / "junk.json"
    junk.write_text("not a record")  # refused, and the record after it still added
    out = runner.invoke(app, ["leaderboard", "add", str(junk), str(good), "--to", str(shipped)])
    assert out.exit_code == 1, out.output
    assert "added" in out.output and "reproduced" in out.output and "junk.json: not added" in " ".join(out.output.split())
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

    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv"]).stdout))
    assert dict(zip(got["entry"], got["local"])) == {"norm.fro_prod": True, "norm.params": False,
                                                     "broken.entry": True}

    # --results replaces the defaults; any folder but the shipped one is local
    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv",
                                                      "--results", str(shipped)]).stdout))
    assert got["entry"].tolist() == ["norm.params"] and not got["local"].any()
    got = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--format", "csv",
                                                      "--results", str(records_dir)]).stdout))
    assert got["local"].all() and len(got) == 3

    out = runner.invoke(app, ["leaderboard", "--html", str(tmp_path / "site")])
    assert out.exit_code == 0, out.output
    index = (tmp_path / "site" / "index.html").read_text()
    table, _, after = index.partition("</table>")
    rows = {tr.split('data-name="')[1].split('"')[0]: tr.split("</tr>")[0] for tr in table.split("<tr ")[1:]
            if 'data-name="' in tr}
    assert sorted(rows) == ["norm.fro_prod", "norm.params"]  # the failed one is not in the table
    assert "badge-local" in rows["norm.fro_prod"] and "badge-local" not in rows["norm.params"]
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
    from genbench.leaderboard.standings import mean_ranks
    from genbench.record import Record

    results = tmp_path / "results"
    shutil.copytree(records_dir, results)
    out = CliRunner().invoke(app, ["leaderboard", "run", "norm.fro_sum", "--zoo", str(partial_zoo.root), "--results",
                                   str(results), "--audit-zoo", "", "--n-boot", "20", "--allow-partial",
                                   "--no-baselines"])
    assert out.exit_code == 0, out.output
    assert "not audited, unranked: partial zoo (12 of 24 models) ->" in " ".join(out.output.split())
    path = results / "digits-mlp" / "norm.fro_sum.json"
    rec = Record.read(path)
    assert rec.ok and not rec.zoo_complete and (rec.zoo_models, rec.zoo_expected_models) == (12, 24)
    assert rec.zoo["complete"] is False
    # the command that makes the record again says every setting that is not the default, '' as --no-audit
    assert rec.command == "genbench leaderboard run norm.fro_sum --zoo digits-mlp --no-audit --n-boot 20 --allow-partial"
    command, params = parsed_command(rec.command)
    assert command == "leaderboard run" and params["no_audit"] and params["allow_partial"] and params["n_boot"] == 20
    from genbench.zoo.roles import audit_zoo_of
    auto = audit_zoo_of(partial_zoo)  # named, the zoo the default picks is said as the default (not built: a note)
    named = Record(run_entry("norm.fro_sum", partial_zoo, audit_zoo=auto, n_boot=20, allow_partial=True))
    assert named.command == "genbench leaderboard run norm.fro_sum --zoo digits-mlp --n-boot 20 --allow-partial"
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
    tr = next(t for t in (t.split("</tr>")[0] for t in index.split("<tr ")[1:]) if 'data-name="norm.fro_sum"' in t)
    assert tr.startswith('class="partial') and "badge-partial" in tr
    assert "Unranked: partial zoo (12 of 24 models): its scores describe only the models the zoo held" in tr
    assert "2 ranked entries" in index and "1 unranked: scored on a partial zoo" in index
    page = (tmp_path / "site" / "entries" / "digits-mlp" / "norm.fro_sum.html").read_text()
    assert '<section class="partial" id="partial">' in page and "Unranked: partial zoo (12 of 24 models)" in page

    monkeypatch.setenv("GENBENCH_HOME", str(partial_zoo.root.parents[1]))  # where verify finds the zoo by name
    assert verify_record(path).ok  # re-run on the same partial zoo, as recorded


def test_shipped_records_are_on_complete_zoos_and_carry_no_completeness_fields():
    from pathlib import Path

    from genbench.record import Record

    paths = sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "results").glob("*/*.json"))
    assert len(paths) >= 44
    for path in paths:
        rec = Record(json.loads(path.read_text()))  # whatever their schema: the zoo block is the same
        assert rec.zoo_complete and sorted(rec.zoo) == ["name", "revision", "table_sha256", "version"], path


def test_every_shipped_score_lies_inside_its_interval_and_its_pooled_kfold_is_recomputed_from_the_record():
    """Issue 14: no point outside its own interval; the k-fold R^2 and its interval are what the record's own held-out
    predictions give on the zoo's paired resamples (the leaderboard recomputes groups from exactly these)."""
    from pathlib import Path

    import numpy as np

    from genbench.record import Record
    from genbench.scoring.resample import percentile_interval, pooled_scores, resample_weights

    paths = sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "results").glob("*/*.json"))
    checked = 0
    for path in paths:
        rec = Record(json.loads(path.read_text()))
        if not rec.ok:
            continue
        for key in rec.score_keys():
            v, (lo, hi) = rec.score(key), rec.interval(key)
            if v is not None and lo is not None:
                assert lo <= v <= hi, (path.name, key, v, lo, hi)
                checked += 1
        boot = rec.scores["bootstrap"]
        w = resample_weights(len(rec.values["model_id"]), table_sha256=boot["table_sha256"], seed=boot["seed"],
                             n_boot=boot["n_boot"])
        over = rec.n_trainings > 1  # each training's k-fold R^2 from its own held-out predictions; the score their mean
        points = []
        for t in range(rec.n_trainings if over else 1):
            part = rec.training_part(t) if over else {}
            gap, held = (rec.values["gap"], rec.values["heldout"]) if t == 0 else (part["gap"], part["heldout"])
            heldout = np.array([[np.nan if x is None else x for x in row] for row in held])
            r2, _ = pooled_scores(np.array(gap), heldout)
            stated = part["values"]["kfold_r2"] if over else rec.score("kfold_r2")
            assert r2[0] == pytest.approx(stated, abs=1e-12), (path.name, t)
            iv = part["intervals"]["kfold_r2"] if over else rec.interval("kfold_r2")
            assert percentile_interval(pooled_scores(np.array(gap), heldout, w)[0]) == \
                pytest.approx(iv, abs=1e-12), (path.name, t)
            points.append(r2[0])
        assert np.mean(points) == pytest.approx(rec.score("kfold_r2"), abs=1e-12), path.name
    assert checked > 200



def _machine_paths(obj, where=""):
    """Every string of a record that names an absolute path on the machine that made it (where, text)."""
    import re
    if isinstance(obj, dict):
        return [hit for k, v in obj.items() for hit in _machine_paths(v, f"{where}.{k}")]
    if isinstance(obj, list):
        return [hit for i, v in enumerate(obj) for hit in _machine_paths(v, f"{where}[{i}]")]
    if isinstance(obj, str) and re.search(r"(^|[\s=])/(work|root|home|tmp|Users|var|opt)/", obj):
        return [(where, obj)]
    return []


def test_no_shipped_record_names_a_path_of_the_machine_that_made_it():
    """A submission's path and command are relative to the checkout (submissions/NAME): records made with another
    checkout on the path once recorded /work/main/submissions/NAME."""
    from pathlib import Path

    planted = {"submission": {"path": "/work/main/submissions/x"},
               "provenance": {"command": "genbench submit /root/subs/x --zoo z"}}
    assert [w for w, _ in _machine_paths(planted)] == [".submission.path", ".provenance.command"]
    paths = sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "results").glob("*/*.json"))
    found = [(p.name, hit) for p in paths for hit in _machine_paths(json.loads(p.read_text()))]
    assert found == []

def test_every_shipped_verdict_over_trainings_is_what_the_rule_says_of_its_trainings_parts():
    """A record's scores.verdicts are re-derived from its per-training parts (each training's intervals, its
    difference with the recipe, its direction check) by the rule the records are made with, so records left behind
    by a change of the rule fail here until they are re-scored (genbench leaderboard rescore)."""
    from pathlib import Path

    from genbench.record import Record
    from genbench.scoring.trainings import VERDICTS, verdict_of

    paths = sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "results").glob("*/*.json"))
    checked = 0
    for path in paths:
        rec = Record(json.loads(path.read_text()))
        if not rec.ok or rec.n_trainings < 2 or not rec.verdicts:
            continue
        parts = [rec.training_part(t) for t in range(rec.n_trainings)]
        claim = (rec.scores.get("direction") or {}).get("claim")
        trainings = [{"vs_recipe": p["vs_recipe"], "intervals": p["intervals"], "refused": p["refused"],
                      "direction": {"claim": claim, "against": p["against"]}} for p in parts]
        for key in VERDICTS:
            stated, derived = rec.verdicts.get(key), verdict_of(key, trainings)
            if derived is not None and derived.get("predicted") is not None:  # scipy's t may move by an ulp
                assert stated["predicted"] == pytest.approx(derived.pop("predicted"), rel=1e-12, abs=1e-15)
                stated = {k: v for k, v in stated.items() if k != "predicted"}
            assert stated == derived, (path.name, key)
            checked += key in rec.verdicts
    assert checked > 200

# ---------------------------------------------------------------- the paired bootstrap behind the rank groups


def test_pooled_scores_agree_with_scikit_learn_unweighted_and_weighted():
    import numpy as np
    from sklearn.metrics import mean_squared_error, r2_score

    from genbench.scoring.resample import pooled_scores

    rng = np.random.default_rng(3)
    y = rng.lognormal(-2.5, 0.6, 60)
    heldout = y + rng.normal(0, 0.04, (4, 60))  # 4 shuffles of held-out predictions
    r2, mse = pooled_scores(y, heldout)
    assert r2.shape == mse.shape == (1,)
    assert r2[0] == pytest.approx(np.mean([r2_score(y, h) for h in heldout]), abs=1e-12)
    assert mse[0] == pytest.approx(np.mean([mean_squared_error(y, h) for h in heldout]), abs=1e-15)
    counts = rng.multinomial(60, np.full(60, 1 / 60), size=3)  # three resamples: models repeated or left out
    r2_w, mse_w = pooled_scores(y, heldout, counts)
    for b, c in enumerate(counts):
        ys, hs = np.repeat(y, c), np.repeat(heldout, c, axis=1)
        assert r2_w[b] == pytest.approx(np.mean([r2_score(ys, h) for h in hs]), abs=1e-12)
        assert mse_w[b] == pytest.approx(np.mean([mean_squared_error(ys, h) for h in hs]), abs=1e-15)
    missing = heldout.copy()
    missing[2, 5] = np.nan  # a model without a value in one shuffle is left out of every shuffle
    keep = np.arange(60) != 5
    assert pooled_scores(y, missing)[0][0] == pytest.approx(
        np.mean([r2_score(y[keep], h[keep]) for h in heldout]), abs=1e-12)


def test_resample_weights_are_a_function_of_the_table_hash_and_the_seed():
    import numpy as np

    from genbench.errors import GenbenchError
    from genbench.scoring.resample import resample_weights

    a = resample_weights(216, table_sha256="f7120e70", seed=0, n_boot=1000)
    assert a.shape == (1000, 216) and (a.sum(1) == 216).all()
    assert np.array_equal(a, resample_weights(216, table_sha256="f7120e70", seed=0, n_boot=1000))
    assert not np.array_equal(a, resample_weights(216, table_sha256="0e4b1c2d", seed=0, n_boot=1000))
    assert not np.array_equal(a, resample_weights(216, table_sha256="f7120e70", seed=1, n_boot=1000))
    with pytest.raises(GenbenchError, match="n_boot >= 1"):
        resample_weights(216, table_sha256="f7120e70", seed=0, n_boot=0)


def _planted(n=216, n_boot=1000):
    """On one zoo of n models: the gap plus small noise, the gap plus that noise and more, an exact copy of the
    first under another name, and a baseline row."""
    import numpy as np

    from site_records import gaps, heldout_of, scored_record

    gap = gaps(n, 11)
    rng = np.random.default_rng(12)
    small = rng.normal(0, 0.4 * gap.std(), n)
    large = small + rng.normal(0, 0.3 * gap.std(), n)
    base = rng.normal(0, 0.8 * gap.std(), n)
    kw = {"n_boot": n_boot, "extra": {"tau": 0.6}}
    a = scored_record("small_noise", "z", gap, heldout_of(gap, small, 1), **kw)
    b = scored_record("large_noise", "z", gap, heldout_of(gap, large, 2), **kw)
    copy = {**json.loads(json.dumps(a)), "name": "small_noise_copy", "measure": "small_noise_copy"}
    baseline = scored_record("baseline.hparams", "z", gap, heldout_of(gap, base, 3), baseline=True,
                             citation="the gap from the hyperparameters alone", **kw)
    return [b, copy, baseline, a]


def test_a_planted_pair_with_overlapping_intervals_lands_in_different_paired_groups():
    from genbench.record import Record

    records = _planted()
    a, b = (Record(next(r for r in records if r["name"] == name)) for name in ("small_noise", "large_noise"))
    (alo, ahi), (blo, bhi) = a.interval("kfold_r2"), b.interval("kfold_r2")
    assert a.score("kfold_r2") > b.score("kfold_r2")
    assert alo <= bhi and blo <= ahi  # the marginal 95% intervals overlap: overlap alone would not separate them
    ranked = {r.name: r for r in rank_records(records)}
    assert set(ranked) == {"small_noise", "large_noise", "baseline.hparams"}  # the copy is shown once, as an alias
    assert ranked["small_noise"].aliases == ["small_noise_copy"]
    assert (ranked["small_noise"].rank, ranked["small_noise"].rank_group) == (1, 1)
    assert (ranked["large_noise"].rank, ranked["large_noise"].rank_group) == (2, 2)  # paired: a group of its own
    assert ranked["baseline.hparams"].rank is None and ranked["baseline.hparams"].rank_group == 3


def test_identical_measures_share_a_group_and_are_shown_once():
    from site_records import gaps, heldout_of, scored_record

    import numpy as np

    gap = gaps(216, 5)
    noise = np.random.default_rng(6).normal(0, 0.5 * gap.std(), 216)
    first = scored_record("norm.fro_prod", "z", gap, heldout_of(gap, noise, 1), n_boot=300)
    same = {**first, "name": "norm.fro_sum", "measure": "norm.fro_sum"}
    nearly = json.loads(json.dumps(first))
    nearly["name"] = nearly["measure"] = "norm.fro_other"
    nearly["values"]["heldout"][3][7] += 1e-9  # predictions differ: a different entry, in the same group
    ranked = rank_records([same, nearly, first])
    assert [(r.name, r.aliases) for r in ranked] == [("norm.fro_other", []), ("norm.fro_prod", ["norm.fro_sum"])] \
        or [(r.name, r.aliases) for r in ranked] == [("norm.fro_prod", ["norm.fro_sum"]), ("norm.fro_other", [])]
    assert {r.rank_group for r in ranked} == {1}
    table = leaderboard_table([same, nearly, first]).set_index("entry")
    assert table.loc["norm.fro_prod", "aliases"] == "norm.fro_sum" and "norm.fro_sum" not in table.index


def test_paired_groups_of_50_entries_with_growing_noise_separate():
    """50 entries on 216 models, each noisier than the last: paired groups tell them apart (the time this takes is
    benchmarks/ranking.py's)."""
    import numpy as np

    from site_records import gaps, heldout_of, scored_record

    gap = gaps(216, 8)
    rng = np.random.default_rng(9)
    records = [scored_record(f"m{i:02d}", "z", gap, heldout_of(gap, rng.normal(0, (0.2 + i / 50) * gap.std(), 216),
                                                                i), n_boot=1000) for i in range(50)]
    ranked = rank_records(records)
    assert len(ranked) == 50 and ranked[0].rank_group == 1 and ranked[-1].rank_group > 5


# ---------------------------------------------------------------- baselines, hidden columns, refusals on every view


def _view_records():
    """The planted zoo with no sign-error anywhere (its note says why) and one refused adjusted R^2."""
    from site_records import ADJ_REFUSAL, SIGN_ERROR_NOTE

    records = _planted(n_boot=200)
    for r in records:
        r["scores"]["notes"].append(SIGN_ERROR_NOTE)
    records[0]["scores"]["refused"]["adj_r2"] = ADJ_REFUSAL  # large_noise
    for r in records[1], records[3]:  # small_noise and its copy: a value, with no interval (none is real)
        r["scores"]["values"]["adj_r2"] = 0.8
    return records


@pytest.fixture()
def view_dir(tmp_path):
    for r in _view_records():
        write_record(r, tmp_path)
    return tmp_path


@pytest.mark.parametrize("width", [80, 200])
def test_terminal_marks_the_baseline_hides_never_valued_columns_and_footnotes_refusals(view_dir, monkeypatch, width):
    import genbench.cli as cli
    from site_records import ADJ_REFUSAL

    monkeypatch.setattr(cli.console, "width", width)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(view_dir), "--explain"])  # the long legend
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert max(len(line) for line in lines) <= width
    text = " ".join(out.output.split())
    cells = [line.replace("\u2502", " ").split() for line in lines]
    rows = {c[2]: c for c in cells if c[:1] in (["1"], ["2"], ["base"]) and c[1].isdigit()}
    assert rows["small_noise"][:2] == ["1", "1"] and rows["large_noise"][:2] == ["2", "2"]
    assert rows["baseline.hparams"][:2] == ["base", "3"]  # marked, unnumbered, in a group
    assert "small_noise also: small_noise_copy" in text and sorted(rows) == ["baseline.hparams", "large_noise",
                                                                              "small_noise"]
    assert "group: entries whose paired 95% bootstrap interval of the k-fold R^2 difference with the group's " \
           "leader contains 0" in text
    assert "a measure below baseline.hparams predicts the gap worse than the training recipe alone" in text
    assert text.count("worse than the training recipe alone") == 1  # said once
    if width == 200:
        assert "sign-err" not in out.output.split("not shown")[0]  # no column for a score never valued here
        assert "not shown (sign-error (worst)): no entry has a value on this zoo; robust sign-error: none of" in text
        assert "\u2014[1]" in " ".join(rows["large_noise"]) and f"\u2014[1] refused: {ADJ_REFUSAL}" in text
        assert "0.80 " in " ".join(rows["small_noise"]) + " " and "0.80 [" not in out.output  # no interval: none
    else:
        assert "k-fold R2 [95%]" in out.output and "kfold_r2 [95%]" not in out.output  # the labels of every width


def test_exports_mark_baselines_and_aliases_and_keep_refusals_apart_from_numbers(view_dir):
    from site_records import ADJ_REFUSAL

    runner = CliRunner()
    out = runner.invoke(app, ["leaderboard", "--results", str(view_dir), "--format", "csv"])
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.stdout)).set_index("entry")
    assert list(got.index) == ["small_noise", "large_noise", "baseline.hparams"]
    assert bool(got.loc["baseline.hparams", "baseline"]) and pd.isna(got.loc["baseline.hparams", "rank"])
    assert got.loc["baseline.hparams", "group"] == 3 and got.loc["large_noise", "rank"] == 2
    assert got.loc["small_noise", "aliases"] == "small_noise_copy"
    assert pd.isna(got.loc["large_noise", "adj_r2"]) and got.loc["large_noise", "adj_r2_refused"] == ADJ_REFUSAL
    assert pd.isna(got.loc["small_noise", "adj_r2_lo"])  # an interval only where one exists
    assert "predicts the gap worse than the training recipe alone" in out.stderr
    rows = json.loads(runner.invoke(app, ["leaderboard", "--results", str(view_dir), "--format", "json"]).stdout)
    assert [r["baseline"] for r in rows] == [False, False, True] and rows[2]["rank"] is None
    md = runner.invoke(app, ["leaderboard", "--results", str(view_dir), "--format", "markdown"]).stdout
    verdict, table = md.split("\n\n")[:2]
    assert verdict.startswith("**z (not an official zoo): small_noise beats the recipe: k-fold R\u00b2 ")
    assert table.startswith("| zoo") and not {"sign_error_worst", "sign-err"} & set(table.split())
    row = {line.split("|")[4].strip(): line for line in md.splitlines() if line.startswith("| z ")}
    assert row["baseline.hparams"].split("|")[2].strip() == "base"
    assert "small_noise (also: small_noise_copy)" in row
    assert "\u2014[1]" in row["large_noise"] and f"\u2014[1] refused: {ADJ_REFUSAL}" in md
    assert "not shown (sign-error (worst)): no entry has a value on this zoo; robust sign-error" in md
    assert "group: entries whose paired 95% bootstrap interval of the k-fold R^2 difference" in md
    assert md.count("predicts the gap worse than the training recipe alone") == 1


# ---------------------------------------------------------------- one set of labels, whole text, one naming rule


@pytest.fixture()
def site_dir(tmp_path):
    """The site tests' records (two zoos, a submission, a baseline, an alias, a failure, long notes)."""
    from site_records import make_records

    for r in make_records():
        write_record(r, tmp_path)
    return tmp_path


def _board(results, width, monkeypatch, *args):
    import genbench.cli as cli

    monkeypatch.setattr(cli.console, "width", width)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(results), *(args or ("--all",))])  # full tables
    assert out.exit_code == 0, out.output
    return out.output


def _headers(output):
    """The column labels of each table the terminal printed."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in output.splitlines()
            if line.split()[:2] == ["rank", "group"] or line.split() == ["entry", "mean", "rank", "zoos"]]


def test_terminal_labels_are_the_same_at_every_width_and_long_text_wraps_whole(site_dir, monkeypatch):
    from site_records import FAIL_REASON, SIGN_ERROR_NOTE

    widest = _board(site_dir, 260, monkeypatch)
    labels = {label for head in _headers(widest) for label in head}
    assert {"rank", "group", "entry", "submission", "k-fold R2 [95%]", "adj R2 [95%]", "tau", "kind", "fragility",
            "citation"} <= labels
    for width in (80, 100, 120, 160, 200):
        out = _board(site_dir, width, monkeypatch)
        heads = _headers(out)
        assert heads and all(set(head) <= labels for head in heads), (width, heads)  # a subset, never other names
        assert all(head[:3] == ["rank", "group", "entry"] and "k-fold R2 [95%]" in head for head in heads[:2])
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= width
        text = " ".join(out.split())
        tokens = {t.rstrip(",;") for t in out.split()}  # a narrow table puts each label on a line of its own
        assert {"fragile-value", "fragile-trend"} <= tokens and "fragile-" not in tokens  # whole
        for whole in (SIGN_ERROR_NOTE, FAIL_REASON):  # notes and reasons wrap; nothing is cut, no word split
            assert whole in text, (width, whole)
            assert set(whole.split()) <= set(out.split()), width
        notes = [line for line in lines if line.startswith("  ") and not line.strip().startswith(("1", "2", "base"))]
        assert all(len(line) <= width for line in notes)


def test_markdown_and_csv_carry_every_column_with_intervals_and_citations(site_dir, monkeypatch):
    from genbench.record import Record
    from site_records import make_records

    import genbench.cli as cli

    monkeypatch.setattr(cli.console, "width", 80)
    runner = CliRunner()
    md = runner.invoke(app, ["leaderboard", "--results", str(site_dir), "--format", "markdown"]).stdout
    csv = pd.read_csv(io.StringIO(runner.invoke(app, ["leaderboard", "--results", str(site_dir), "--format",
                                                      "csv"]).stdout), keep_default_na=False)
    assert "--format markdown or csv gives them all" in " ".join(_board(site_dir, 80, monkeypatch).split())
    wide = {label for head in _headers(_board(site_dir, 260, monkeypatch)) for label in head}
    tables = [[c.strip() for c in part.splitlines()[0].strip("|").split("|")] for part in md.split("\n\n")
              if part.startswith("| zoo")]
    md_labels = {c for t in tables for c in t}
    for label in wide - {"mean rank", "zoos"}:  # every column the terminal shows, with its interval
        assert any(m == label or m == f"{label} [95%]" for m in md_labels), label
    cells = {}
    for part, head in zip((p for p in md.split("\n\n") if p.startswith("| zoo")), tables):
        for line in part.splitlines()[2:]:
            if line.startswith("| "):
                row = [c.strip() for c in line.strip().strip("|").split("|")]
                cells[(row[0], row[3].split(" (also")[0])] = dict(zip(head, row))
    for rec in map(Record, make_records()):
        if not rec.ok or rec.name == "norm.fro_sum":  # the alias is shown as norm.fro_prod
            continue
        entry = rec.measure
        got = cells[(rec.zoo_name, entry)]
        v, (lo, hi) = rec.score("kfold_r2"), rec.interval("kfold_r2")
        assert got["k-fold R2 [95%]"] == f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        assert got["citation"] == rec.citation
        row = csv[(csv["zoo"] == rec.zoo_name) & (csv["entry"] == entry)].iloc[0]
        assert row["citation"] == rec.citation
        assert (float(row["kfold_r2_lo"]), float(row["kfold_r2_hi"])) == pytest.approx((lo, hi))
        for k in ("adj_r2", "tau"):
            if rec.score(k) is not None and rec.interval(k)[0] is not None:
                assert (float(row[f"{k}_lo"]), float(row[f"{k}_hi"])) == pytest.approx(rec.interval(k))
                assert got[f"{score_spec(k).ascii} [95%]"].endswith(
                    f"[{rec.interval(k)[0]:.3f}, {rec.interval(k)[1]:.3f}]")


def test_entries_are_named_by_their_measure_with_the_submission_folder_beside_them_in_every_view(site_dir, tmp_path,
                                                                                                monkeypatch):
    from genbench.leaderboard import write_site
    from site_records import ZOO1, make_records

    for width in (80, 260):
        out = _board(site_dir, width, monkeypatch)
        rows = {line.split()[2]: line.split() for line in out.splitlines() if line.split()[:1] == ["2"]}
        assert "spectral_gap.value" in rows and "spectral_gap" not in rows  # the measure, not the folder
        if width == 260:
            # local, provisional (one training of an official grid); the folder beside it
            assert rows["spectral_gap.value"][3:6] == ["*", "~", "spectral_gap"]
        text = " ".join(out.split())
        assert "hangs.value * (submission hangs): timed out" in text
        assert "spectral_gap.value * ~ 2 1" in text  # the mean rank across zoos names it the same way (one training: provisional)
    csv = pd.read_csv(io.StringIO(CliRunner().invoke(app, ["leaderboard", "--results", str(site_dir), "--format",
                                                           "csv"]).stdout), keep_default_na=False)
    z1 = csv[csv["zoo"] == ZOO1].set_index("entry")
    assert z1.loc["spectral_gap.value", "submission"] == "spectral_gap" and z1.loc["hangs.value", "submission"] == \
        "hangs"
    assert z1.loc["norm.path", "submission"] == "" and "spectral_gap" not in z1.index
    md = CliRunner().invoke(app, ["leaderboard", "--results", str(site_dir), "--format", "markdown"]).stdout
    assert any("| spectral_gap.value " in line and "| spectral_gap " in line for line in md.splitlines())
    assert "failed: hangs.value (submission hangs): timed out" in md

    index = write_site(make_records(), tmp_path / "site").read_text()
    row = next(t for t in (t.split("</tr>")[0] for t in index.split("<tr ")[1:]) if 'data-name="spectral_gap"' in t)
    assert ">spectral_<wbr>gap.<wbr>value</a>" in row and '<span class="folder">spectral_gap</span>' in row
    page = (tmp_path / "site" / "entries" / ZOO1 / "spectral_gap.html").read_text()
    assert '<h1 id="entry-name">spectral_gap.value</h1>' in page and "submissions/spectral_gap" in page
    failed = index[index.index('class="failed-entries"'):]
    assert ">hangs.value</a>" in failed and "(submission hangs)" in failed


def test_only_the_official_zoos_enter_the_mean_rank_across_zoos_and_baselines_only_as_references():
    import copy

    from genbench.defaults import OFFICIAL_ZOOS

    records = _planted(n_boot=100)
    zoos = {z: copy.deepcopy(records) for z in (*OFFICIAL_ZOOS, "digits-mlp", "my-zoo")}
    for z, recs in zoos.items():
        for r in recs:
            r["zoo"]["name"] = z
    for r in zoos["digits-mlp"] + zoos["my-zoo"]:  # on the test and private zoos the order is reversed
        if r["name"] == "large_noise":
            r["scores"]["values"]["kfold_r2"] = 0.99
    everything = [r for recs in zoos.values() for r in recs]
    agg = aggregate_table(everything).set_index("entry")
    assert list(agg.index) == ["small_noise", "large_noise", "baseline.hparams"]
    assert agg.loc["small_noise", "mean_rank"] == 1.0 and not agg.loc["small_noise", "baseline"]
    # the baseline row is below both measures on every zoo: its place is 2 measures above it + 0.5, not a rank
    assert agg.loc["baseline.hparams", "mean_rank"] == 2.5 and agg.loc["baseline.hparams", "baseline"]
    assert list(agg["zoos"]) == [len(OFFICIAL_ZOOS)] * 3  # counted over the official zoos only
    assert aggregate_table(zoos["digits-mlp"] + zoos["my-zoo"]).empty
    partial = copy.deepcopy(zoos[OFFICIAL_ZOOS[1]])
    for r in partial:
        r["zoo"].update(complete=False, models=100, expected_models=216)
    agg = aggregate_table(zoos[OFFICIAL_ZOOS[0]] + partial).set_index("entry")
    assert list(agg["zoos"]) == [1, 1, 1]  # a partial build of an official zoo never enters


# ---------------------------------------------------------------- bad input


def _error(records, sort="kfold_r2"):
    from genbench.errors import GenbenchError

    with pytest.raises(GenbenchError) as e:
        rank_records(records, sort)
    return " ".join(str(e.value).split())


def test_records_of_different_zoo_versions_or_tables_are_refused_naming_them():
    records = _planted(n_boot=100)
    records[0]["zoo"]["version"] = 2
    msg = _error(records)
    assert "different versions" in msg and "large_noise" in msg and "version 2" in msg and "regenerate" in msg
    records = _planted(n_boot=100)
    records[2]["zoo"]["table_sha256"] = "0" * 64
    msg = _error(records, sort="tau")  # whatever the score: records of two tables are not comparable
    assert "table 000000000000: baseline.hparams" in msg and "genbench leaderboard baselines" in msg  # its command


@pytest.mark.parametrize("field, value", [("seed", 1), ("n_boot", 150)])
def test_records_made_with_other_bootstrap_settings_are_not_paired(field, value):
    records = _planted(n_boot=100)
    records[0]["scores"]["bootstrap"][field] = value
    msg = _error(records)
    assert "different bootstrap settings" in msg
    assert f"{field} {value}" in msg and "large_noise" in msg.split(f"{field} {value}")[1].split(";")[0]
    assert "--n-boot 100" in msg
    assert len(rank_records(records, "tau")) == 3  # a score without groups needs no pairing


def test_records_on_other_model_lists_or_without_heldout_predictions_are_not_paired():
    records = _planted(n_boot=100)
    r = records[1]  # the copy
    r["name"] = "short"
    for key in ("model_id", "gap", "prediction", "value", "error"):
        r["values"][key] = r["values"][key][:-1]
    r["values"]["heldout"] = [h[:-1] for h in r["values"]["heldout"]]
    msg = _error(records)
    assert "different model lists" in msg and "215 models" in msg and "short" in msg.split("215 models")[1]
    records = _planted(n_boot=100)
    del records[0]["values"]["heldout"]
    msg = _error(records)
    assert "cannot form paired rank groups" in msg and "large_noise lack the held-out predictions" in msg
    assert "--sort tau" in msg


def test_a_schema_1_record_is_refused_with_how_to_regenerate_it(tmp_path):
    from genbench.errors import GenbenchError

    rec = _planted(n_boot=100)[0]
    rec["schema"] = 1
    path = write_record(rec, tmp_path)
    with pytest.raises(GenbenchError, match=r"schema 1.*regenerate it with `genbench leaderboard run large_noise "
                                            r"--zoo z`"):
        read_record(path)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(tmp_path)])
    assert out.exit_code != 0 and "genbench leaderboard run" in str(out.exception)


def test_the_leaderboards_batched_draws_are_pooled_scores_entry_by_entry():
    import numpy as np

    from genbench.leaderboard.standings import _heldout_array, paired_draws
    from genbench.record import Record
    from genbench.scoring.resample import pooled_scores, resample_weights

    records = [Record(r) for r in _planted(n=80, n_boot=300)]
    records[0].data["values"]["heldout"][4][9] = None  # a model without a value: its own batch
    heldout = {r.name: _heldout_array(r) for r in records}
    w = resample_weights(80, table_sha256=records[0].table_sha256, seed=0, n_boot=300)
    gap = np.array(records[0].values["gap"])
    for sort, k in (("kfold_r2", 0), ("mse", 1)):
        expected = np.stack([pooled_scores(gap, heldout[r.name], w)[k] for r in records])
        assert np.allclose(paired_draws(records, heldout, sort), expected, rtol=0, atol=1e-12)


def test_the_leaderboard_recomputes_the_scorers_kfold_scores_and_intervals_from_a_record(records_dir):
    import numpy as np

    from genbench.leaderboard.standings import _heldout_array, paired_draws
    from genbench.scoring.resample import percentile_interval, pooled_scores

    recs = [r for r in load_records(records_dir) if r.ok]
    assert recs and all(r.heldout is not None and r.bootstrap for r in recs)
    heldout = {r.name: _heldout_array(r) for r in recs}
    for sort, k in (("kfold_r2", 0), ("mse", 1)):
        draws = paired_draws(recs, heldout, sort)
        for r, d in zip(recs, draws):
            assert pooled_scores(np.array(r.values["gap"]), heldout[r.name])[k][0] == pytest.approx(r.score(sort),
                                                                                                   abs=1e-12)
            if r.interval(sort) != (None, None):
                assert percentile_interval(d) == pytest.approx(r.interval(sort), abs=1e-12)


def test_records_are_made_with_the_pinned_thread_count_whatever_the_callers(digits_zoo, monkeypatch):
    """Float sums split by thread count, so a record is made (and verified) with build_threads() torch and BLAS
    threads, not the machine's: the measure sees 3 threads here although the caller runs 1, and the caller's count
    comes back afterwards."""
    import torch
    from threadpoolctl import threadpool_info

    import genbench as gb
    from genbench.measures import registry

    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "3")
    name = "test.threads_seen"

    @gb.register_measure(name, citation="test")
    def threads_seen(ctx):
        blas = {pool["num_threads"] for pool in threadpool_info()}
        return float(torch.get_num_threads()) if blas <= {3} else -1.0

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rec = run_entry(name, digits_zoo, audit_zoo=None, n_boot=20, cache=False)
        assert torch.get_num_threads() == 1
    finally:
        registry.unregister_measure(name)
        torch.set_num_threads(before)
    assert set(rec["values"]["value"]) == {3.0}


def test_failure_records_are_listed_and_removed_with_one_command(tmp_path):
    from site_records import failed_record, gaps, heldout_of, scored_record

    gap = gaps(30)
    write_record(scored_record("fine", "z", gap, heldout_of(gap, 0.1 * gap), n_boot=20), tmp_path)
    for name in ("hangs", "crashes"):
        write_record(failed_record(name, "z", reason=f"{name} on purpose"), tmp_path)
    runner = CliRunner()
    listed = runner.invoke(app, ["leaderboard", "failed", "--results", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert "hangs on purpose" in listed.output and "crashes on purpose" in listed.output
    assert "fine" not in listed.output.replace("failure records", "") and "--remove" in listed.output
    assert len(list((tmp_path / "z").glob("*.json"))) == 3  # listing removes nothing
    removed = runner.invoke(app, ["leaderboard", "failed", "--results", str(tmp_path), "--remove"])
    assert removed.exit_code == 0 and "removed 2 failure record(s)" in removed.output
    assert [p.name for p in (tmp_path / "z").glob("*.json")] == ["fine.json"]
    again = runner.invoke(app, ["leaderboard", "failed", "--results", str(tmp_path)])
    assert "no failure records under" in again.output
