"""Bad records and bad leaderboard options: a damaged or broken record is skipped with one warning that names its file,
the field at fault and the command that makes it again, and the rest of the leaderboard is shown; a legitimately
refused score is kept. Each test plants what its guard is for."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.leaderboard.standings import rank_records
from genbench.record import Record, finite, load_records, read_record, write_record

SHIPPED = Path(__file__).resolve().parents[1] / "leaderboard" / "results"
GOOD = ("norm.params", "norm.fro_sum")
BAD = "norm.path"


def _record(name: str, seed: int = 0, n: int = 30) -> dict[str, Any]:
    """A small, well-formed current-schema record on zoo 'z' (held-out predictions: the gap plus noise)."""
    from site_records import gaps, heldout_of, scored_record

    gap = gaps(n)
    noise = np.random.default_rng(seed + 1).normal(0.0, 0.5 * gap.std(), n)
    return scored_record(name, "z", gap, heldout_of(gap, noise, seed), n_boot=50)


def _output(result) -> str:
    """What a CLI run printed, stdout and stderr, on one line."""
    return " ".join(result.output.split())


def _has(said: str, text: str) -> bool:
    """Whether `text` is in `said`, whitespace aside (a terminal wraps a long path anywhere)."""
    return "".join(text.split()) in "".join(said.split())


def _plant(tmp_path: Path, damage: Callable[[dict[str, Any]], Any]) -> tuple[Path, Path]:
    """A results folder of two good records and one damaged by `damage` (written as Python's json writes it, NaN and
    Infinity included); (the folder, the damaged file)."""
    root = tmp_path / "results"
    for i, name in enumerate(GOOD):
        write_record(_record(name, seed=i), root)
    rec = _record(BAD, seed=5)
    damage(rec)
    path = root / "z" / f"{BAD}.json"
    path.write_text(json.dumps(rec))
    return root, path


def _skipped(root: Path) -> list[str]:
    """Why load_records skipped files under `root`, after checking that it kept the good records."""
    skipped: list[str] = []
    assert sorted(r.name for r in load_records(root, skipped=skipped)) == sorted(GOOD)
    return skipped


def _skipped_once(tmp_path: Path, damage: Callable[[dict[str, Any]], Any], fault: str) -> tuple[Path, Path, str]:
    """Plant a record damaged by `damage`; check that it alone is skipped, with its path and `fault` named; (the
    results folder, its file, why it was skipped)."""
    root, path = _plant(tmp_path, damage)
    skipped = _skipped(root)
    assert len(skipped) == 1 and str(path) in skipped[0] and fault in skipped[0], skipped
    return root, path, skipped[0]


def _set(block: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda rec: rec[block].__setitem__(key, value)


def _score(value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda rec: rec["scores"]["values"].__setitem__("kfold_r2", value)


# ---------------------------------------------------------------- item 1: a damaged values block


VALUES_DAMAGE = {
    "model ids cut": (lambda rec: rec["values"].__setitem__("model_id", rec["values"]["model_id"][:10]),
                      "values.gap holds 30 entries for the 10 models of values.model_id"),
    "values null": (lambda rec: rec.__setitem__("values", None), "values is null, not an object"),
    "no model ids": (_set("values", "model_id", []), "values.model_id is empty"),
    "gap short": (lambda rec: rec["values"].__setitem__("gap", rec["values"]["gap"][:-1]),
                  "values.gap holds 29 entries for the 30 models"),
    "gap text": (lambda rec: rec["values"]["gap"].__setitem__(3, "0.1"), "values.gap holds the string '0.1'"),
    "gap huge": (lambda rec: rec["values"]["gap"].__setitem__(3, 10**400), "values.gap holds 1000"),
    "heldout missing": (lambda rec: rec["values"].pop("heldout"),
                        "values.heldout is missing, but the record's k-fold score is ranked in paired rank groups"),
    "heldout row short": (lambda rec: rec["values"]["heldout"][2].pop(), "values.heldout[2] holds 29 entries"),
    "heldout text": (lambda rec: rec["values"]["heldout"][0].__setitem__(0, "x"),
                     "values.heldout[0] holds the string 'x', not a number"),
    "prediction short": (lambda rec: rec["values"]["prediction"].pop(), "values.prediction holds 29 entries"),
    "no bootstrap": (lambda rec: (rec["scores"].pop("bootstrap"), rec["provenance"].pop("seed")),
                     "scores.bootstrap lacks the seed, n_boot or table_sha256"),
    "a training's heldout short": (
        lambda rec: rec.__setitem__("trainings", {"combined": {"values": {}}, "zoos": [
            {"name": "z"}, {"name": "z-t1", "gap": rec["values"]["gap"], "heldout": [[0.0] * 7]}]}),
        "trainings.zoos[1].heldout[0] holds 7 entries for the 30 models"),
}


@pytest.mark.parametrize("damage", VALUES_DAMAGE)
def test_a_damaged_values_block_is_skipped_with_its_field_named_and_the_rest_ranked(tmp_path, damage):
    _, path, why = _skipped_once(tmp_path, *VALUES_DAMAGE[damage])
    assert f"regenerate it with `genbench leaderboard run {BAD} --zoo z`" in why
    with pytest.raises(GenbenchError, match="malformed result record"):  # one explicit file still raises
        read_record(path)


def test_a_damaged_local_copy_of_a_shipped_record_never_stops_the_default_leaderboard(tmp_path, monkeypatch):
    """The reviewer's case: a copy of a shipped record, damaged, in $GENBENCH_HOME/results (was: exit 2, 'cannot form
    paired rank groups ... regenerate them with `genbench leaderboard run NAME ...`'). Other damage to the values
    block: test_a_damaged_values_block_is_skipped_with_its_field_named_and_the_rest_ranked."""
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    zoo = "demogen-nin-mnist1d"
    rec = json.loads((SHIPPED / zoo / "norm.param.json").read_text())
    rec["values"]["model_id"] = rec["values"]["model_id"][:10]
    local = tmp_path / "home" / "results" / zoo / "norm.param.json"
    local.parent.mkdir(parents=True)
    local.write_text(json.dumps(rec))
    for args in ([], ["--mine"]):
        out = CliRunner().invoke(app, ["leaderboard", *args])
        said = _output(out)
        assert out.exit_code == 0, said
        assert _has(said, f"warning: skipped: {local} is a malformed result record: values")
        assert _has(said, f"regenerate it with `genbench leaderboard run norm.param --zoo {zoo}`")
        assert "cannot form paired rank groups" not in said
    assert "norm.param" in _output(CliRunner().invoke(app, ["leaderboard", "--zoo", zoo, "--format", "csv"]))


def test_the_rank_group_messages_name_the_records_to_regenerate():
    """Records ranked without the loader (the API) can still lack what pairing needs: the message names each
    record's own command, never a NAME placeholder."""
    recs = [_record(name, seed=i) for i, name in enumerate(("norm.a", "norm.b"))]
    recs[1]["values"]["heldout"] = None
    with pytest.raises(GenbenchError) as info:
        rank_records(recs)
    assert "`genbench leaderboard run norm.b --zoo z`" in str(info.value) and "NAME" not in str(info.value)
    base = _record("baseline.hparams", seed=2)
    base["baseline"] = True
    base["scores"]["bootstrap"]["n_boot"] = 20
    with pytest.raises(GenbenchError) as info:
        rank_records([_record("norm.a"), _record("norm.c", seed=3), base])
    assert "(`genbench leaderboard baselines --zoo z --n-boot 50`, seed 0)" in str(info.value), info.value
    assert "NAME" not in str(info.value)


