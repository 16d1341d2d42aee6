"""Integrity: untrusted names never become paths, a malformed record never blanks the
leaderboard, inputs are never overwritten by outputs, bad budgets are refused before anything runs, concurrent
writers of a value table keep every column, and a crash while a zoo commits its table leaves a zoo that the next
build completes. Each test plants the problem and shows the guard holding."""
from __future__ import annotations

import json
import re
import shutil
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.fileio import sha256_file
from genbench.harness import values as values_mod
from genbench.record import (Record, SchemaError, SkippedRecordWarning, load_records, read_record,
                                         record_path, write_record)
from genbench.paths import is_plain_name, values_path
from genbench.entries.submit import submit
from genbench.zoo import build as build_mod
from genbench.zoo import storage

TRAVERSAL = "../../../escape/trav"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _output(result) -> str:
    """What a CLI run printed, stdout and stderr (click mixes them into `output`), on one line."""
    return " ".join(result.output.split())


def _record(name: str, zoo: str = "z", n: int = 30, seed: int = 0) -> dict:
    """A small, well-formed record of the current schema on a zoo of n models (held-out predictions: the gap plus
    noise)."""
    from site_records import gaps, heldout_of, scored_record

    gap = gaps(n)
    noise = np.random.default_rng(seed + 1).normal(0.0, 0.5 * gap.std(), n)
    return scored_record(name, zoo, gap, heldout_of(gap, noise, seed), n_boot=50)


# ---------------------------------------------------------------- item 4: untrusted names never become paths


def test_plain_names_are_file_names_and_nothing_else():
    for ok in ("digits-mlp", "mnist1d-demogen", "margin.qrt_log", "baseline.hparams", "w16_bn0_ln0.0_s0", "a..b"):
        assert is_plain_name(ok), ok
    for bad in (TRAVERSAL, "..", ".", "", ".hidden", "a/b", "a\\b", "/abs", "trav\n", "é", "x" * 201, None, 3):
        assert not is_plain_name(bad), bad


def test_a_zoo_whose_manifest_name_is_a_path_is_refused_and_nothing_is_written_outside(digits_zoo, home, tmp_path):
    planted = tmp_path / "downloads" / "a" / "zoo"
    shutil.copytree(digits_zoo.root, planted)
    manifest = json.loads((planted / "zoo.json").read_text())
    manifest["name"] = TRAVERSAL
    (planted / "zoo.json").write_text(json.dumps(manifest))
    with pytest.raises(GenbenchError) as info:
        gb.load_zoo(planted)
    msg = str(info.value)
    assert repr(TRAVERSAL) in msg and str(planted / "zoo.json") in msg and "field 'name'" in msg

    before, home_before = _files(tmp_path), _files(home)
    results = tmp_path / "results" / "x" / "y"
    runner = CliRunner()
    for args in (["leaderboard", "run", "norm.params", "--zoo", str(planted), "--results", str(results),
                  "--audit-zoo", "", "--no-baselines", "--n-boot", "20"],
                 ["evaluate", "norm.params", "--zoo", str(planted)],
                 ["score", "norm.params", "--zoo", str(planted), "--n-boot", "20"]):
        out = runner.invoke(app, args)
        assert isinstance(out.exception, GenbenchError) and repr(TRAVERSAL) in str(out.exception), out.output
    assert _files(tmp_path) == before and _files(home) == home_before  # no record, no value table, anywhere
    for base in (results, home / "values"):
        assert not (base / TRAVERSAL).resolve().parent.exists()
    state = storage.folder_state(planted)  # `zoo list` shows it as broken, with the reason
    assert state.state == "broken" and repr(TRAVERSAL) in state.detail


def test_a_zoo_table_whose_paths_or_hashes_lead_outside_is_refused(digits_zoo, tmp_path):
    """A Hub publisher controls models.parquet and the hash zoo.json cites for it: checkpoint paths and hashes (the
    value cache's file names) must stay inside."""
    for column, value in (("checkpoint", "../../outside.safetensors"), ("init_checkpoint", "/etc/passwd"),
                          ("checkpoint_sha256", "../../../cache/poison")):
        planted = tmp_path / column / "zoo"
        shutil.copytree(digits_zoo.root, planted)
        table = pd.read_parquet(planted / "models.parquet")
        table.loc[0, column] = value
        table.to_parquet(planted / "models.parquet", index=False)
        manifest = json.loads((planted / "zoo.json").read_text())
        manifest["files"]["models.parquet"] = sha256_file(planted / "models.parquet")
        (planted / "zoo.json").write_text(json.dumps(manifest))
        with pytest.raises(GenbenchError, match=f"column '{column}'") as info:
            gb.load_zoo(planted)
        assert repr(value) in str(info.value)
    planted = tmp_path / "files" / "zoo"
    shutil.copytree(digits_zoo.root, planted)
    manifest = json.loads((planted / "zoo.json").read_text())
    manifest["files"]["../../elsewhere.bin"] = "0" * 64
    (planted / "zoo.json").write_text(json.dumps(manifest))
    with pytest.raises(GenbenchError, match=r"'\.\./\.\./elsewhere\.bin' \(from .*zoo\.json, field 'files'\)"):
        gb.load_zoo(planted)


