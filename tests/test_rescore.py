"""Re-scoring records from their stored values: a schema-2 record re-scored equals the record a fresh run makes
(scores and values), baseline rows are re-made from the zoo and their inputs' records, the CLI says what it wrote,
and a record of the old schema is refused with the command that re-scores it."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.entries.rescore import rescore_folder
from genbench.entries.run import run_baselines, run_entry
from genbench.errors import GenbenchError
from genbench.record import SCHEMA, read_record, write_record
from genbench.scoring.baselines import score_baselines

ENTRIES = ("norm.fro_prod", "norm.spec_sum")


def _as_schema_2(rec: dict) -> dict:
    """What a record of the old scoring held: schema 2, no delta_r2 or direction check, the free k-fold R^2."""
    old = json.loads(json.dumps(rec))
    old["schema"] = 2
    for key in ("delta_r2", "kfold_r2_free"):
        old["scores"]["values"].pop(key, None)
        old["scores"]["intervals"].pop(key, None)
        old["scores"]["refused"].pop(key, None)
    old["scores"].pop("direction", None)
    old["scores"]["values"]["kfold_r2"] = 0.123
    old["values"]["heldout"] = [[0.0] * len(row) for row in old["values"]["heldout"]]
    return old


@pytest.fixture(scope="module")
def fresh(digits_zoo):
    recs = {n: run_entry(n, digits_zoo, audit_zoo=None, n_boot=50) for n in ENTRIES}
    for b in run_baselines(digits_zoo, only=("baseline.hparams", "baseline.train_loss"), n_boot=50):
        recs[b["name"]] = b
    return recs


def test_a_schema_2_folder_re_scored_equals_a_fresh_run(fresh, digits_zoo, tmp_path):
    for rec in fresh.values():
        write_record(_as_schema_2(rec), tmp_path)
    with pytest.raises(GenbenchError, match=r"schema 2.*genbench leaderboard rescore --results"):
        read_record(tmp_path / "digits-mlp" / "norm.fro_prod.json")
    said: list[str] = []
    written = rescore_folder(tmp_path, say=said.append)
    assert len(written) == len(fresh) and said[0] == "[1/2] digits-mlp/norm.fro_prod.json"
    for name, rec in fresh.items():
        new = read_record(tmp_path / "digits-mlp" / f"{name}.json")
        assert new["schema"] == SCHEMA
        assert new["scores"] == json.loads(json.dumps(rec["scores"])), name
        assert new["values"] == json.loads(json.dumps(rec["values"])), name
        assert new["provenance"]["rescored"]["command"] == "genbench leaderboard rescore"
        assert new["provenance"]["date"] == rec["provenance"]["date"]  # when the values were made: kept


def test_baseline_all_measures_is_re_made_from_its_inputs_records(fresh, digits_zoo, tmp_path):
    from genbench.entries.rescore import value_table
    base = json.loads(json.dumps(fresh["baseline.hparams"]))
    base.update(name="baseline.all_measures", measure="baseline.all_measures")
    base["provenance"]["inputs"] = list(ENTRIES)
    for rec in (*[fresh[n] for n in ENTRIES], base):
        write_record(_as_schema_2(rec), tmp_path)
    rescore_folder(tmp_path, say=lambda _: None)
    got = read_record(tmp_path / "digits-mlp" / "baseline.all_measures.json")
    values = value_table(fresh[ENTRIES[0]]).merge(value_table(fresh[ENTRIES[1]]), on="model_id")
    expected, _ = score_baselines(digits_zoo, values, measures=list(ENTRIES), n_boot=50,
                                  only=("baseline.all_measures",))
    assert got["scores"]["values"] == pytest.approx(expected["baseline.all_measures"].values, rel=1e-12)
    (tmp_path / "digits-mlp" / f"{ENTRIES[1]}.json").unlink()  # an input's record is gone: said, nothing guessed
    with pytest.raises(GenbenchError, match=f"made from {ENTRIES[1]}, whose record .* is missing"):
        rescore_folder(tmp_path, say=lambda _: None)


def test_the_rescore_command_re_scores_a_folder_and_refuses_a_missing_one(fresh, tmp_path):
    write_record(_as_schema_2(fresh["norm.fro_prod"]), tmp_path)
    out = CliRunner().invoke(app, ["leaderboard", "rescore", "--results", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "re-scored 1 record(s)" in out.output
    assert read_record(tmp_path / "digits-mlp" / "norm.fro_prod.json")["scores"]["values"]["kfold_r2"] != 0.123
    out = CliRunner().invoke(app, ["leaderboard", "rescore", "--results", str(tmp_path / "nowhere")])
    assert isinstance(out.exception, GenbenchError) and "no folder of records at" in str(out.exception)
    out = CliRunner().invoke(app, ["leaderboard", "rescore", "--results", str(tmp_path), "--zoo", "digits-mpl"])
    assert isinstance(out.exception, GenbenchError), out.output  # a typo re-scored nothing and said "0 record(s)"
    assert "unknown zoo with records in" in str(out.exception) and "Did you mean 'digits-mlp'" in str(out.exception)


def test_an_input_that_failed_on_every_model_is_the_all_missing_column_it_was_made_with(fresh, digits_zoo, tmp_path):
    """A measure that refuses the zoo's family (pacbayes.marginal_likelihood on CNNs) leaves a failure record and an
    all-missing column in baseline.all_measures' inputs: re-scoring rebuilds that column, not an error."""
    import numpy as np

    from genbench.entries.rescore import value_table
    from genbench.entries.run import failure_record
    failed = failure_record("norm.param", "norm.param", digits_zoo, "the measure failed on every model")
    base = json.loads(json.dumps(fresh["baseline.hparams"]))
    base.update(name="baseline.all_measures", measure="baseline.all_measures")
    base["provenance"]["inputs"] = [*ENTRIES, "norm.param"]
    for rec in (*[fresh[n] for n in ENTRIES], base):
        write_record(_as_schema_2(rec), tmp_path)
    write_record(failed, tmp_path)
    rescore_folder(tmp_path, say=lambda _: None)
    got = read_record(tmp_path / "digits-mlp" / "baseline.all_measures.json")
    values = value_table(fresh[ENTRIES[0]]).merge(value_table(fresh[ENTRIES[1]]), on="model_id")
    values["norm.param"] = np.nan
    expected, _ = score_baselines(digits_zoo, values, measures=[*ENTRIES, "norm.param"], n_boot=50,
                                  only=("baseline.all_measures",))
    assert got["scores"]["values"] == pytest.approx(expected["baseline.all_measures"].values, rel=1e-12)


@pytest.mark.parametrize("content, says", [(b'{"schema": ' + b"1" * 5000 + b"}", "Exceeds the limit"),
                                           (b"[" * 5000 + b"]" * 5000, "maximum recursion depth exceeded"),
                                           (b'{"a": "\xe9"}', "can't decode byte 0xe9")])
def test_a_record_file_rescore_cannot_read_is_one_line_naming_it(tmp_path, content, says):
    """An integer of thousands of digits, nesting deeper than Python's recursion, bytes that are not UTF-8."""
    (tmp_path / "digits-mlp").mkdir()
    bad = tmp_path / "digits-mlp" / "norm.fro_prod.json"
    bad.write_bytes(content)
    out = CliRunner().invoke(app, ["leaderboard", "rescore", "--results", str(tmp_path)])
    assert isinstance(out.exception, GenbenchError), (out.exception, out.output)
    assert str(out.exception).startswith(f"cannot read result record {bad}: ") and says in str(out.exception)