# ---------------------------------------------------------------- item 2: broken score fields


SCORE_DAMAGE = {
    "a string": (_score("abc"), "scores.values.kfold_r2 is the string 'abc', not a finite number"),
    "null, not refused": (_score(None), "scores.values.kfold_r2 is null and scores.refused gives no reason"),
    "NaN": (_score(float("nan")), "scores.values.kfold_r2 is NaN, not a finite number"),
    "1e309": (_score(float("inf")), "scores.values.kfold_r2 is infinite, not a finite number"),
    "true": (_score(True), "scores.values.kfold_r2 is true, not a finite number"),
    "400 digits": (_score(10**400), "scores.values.kfold_r2 is 1000"),
    "another score": (lambda rec: rec["scores"]["values"].__setitem__("tau", "high"),
                      "scores.values.tau is the string 'high'"),
    "status weird": (lambda rec: rec.__setitem__("status", "weird"),
                     "its field status is the string 'weird', not 'ok' or 'failed'"),
    "scores []": (lambda rec: rec.__setitem__("scores", []), "scores is an array, not an object"),
    "scores null": (lambda rec: rec.__setitem__("scores", None), "scores is null, not an object"),
    "no scores.values": (lambda rec: rec["scores"].pop("values"), "scores.values is missing"),
    "combined NaN": (lambda rec: rec.__setitem__("trainings", {"combined": {"values": {"kfold_r2": float("nan")}}}),
                     "trainings.combined.values.kfold_r2 is NaN"),
}
IMPLAUSIBLE = {  # hand-edited: ranked first with "k-fold R2 5.000", or with a score its own interval does not hold
    "R2 of 5": (_score(5.0), "scores.values.kfold_r2 is 5, which no kfold_r2 can be (it lies in [-inf, 1])"),
    "tau of 2": (lambda rec: rec["scores"]["values"].__setitem__("tau", 2.0), "scores.values.tau is 2, which no tau"),
    "outside its interval": (lambda rec: rec["scores"]["intervals"].__setitem__("kfold_r2", [-0.5, -0.4]),
                             "lies outside its own interval [-0.5, -0.4]: genbench refuses such a score"),
    # the views draw the record's resamples again: 10**12 of them asked numpy for terabytes
    "n_boot 1e12": (lambda rec: rec["scores"]["bootstrap"].__setitem__("n_boot", 10**12),
                    "scores.bootstrap.n_boot is 1e+12, above the 100000 resamples genbench draws at most"),
    "provenance n_boot": (lambda rec: (rec["scores"]["bootstrap"].pop("n_boot"),
                                       rec.setdefault("provenance", {}).__setitem__("n_boot", 10**12)),
                          "its bootstrap n_boot is 1e+12, above the 100000 resamples"),
}