def test_record_and_value_paths_refuse_names_that_are_not_plain(tmp_path):
    good = _record("norm.params")
    assert record_path(good, tmp_path) == tmp_path / "z" / "norm.params.json"
    for field, bad in (("zoo", TRAVERSAL), ("name", TRAVERSAL), ("name", ".hidden"), ("name", "a/b"),
                       ("zoo", ""), ("name", None)):
        rec = json.loads(json.dumps(good))
        if field == "zoo":
            rec["zoo"]["name"] = bad
        else:
            rec["name"] = bad
        with pytest.raises(GenbenchError) as info:
            write_record(rec, tmp_path / "results")
        msg = str(info.value)
        assert repr(bad) in msg and ("field zoo.name" if field == "zoo" else "field name") in msg, msg
    assert not (tmp_path / "results").exists() and not (tmp_path / "escape").exists()
    with pytest.raises(GenbenchError, match=r"zoo name '\.\./\.\./\.\./escape/trav' \(from "):
        values_path(TRAVERSAL)
    with pytest.raises(GenbenchError, match="zoo name"):
        gb.harness.values_path("..")
    recipe = tmp_path / "trav.yaml"  # a recipe names its zoo's folder and records: refused before any training
    text = (Path(gb.__file__).parent / "zoo" / "recipes" / "digits-mlp.yaml").read_text()
    recipe.write_text(text.replace("name: digits-mlp", f"name: {TRAVERSAL}"))
    with pytest.raises(GenbenchError, match=r"zoo name '\.\./\.\./\.\./escape/trav' \(from recipe .*trav\.yaml"):
        gb.build_zoo(recipe, progress=False)


def test_a_malformed_record_is_skipped_with_a_warning_and_never_blanks_the_leaderboard(tmp_path):
    root = tmp_path / "results"
    good = [write_record(_record(name, seed=i), root) for i, name in enumerate(("norm.params", "norm.fro_sum"))]
    bad = {
        "truncated.json": '{"schema": 3, "name": "trunc',
        "a_list.json": "[1, 2, 3]",
        "not_a_record.json": json.dumps({"hello": "world"}),
        "elsewhere.json": json.dumps(_record("norm.path")),  # a record not where its own name puts it
        "traversal.json": json.dumps({**_record("x"), "name": TRAVERSAL}),
    }
    old = _record("margin.old")
    old["schema"] = 1
    write_record(old, root)
    for name, text in bad.items():
        (root / "z" / name).write_text(text)
    (root / "z" / "binary.json").write_bytes(b"\xff\xfe\x00garbage")

    with pytest.warns(SkippedRecordWarning) as caught:
        recs = load_records(root)
    assert sorted(r.name for r in recs) == ["norm.fro_sum", "norm.params"]
    said = [str(w.message) for w in caught]
    for name in [*bad, "binary.json", "margin.old.json"]:
        assert sum(str(root / "z" / name) in w for w in said) == 1, (name, said)
    assert any("schema 1" in w and "regenerate it with `genbench leaderboard run margin.old --zoo z`" in w
               for w in said)
    assert any("belongs" in w or "whose place is" in w for w in said)

    skipped: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with a list, nothing is warned: the caller reports
        assert len(load_records(root, skipped=skipped)) == 2
    assert len(skipped) == len(bad) + 2

    out = CliRunner().invoke(app, ["leaderboard", "--results", str(root), "--format", "csv"])
    assert out.exit_code == 0, out.output
    text = _output(out)
    assert "norm.params" in text and "norm.fro_sum" in text
    assert text.count("warning: skipped") == len(bad) + 2
    assert "regenerate it with `genbench leaderboard run margin.old --zoo z`" in text

    for path in (root / "z" / "truncated.json", root / "z" / "a_list.json"):  # one explicit file still raises
        with pytest.raises(GenbenchError, match="result record"):
            Record.read(path)
    with pytest.raises(SchemaError, match="regenerate it"):
        read_record(root / "z" / "margin.old.json")
    for p in good:
        p.unlink()
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(root)])  # nothing readable: an error that says why
    assert isinstance(out.exception, GenbenchError) and "skipped" in str(out.exception)


# ---------------------------------------------------------------- item 5: no data loss in ordinary use


def _values_of_another_zoo(digits_zoo, path: Path) -> bytes:
    """A value table as another zoo's evaluation leaves it (same model ids, another zoo and table)."""
    df = gb.evaluate(["norm.params"], digits_zoo, progress=False)
    df.attrs.update(zoo="mnist1d-demogen", table_sha256="f" * 64)
    df.to_parquet(path, index=False)
    return path.read_bytes()


def test_score_and_evaluate_never_overwrite_another_zoos_value_table(digits_zoo, tmp_path):
    other = tmp_path / "other.parquet"
    planted = _values_of_another_zoo(digits_zoo, other)
    runner = CliRunner()
    out = runner.invoke(app, ["score", "norm.fro_sum", "--zoo", str(digits_zoo.root), "--values", str(other),
                              "--n-boot", "20"])
    assert isinstance(out.exception, GenbenchError), out.output
    msg = " ".join(str(out.exception).split())
    assert str(other) in msg and "'mnist1d-demogen'" in msg and "left as it is" in msg
    assert other.read_bytes() == planted  # the input is untouched
    out = runner.invoke(app, ["evaluate", "norm.fro_sum", "--zoo", str(digits_zoo.root), "--out", str(other)])
    assert isinstance(out.exception, GenbenchError) and "does not overwrite" in str(out.exception), out.output
    assert other.read_bytes() == planted
    with pytest.raises(GenbenchError, match="does not overwrite"):
        gb.harness.save_values(gb.evaluate(["norm.fro_sum"], digits_zoo, progress=False), other)
    assert other.read_bytes() == planted

    own = tmp_path / "own.parquet"  # this zoo's table: completed with the measure it lacks, every column kept
    gb.harness.save_values(gb.evaluate(["norm.params"], digits_zoo, progress=False), own)
    out = runner.invoke(app, ["score", "norm.fro_sum", "--zoo", str(digits_zoo.root), "--values", str(own),
                              "--n-boot", "20"])
    assert out.exit_code == 0, out.output
    assert set(gb.harness.load_values(own).attrs["measures"]) == {"norm.params", "norm.fro_sum"}