@pytest.mark.parametrize("damage", IMPLAUSIBLE)
def test_an_implausible_record_is_skipped_by_the_views_and_read_by_verify(tmp_path, damage):
    """A record no genbench writes (hand-edited) is skipped with the field named, the others ranked; Record.read,
    which `verify` uses to show what differs, still reads it."""
    root, path, _ = _skipped_once(tmp_path, *IMPLAUSIBLE[damage])
    out = CliRunner().invoke(app, ["leaderboard", "--all", "--results", str(root)])
    said = _output(out)
    assert out.exit_code == 0 and _has(said, f"warning: skipped: {path} is an implausible result record"), said
    assert "(was it edited?)" in said and "norm.params" in said and "norm.fro_sum" in said
    assert Record.read(path).name == BAD


@pytest.mark.parametrize("damage", SCORE_DAMAGE)
def test_a_broken_score_field_is_skipped_with_a_warning_not_shown_unranked(tmp_path, damage):
    root, path, _ = _skipped_once(tmp_path, *SCORE_DAMAGE[damage])
    out = CliRunner().invoke(app, ["leaderboard", "--all", "--results", str(root)])
    said = _output(out)
    assert out.exit_code == 0 and _has(said, f"warning: skipped: {path} is a malformed result record"), said
    assert "norm.params" in said and "norm.fro_sum" in said