def _good_submission(root: Path) -> Path:
    folder = root / "good_sub"
    folder.mkdir(parents=True)
    (folder / "measure.py").write_text("import genbench as gb\n\n@gb.register_measure('good.entry')\n"
                                       "def entry(ctx):\n    \"\"\"A constant.\"\"\"\n    return 1.0\n")
    meta = {"title": "t", "authors": ["A. Author"], "contact": "a@example.org", "paper_url": None,
            "licence": "MIT", "entry": "good.entry", "zoos": ["digits-mlp"]}
    (folder / "submission.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in meta.items()) + "\n")
    return folder


@pytest.mark.parametrize("flag, value", [("--timeout-s", "-5"), ("--timeout-s", "0"), ("--timeout-s", "nan"),
                                         ("--budget-s", "0"), ("--budget-s", "-1"), ("--budget-s", "nan"),
                                         ("--budget-s", "inf"), ("--memory-gb", "0"), ("--memory-gb", "-2"),
                                         ("--n-boot", "0")])
def test_submit_refuses_invalid_budgets_before_anything_runs_and_keeps_the_good_record(tmp_path, flag, value):
    folder = _good_submission(tmp_path / "submissions")
    results = tmp_path / "results"
    good = write_record(_record("good_sub", zoo="digits-mlp"), results)  # a good record of this submission
    before = _files(results)
    out = CliRunner().invoke(app, ["submit", str(folder), "--zoo", "digits-mlp", "--results", str(results),
                                   "--no-audit", f"{flag}={value}"])
    assert isinstance(out.exception, GenbenchError), out.output
    assert flag in str(out.exception) and "must be" in str(out.exception)
    assert ("of GB" in str(out.exception)) == (flag == "--memory-gb")  # a memory cap is no number of seconds
    assert _files(results) == before and good.is_file()


def test_the_api_and_every_command_refuse_invalid_budgets_and_counts(tmp_path):
    folder = _good_submission(tmp_path / "submissions")
    results = tmp_path / "results"
    good = write_record(_record("good_sub", zoo="digits-mlp"), results)
    before = _files(results)
    for kw, message in (({"timeout_s": -5}, "overall time limit must be a positive"),
                        ({"timeout_s": float("nan")}, "overall time limit must be a positive"),
                        ({"budget_s": float("nan")}, "per-model budget must be a positive"),
                        ({"budget_s": float("inf")}, "per-model budget must be a positive"),
                        ({"memory_gb": 0}, "memory cap must be a positive"),
                        ({"n_boot": 0}, "at least 1"), ({"n_boot": True}, "at least 1")):
        with pytest.raises(GenbenchError, match=message):
            submit(folder, ["digits-mlp"], results_root=results, audit_zoo=None, **kw)
    assert _files(results) == before and good.is_file()

    values = tmp_path / "values.parquet"
    runner = CliRunner()  # refused before the zoo is even opened: no zoo called "nowhere" exists
    for args, flag in ((["evaluate", "norm.params", "--zoo", "nowhere", "--budget-s=-1", "--out", str(values)],
                        "--budget-s"),
                       (["evaluate", "norm.params", "--zoo", "nowhere", "--budget-s", "nan"], "--budget-s"),
                       (["score", "norm.params", "--zoo", "nowhere", "--n-boot", "0", "--values", str(values)],
                        "--n-boot"),
                       (["leaderboard", "run", "norm.params", "--zoo", "nowhere", "--n-boot", "0", "--results",
                         str(results)], "--n-boot"),
                       (["leaderboard", "baselines", "--zoo", "nowhere", "--n-boot=-3", "--results", str(results)],
                        "--n-boot"),
                       (["audit", "norm.params", "--zoo", "nowhere", "--n-boot", "0"], "--n-boot"),
                       (["measures", "check", "norm.params", "--zoo", "nowhere", "--budget-s", "0"], "--budget-s"),
                       (["measures", "check", "norm.params", "--zoo", "nowhere", "--models", "0"], "--models")):
        out = runner.invoke(app, args)
        assert isinstance(out.exception, GenbenchError), (args, out.output)
        assert str(out.exception).startswith(f"{flag} must be"), (args, str(out.exception))
    assert not values.exists() and _files(results) == before
    for command in (["leaderboard", "run", "norm.params"], ["submit", str(folder)]):  # a skip beside a named audit zoo
        out = runner.invoke(app, [*command, "--zoo", "nowhere", "--no-audit", "--audit-zoo", "mnist1d-fragility",
                                  "--results", str(results)])
        assert isinstance(out.exception, GenbenchError), (command, out.output)
        assert "--no-audit skips the fragility audit and --audit-zoo mnist1d-fragility names a zoo for it: give one " \
               "of the two" in str(out.exception)
        # an audit zoo that is not here: said at once (it was scored, written, and noted "not audited (unknown zoo)")
        out = runner.invoke(app, [*command, "--zoo", "nowhere", "--audit-zoo", "mnist1d-fragilty", "--results",
                                  str(results)])
        assert isinstance(out.exception, GenbenchError), (command, out.output)
        assert str(out.exception).startswith("--audit-zoo mnist1d-fragilty: unknown zoo 'mnist1d-fragilty'. Did you "
                                             "mean 'mnist1d-fragility'"), str(out.exception)
    assert _files(results) == before


def test_evaluate_refuses_an_out_file_whose_name_says_another_format(tmp_path, monkeypatch):
    """`evaluate --out values.csv` wrote parquet bytes under a .csv name, which `score --values` then misread."""
    import genbench.harness as harness
    monkeypatch.setattr(harness, "evaluate", lambda *a, **k: pytest.fail("values computed before the refusal"))
    out = CliRunner().invoke(app, ["evaluate", "norm.params", "--zoo", "nowhere", "--out", str(tmp_path / "v.csv")])
    assert isinstance(out.exception, GenbenchError), out.output
    assert str(out.exception) == (f"--out {tmp_path / 'v.csv'}: the value table is written as parquet, so its name "
                                  f"ends in .parquet, e.g. {tmp_path / 'v.parquet'}")
    assert not (tmp_path / "v.csv").exists()


def test_a_value_table_file_that_cannot_take_the_values_is_refused_before_they_are_computed(digits_zoo, tmp_path,
                                                                                             monkeypatch):
    """`evaluate --out FILE` computed every value, then failed to merge them into FILE: a traceback from pyarrow for
    a file that is no parquet table, one line for another zoo's values, both after the work."""
    import genbench.harness as harness
    junk, other = tmp_path / "junk.parquet", tmp_path / "other.parquet"
    junk.write_text("not parquet")
    theirs = pd.DataFrame({"model_id": ["m0"], "x": [1.0]})
    theirs.attrs.update(zoo="elsewhere", table_sha256="f" * 64)
    theirs.to_parquet(other)
    monkeypatch.setattr(harness, "evaluate", lambda *a, **k: pytest.fail("values computed before the refusal"))
    for path, said in ((junk, f"{junk} is not a value table genbench can read ("),
                       (other, f"{other} holds the values of zoo 'elsewhere' (table sha256 ffffffffffff), not of "
                               "this zoo")):
        out = CliRunner().invoke(app, ["evaluate", "norm.params", "--zoo", "digits-mlp", "--out", str(path)])
        assert isinstance(out.exception, GenbenchError) and said in str(out.exception), out.output
        assert "\n" not in str(out.exception)
    assert junk.read_text() == "not parquet"
    with pytest.raises(GenbenchError, match="is not a value table genbench can read"):  # and for any reader
        values_mod.load_values(junk)


def test_concurrent_writers_of_a_value_table_keep_every_column(digits_zoo, tmp_path, monkeypatch):
    names = ["norm.params", "norm.fro_sum", "norm.fro_prod", "norm.path"]
    frames = {n: gb.evaluate([n], digits_zoo, progress=False) for n in names}
    path = tmp_path / "values.parquet"
    spans: list[tuple[float, float]] = []
    real_merge = values_mod.merge_values

    def slow_merge(old, new):  # widens the read-merge-write window: without the lock every writer reads the same
        start = time.monotonic()
        time.sleep(0.3)
        try:
            return real_merge(old, new)
        finally:
            spans.append((start, time.monotonic()))

    monkeypatch.setattr(values_mod, "merge_values", slow_merge)
    barrier, errors = threading.Barrier(len(names)), []

    def writer(name: str) -> None:
        try:
            barrier.wait()
            gb.harness.save_values(frames[name], path)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    df = gb.harness.load_values(path)
    assert set(df.attrs["measures"]) == set(names)
    got = df.set_index("model_id")
    for n in names:
        assert got.loc[frames[n]["model_id"], n].tolist() == frames[n][n].tolist() and got[n].notna().all()
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # the read-merge-writes never overlapped
    assert values_mod.values_lock(path).name == ".values.parquet.lock"


def test_values_of_some_models_add_to_the_table_instead_of_emptying_the_measure(digits_zoo, tmp_path):
    """Planted: `evaluate norm.param --models SOME` left the measure with SOME's values only (every other model
    without a value, so `score` refused it as too few models); two runs on disjoint models kept the last's. A
    measure that changed in between (another version) keeps only the new values."""
    ids = digits_zoo.model_ids
    half = len(ids) // 2
    path = tmp_path / "values.parquet"
    whole = gb.evaluate(["norm.params", "norm.fro_sum"], digits_zoo, progress=False)
    first = gb.evaluate(["norm.params"], digits_zoo, models=ids[:half], progress=False)
    second = gb.evaluate(["norm.params"], digits_zoo, models=ids[half:], progress=False)
    gb.harness.save_values(first, path)
    gb.harness.save_values(second, path)
    got = gb.harness.load_values(path).set_index("model_id").loc[ids]
    assert got["norm.params"].tolist() == whole.set_index("model_id").loc[ids, "norm.params"].tolist()
    gb.harness.save_values(whole, path)
    one = second[second["model_id"] == ids[-1]].copy()
    one.attrs = second.attrs
    one[["norm.params", "norm.params:error"]] = [float("nan"), "RuntimeError: planted failure"]
    gb.harness.save_values(one, path)  # one model again, now failing: its row changes, the others stay
    got = gb.harness.load_values(path).set_index("model_id").loc[ids]
    assert got["norm.params"].iloc[:-1].tolist() == whole["norm.params"].iloc[:-1].tolist()
    assert pd.isna(got["norm.params"].iloc[-1]) and got["norm.params:error"].iloc[-1] == "RuntimeError: planted failure"
    assert got["norm.params:error"].iloc[:-1].isna().all() and got["norm.fro_sum"].notna().all()
    changed = first.copy()
    changed.attrs = {**first.attrs, "measures": {"norm.params": {**first.attrs["measures"]["norm.params"],
                                                                 "version": 99}}}
    gb.harness.save_values(changed, path)  # another version of the measure: the old values are not mixed in
    got = gb.harness.load_values(path).set_index("model_id").loc[ids]
    assert got["norm.params"].notna().sum() == half and got["norm.fro_sum"].notna().all()
    gb.harness.save_values(whole, path)
    reseeded = gb.evaluate(["norm.params"], digits_zoo, models=ids[:half], seed=1, progress=False)
    gb.harness.save_values(reseeded, path)  # another seed: the table says one seed, so only the new values stay
    got = gb.harness.load_values(path).set_index("model_id").loc[ids]
    assert got["norm.params"].notna().sum() == half and got["norm.fro_sum"].notna().all()


class Killed(Exception):
    pass


@pytest.mark.parametrize("step", ["manifest", "install"])
def test_a_crash_while_a_zoo_commits_its_table_leaves_a_zoo_the_next_build_completes(home, tmp_path, monkeypatch,
                                                                                     step):
    """The last group's commit dies after the new table is written and before (manifest) or after (install) the
    manifest citing it: the next build finishes it, and `zoo verify` passes."""
    from genbench.zoo.recipe import load_recipe

    kw = dict(limit=8, max_group=4, overrides={"train.epochs": 2}, progress=False)
    root = tmp_path / "zoo"
    groups = build_mod.plan_groups(load_recipe("digits-mlp", kw["overrides"]).expand()[:8], 4)
    assert len(groups) >= 2
    target = {"manifest": "write_json_atomic", "install": "_install"}[step]
    real, calls = getattr(storage, target), []

    def crash_on_the_last_commit(*a, **k):
        calls.append(a)
        if len(calls) == len(groups):
            raise Killed
        return real(*a, **k)

    monkeypatch.setattr(storage, target, crash_on_the_last_commit)
    with pytest.raises(Killed):
        gb.build_zoo("digits-mlp", root, **kw)
    monkeypatch.setattr(storage, target, real)
    assert (root / storage.PENDING_TABLE).is_file()
    if step == "install":  # the manifest cites the new table, not yet in place: a clear error until the next build
        with pytest.raises(GenbenchError, match=rf"interrupted .* `genbench zoo build digits-mlp --out {re.escape(str(root))}`"):
            gb.load_zoo(root)
    else:  # the manifest was not written: the zoo of the groups before stands
        assert len(gb.load_zoo(root)) == sum(len(g) for g in groups[:-1])

    trained: list[str] = []
    real_train = build_mod.train_group

    def counting(group, *a, **k):
        trained.extend(s.model_id for s in group)
        return real_train(group, *a, **k)

    monkeypatch.setattr(build_mod, "train_group", counting)
    zoo = gb.build_zoo("digits-mlp", root, **kw)
    last = [s.model_id for s in groups[-1]]
    assert trained == ([] if step == "install" else last)  # committed models are never trained again
    assert zoo.model_ids == [s.model_id for g in groups for s in g]
    assert not (root / storage.PENDING_TABLE).exists() and (root / "README.md").is_file()
    out = CliRunner().invoke(app, ["zoo", "verify", str(root)])
    assert out.exit_code == 0 and "files match their sha256" in out.output, out.output


def test_a_record_cites_a_commit_of_this_checkout_or_verify_says_so():
    """verify does not compare the commit that made a record with the one that re-runs it (any later commit
    differs), but the recorded one must exist in this checkout's history: a forged commit does not."""
    import subprocess

    from genbench.entries.verify import known_commit
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent).stdout.strip()
    assert known_commit(head) and known_commit(head[:12])
    assert not known_commit("0" * 40) and not known_commit("not-hex; rm -rf /") and not known_commit(None)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc file system")
def test_a_folder_that_takes_no_file_is_refused_at_once(monkeypatch, tmp_path):
    """/proc takes no new file, even from root (for whom os.access says yes everywhere): the check before any work
    and the value table's lock each say so in one line, instead of the lock waiting for a lock file it cannot
    make (planted: the wait cut to 1 s would end in 'stayed locked by another genbench process')."""
    from genbench.paths import check_writable

    with pytest.raises(GenbenchError, match=r"cannot be written: /proc does not take a new file"):
        check_writable(Path("/proc/values"))
    monkeypatch.setattr(values_mod, "LOCK_TIMEOUT_S", 1.0)
    df = pd.DataFrame({"model_id": ["m0"], "x": [1.0]})
    start = time.monotonic()
    with pytest.raises(GenbenchError, match=r"cannot write the value table /proc/v\.parquet") as err:
        gb.harness.save_values(df, "/proc/v.parquet")
    assert "\n" not in str(err.value) and time.monotonic() - start < 1.0
    # each refused before its work (audit's --json and --plot ended in a traceback after minutes of work)
    for argv in (["audit", "norm.params", "--zoo", "nowhere", "--json", "/proc/a.json"],
                 ["audit", "norm.params", "--zoo", "nowhere", "--plot", "/proc/a.svg"],
                 ["leaderboard", "baselines", "--zoo", "nowhere", "--results", "/proc/r"],
                 ["leaderboard", "add", "nothing.json", "--to", "/proc/r"],
                 ["zoo", "import", "pgdl", "nowhere", "--out", "/proc/z"],
                 ["zoo", "import", "small-cnn-zoo", "nowhere", "--out", "/proc/z"]):
        out = CliRunner().invoke(app, argv)
        assert isinstance(out.exception, GenbenchError) and "/proc does not take a new file" in str(out.exception), argv