def test_a_refused_score_and_a_nan_statistic_are_kept_as_they_were(tmp_path):
    """A refusal (the score absent or null, its reason in scores.refused) and a null statistic other than the ranking
    score (the scorer writes NaN as null: tau on too few models) are legitimate: loaded without a word."""
    root = tmp_path / "results"
    for i, name in enumerate(GOOD):
        write_record(_record(name, seed=i), root)
    absent, null = _record("norm.refused", seed=3), _record("norm.refused_null", seed=4)
    for rec in (absent, null):
        rec["scores"]["refused"] = {k: "too few models: 30 < 40 for p = 3 feature(s)" for k in ("kfold_r2", "mse")}
        rec["values"]["heldout"] = None
        for k in ("kfold_r2", "mse"):
            rec["scores"]["values"].pop(k)
    null["scores"]["values"]["kfold_r2"] = None
    nan_tau = _record("norm.nan_tau", seed=5)
    nan_tau["scores"]["values"]["tau"] = None
    for rec in (absent, null, nan_tau):
        write_record(rec, root)
    skipped: list[str] = []
    recs = load_records(root, skipped=skipped)
    assert not skipped and len(recs) == 5
    ranked = {r.name: r for r in rank_records(recs)}
    assert ranked["norm.refused"].rank is None and ranked["norm.refused_null"].refusal("kfold_r2")
    assert ranked["norm.nan_tau"].rank is not None


def test_every_shipped_record_loads_without_a_warning():
    skipped: list[str] = []
    recs = load_records(SHIPPED, skipped=skipped)
    assert not skipped and len(recs) == len(list(SHIPPED.glob("*/*.json"))) >= 200


def test_finite_reads_an_integer_of_hundreds_of_digits_as_no_number():
    """Was an OverflowError out of every view that reads the score."""
    assert finite(10**400) is None and Record({"scores": {"values": {"tau": 10**400}}}).score("tau") is None


# ---------------------------------------------------------------- items 3 and 4: --html and --results


@pytest.mark.parametrize("page", ["x.html", "x.HTM", "a-file"])
def test_html_refuses_a_page_or_a_file_before_anything_is_written(tmp_path, page):
    root, _ = _plant(tmp_path, lambda rec: None)
    out_path = tmp_path / page
    if page == "a-file":
        out_path.write_text("mine")
    out = CliRunner().invoke(app, ["leaderboard", "--html", str(out_path), "--results", str(root)])
    said = " ".join(str(out.exception).split())
    assert out.exit_code == 1, out.output
    if page == "a-file":
        assert f"{out_path} is a file, not a folder for the site" in said and out_path.read_text() == "mine"
    else:
        assert f"{out_path} names a web page, but the site is a folder" in said
        assert f"name a folder, e.g. {tmp_path / 'x'}" in said and not out_path.exists()


def test_results_given_a_file_says_it_wants_a_folder(tmp_path):
    root, path = _plant(tmp_path, lambda rec: None)
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(path)])
    said = " ".join(str(out.exception).split())
    assert out.exit_code == 1 and f"{path} is a file, not a folder: --results takes a folder of result records" in said
    assert "no result records at" not in said


# ---------------------------------------------------------------- items 5 and 6: null and a schema that is no integer


def test_a_record_that_is_null_is_said_to_be_null(tmp_path):
    root, path = _plant(tmp_path, lambda rec: None)
    path.write_text("null")
    skipped = _skipped(root)
    assert len(skipped) == 1 and f"{path} is not a genbench result record: it is null, not a JSON object" in skipped[0]
    assert "NoneType" not in skipped[0]


@pytest.mark.parametrize("schema, shown", [("3", "the string '3'"), (None, "null"), (3.0, "3.0")])
def test_a_schema_that_is_no_integer_is_refused_as_such(tmp_path, schema, shown):
    _, path, why = _skipped_once(tmp_path, lambda rec: rec.__setitem__("schema", schema),
                                 f"is not a genbench result record: its field schema is {shown}, but a record's schema "
                                 "is an integer (this genbench reads schema 3)")
    assert "not comparable with older ones" not in why
    assert f"regenerate it with `genbench leaderboard run {BAD} --zoo z`" in why