def test_a_file_to_write_where_a_folder_stands_is_refused_before_any_work(tmp_path):
    """`score --values DIR` evaluated every value, then ended in an IsADirectoryError traceback; `leaderboard --html
    FILE` printed the table, then a FileExistsError traceback."""
    folder, file = tmp_path / "here", tmp_path / "notes.txt"
    folder.mkdir()
    file.write_text("mine")
    for argv, said in ((["evaluate", "norm.params", "--zoo", "nowhere", "--out", str(folder)],
                        f"--out {folder} is a folder; name a file to write, e.g. {folder}/values.parquet"),
                       (["score", "norm.params", "--zoo", "nowhere", "--values", str(folder)],
                        f"--values {folder} is a folder; name a file to write, e.g. {folder}/values.parquet"),
                       (["audit", "norm.params", "--zoo", "nowhere", "--json", str(folder)], f"--json {folder} is a "),
                       (["audit", "norm.params", "--zoo", "nowhere", "--plot", str(folder)], f"--plot {folder} is a "),
                       (["leaderboard", "--results", str(folder), "--html", str(file)],
                        f"{file} is a file, not a folder for the site")):
        out = CliRunner().invoke(app, argv)
        assert isinstance(out.exception, GenbenchError) and said in str(out.exception), (argv, out.output)
        assert not out.output.strip(), argv  # nothing printed first: no table, no progress
    assert file.read_text() == "mine" and not any(folder.iterdir())