def test_records_are_parsed_by_orjson_as_json_parses_them_and_by_json_where_orjson_refuses(monkeypatch):
    """loads_json: every shipped record parses to what json.loads gives, without json (the fast path is taken);
    what only the standard library reads (NaN, Infinity, integers beyond 64 bits) still reads, and bad bytes get
    json's own error, so a record's error message does not depend on the parser."""
    import orjson

    import genbench.record as record_module
    from genbench.record import loads_json, parse_record

    datas = [p.read_bytes() for p in sorted(SHIPPED.glob("*/*.json"))]
    expected = [json.loads(d.decode("utf-8")) for d in datas]

    def no_json(*a, **k):
        raise AssertionError("json.loads called for a record orjson reads")

    with monkeypatch.context() as m:
        m.setattr(record_module.json, "loads", no_json)
        got = [loads_json(d) for d in datas]
    # the same values, types (1 and 1.0), signs of zero and key orders: serialised alike
    assert [orjson.dumps(g) for g in got] == [orjson.dumps(e) for e in expected] and len(datas) >= 200
    odd = b'{"a": NaN, "b": -Infinity, "c": 123456789012345678901234567890, "d": [1.5e-300, "\\u00e9"]}'
    got = loads_json(odd)
    assert np.isnan(got["a"]) and got["b"] == -np.inf and got["c"] == 123456789012345678901234567890
    assert got["d"] == [1.5e-300, "\u00e9"]
    # what orjson alone reads otherwise, each in a record it would read: integers beyond 64 bits (as floats), a
    # number beyond a double (an error), a lone surrogate (an error); and an integer orjson reads exactly
    for text in ('{"n": 18446744073709551616}', '{"n": -9223372036854775809}', '[1, 100000000000000000000000000000]',
                 '18446744073709551617', '{"x": 1e400}', '{"s": "\\ud800"}', '{"n": 9223372036854775807}',
                 '{"small": 0.00012345678901234567, "big": 1.2345678901234567e+20, "hash": "1234567890123456789"}'):
        ours, theirs = loads_json(text.encode()), json.loads(text)
        assert ours == theirs and repr(ours) == repr(theirs), text
    for bad in (b'{"a": 1,}', b'{"a": "\xe9"}', b"[" * 100_000):
        with pytest.raises((ValueError, RecursionError)) as ours:
            loads_json(bad)
        with pytest.raises((ValueError, RecursionError)) as theirs:
            json.loads(bad.decode("utf-8"))
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    with pytest.raises(GenbenchError, match=r"cannot read result record x\.json: not JSON \(Expecting property name"):
        parse_record(b'{"a": 1,}', "x.json")


def test_a_misspelt_score_name_is_refused_not_read_as_missing():
    """Planted: `score("kfold_r3")` returned None, as a score the record lacks does; a typo now names the close
    names, while a known score the record lacks, and a score only the record knows, still read as before."""
    rec = Record({"scores": {"values": {"kfold_r2": 0.5, "tau": 0.2, "later_score": 1.5},
                             "intervals": {"kfold_r2": [0.4, 0.6]}}})
    assert rec.score("kfold_r2") == 0.5 and rec.interval("kfold_r2") == (0.4, 0.6)
    assert rec.score("cmi") is None and rec.interval("cmi") == (None, None) and rec.refusal("cmi") is None
    assert rec.score("later_score") == 1.5  # a record made by a newer genbench
    for read in (rec.score, rec.interval, rec.refusal):
        with pytest.raises(GenbenchError, match=r"unknown score 'kfold_r3'\. Did you mean 'kfold_r2'.*score_keys"):
            read("kfold_r3")
    with pytest.raises(GenbenchError, match="a score is a string, got int 3"):
        rec.score(3)
    over = Record({"scores": {"values": {}}, "trainings": {"combined": {"values": {"combined_only": 0.1}}}})
    assert over.score("combined_only") == 0.1


def test_two_records_one_holding_a_score_the_other_lacks_are_not_the_same_entry():
    """A score name only a newer genbench writes is held by one record: comparing the two (the leaderboard's twins)
    says they differ instead of asking the other record for a score it does not know."""
    from genbench.leaderboard.standings import _same_scores
    a = Record({"scores": {"values": {"kfold_r2": 0.5}}})
    b = Record({"scores": {"values": {"kfold_r2": 0.5, "later_score": 1.0}}})
    assert _same_scores(a, Record({"scores": {"values": {"kfold_r2": 0.5}}}))
    assert not _same_scores(a, b) and not _same_scores(b, a)