def test_the_python_api_names_bad_arguments(digits_zoo, tmp_path):
    """The public functions refuse a wrong type or an impossible budget or count in one sentence, as the commands
    do (they raised TypeError or AttributeError from deep inside, or ran with a negative budget)."""
    values = gb.evaluate(["norm.params"], digits_zoo, progress=False)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for call, message in ((lambda: gb.evaluate("norm.params", digits_zoo, seed="x"), "seed must be a whole number"),
                          (lambda: gb.score(values, digits_zoo, seed=1.5), "seed must be a whole number"),
                          (lambda: gb.audit("norm.params", digits_zoo, seed=None), "seed must be a whole number"),
                          (lambda: gb.score(pd.DataFrame({"a": [1.0]}), digits_zoo), "this one has no model_id column"),
                          (lambda: gb.build_zoo("digits-mlp", a_file, progress=False),
                           f"{a_file} is a file, not a folder"),
                          (lambda: gb.load_zoo(123), "load_zoo takes a zoo's name, its folder or hf://ORG/NAME"),
                          (lambda: gb.evaluate("norm.params", digits_zoo, models=5), "models takes model ids"),
                          (lambda: gb.evaluate("norm.params", digits_zoo, models=[1]), "models takes model ids"),
                          (lambda: gb.evaluate("norm.params", digits_zoo, budget_s=-1), "budget_s must be a positive"),
                          (lambda: gb.evaluate("norm.params", digits_zoo, budget_s=float("nan")),
                           "budget_s must be a positive"),
                          (lambda: gb.score(None, digits_zoo), "score takes a value table"),
                          (lambda: gb.score(values, digits_zoo, n_boot=0), "n_boot must be at least 1"),
                          (lambda: gb.score(values, digits_zoo, k=1.5), "k must be at least 1"),
                          (lambda: gb.evaluate([], digits_zoo), "evaluate needs at least one measure"),
                          (lambda: gb.build_zoo(5), "build_zoo takes a recipe's name"),
                          (lambda: gb.audit(5, digits_zoo), "a measure is named by a string"),
                          (lambda: gb.get_measure(None), "a measure is named by a string"),
                          (lambda: gb.list_measures(5), "list_measures takes a glob pattern")):
        with pytest.raises(GenbenchError, match=message):
            call()
    assert list(gb.evaluate("norm.params", digits_zoo, models=np_ids(digits_zoo), budget_s=np.float32(5),
                            progress=False)["model_id"]) == digits_zoo.model_ids[:2]
    assert a_file.read_text() == "mine"


def np_ids(zoo) -> np.ndarray:
    """Two model ids as a numpy array: an iterable of strings is a list of ids too."""
    return np.array(zoo.model_ids[:2])


def test_ctrl_c_says_in_one_line_what_is_kept_and_exits_130(digits_zoo, tmp_path):
    """SIGINT in the middle of an evaluation: typer turned it into a silent exit 130; now one line on stderr says
    that nothing half-written is left and that running the command again goes on."""
    import os
    import signal
    import subprocess
    import sys

    child = (  # Ctrl-C's handler as in a terminal: a job started in the background (a CI script) ignores SIGINT
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import genbench as gb\n"
        "@gb.register_measure('test.slow', higher_means='larger_gap')\n"
        "def slow(ctx):\n"
        "    '''Sleeps: the test interrupts it.'''\n"
        "    print('started', flush=True)\n"
        "    time.sleep(60)\n"
        "    return 1.0\n"
        f"sys.argv = ['genbench', 'evaluate', 'test.slow', '--zoo', {str(digits_zoo.root)!r}, '--no-cache',\n"
        f"            '--out', {str(tmp_path / 'v.parquet')!r}, '--device', 'cpu']\n"
        "from genbench.cli import main\n"
        "main()\n")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout.readline().strip() == "started"  # inside the measure
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: every file is written whole" in " ".join(err.split()) and "Traceback" not in err
    assert not (tmp_path / "v.parquet").exists()  # no value table half-written


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_give_the_mode_a_plain_write_gives(tmp_path, umask, mode):
    """Planted: every file written atomically (tables, checkpoints, records) was 0600 whatever the umask (mkstemp's
    mode), so a zoo or results folder shared with others (a Ray cluster's filesystem) was unreadable to them."""
    import os
    import stat

    import torch

    from genbench.fileio import write_text_atomic
    from genbench.zoo.storage import save_checkpoint
    before = os.umask(umask)
    try:
        text = write_text_atomic(tmp_path / "a.json", "{}")
        ckpt = tmp_path / "m.safetensors"
        save_checkpoint(ckpt, {"w": torch.zeros(2)}, {"model_id": "m"})
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(before)
    assert stat.S_IMODE(plain.stat().st_mode) == mode  # what the atomic writes must match
    assert stat.S_IMODE(text.stat().st_mode) == mode and stat.S_IMODE(ckpt.stat().st_mode) == mode
    os.chmod(text, 0o640)  # a file the user narrowed (or widened) keeps its mode when written again, as in place
    write_text_atomic(text, "[]")
    assert stat.S_IMODE(text.stat().st_mode) == 0o640 and text.read_text() == "[]"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"),
                                   RuntimeError("Error while serializing: IoError(Os { code: 28, kind: "
                                                "StorageFull, message: \"No space left on device\" })")])
def test_a_full_disk_is_one_error_naming_the_file_and_leaves_nothing_behind(tmp_path, error):
    """Planted: a full disk during a write (an OSError, or safetensors' own error quoting it) came out of every
    command as a traceback. The temporary file is removed and the old file kept."""
    from genbench.fileio import atomic_write
    target = tmp_path / "models.parquet"
    target.write_text("old")

    def full(tmp):
        tmp.write_text("half")
        raise error

    with pytest.raises(GenbenchError, match=rf"no space left on the device to write {re.escape(str(target))}: free"):
        atomic_write(target, full)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["models.parquet"]
    with pytest.raises(ValueError, match="another failure"):  # any other failure is left as it is
        atomic_write(target, lambda tmp: (_ for _ in ()).throw(ValueError("another failure")))
