"""`genbench submit` without --zoo scores where the benchmark ranks (issue 40, item 2): the official zoos built here,
the missing ones named with the command that gets each, else the demo zoo said to be not official; its last line is
the official verdict, or says that the zoo is not official. Built on the tiny digits zoo, OFFICIAL_ZOOS monkeypatched
(no real zoo is built)."""
from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from genbench import defaults
from genbench.cli import app
from genbench.leaderboard import standings
from test_submit import CLI_SANDBOX, TEMPLATE

FAST = ["--no-audit", "--n-boot", "20", "--budget-s", "30", "--device", "cpu", *CLI_SANDBOX]


def without_zoos(tmp_path):
    """The template submission, its submission.yaml naming no zoos."""
    folder = tmp_path / "subs" / "plain"
    shutil.copytree(TEMPLATE, folder)
    yaml = folder / "submission.yaml"
    yaml.write_text("".join(line for line in yaml.read_text().splitlines(keepends=True)
                            if not line.startswith(("zoos:", "  - mnist1d"))))
    import yaml as pyyaml
    assert "zoos" not in pyyaml.safe_load(yaml.read_text())
    return folder


@pytest.fixture
def own_home(tmp_path, home, digits_zoo, monkeypatch):
    """A GENBENCH_HOME of its own that holds the session's zoos (digits-mlp) and no official zoo."""
    user = tmp_path / "home"
    user.mkdir()
    (user / "zoos").symlink_to(home / "zoos")
    monkeypatch.setenv("GENBENCH_HOME", str(user))
    return user


def flat(output: str) -> str:
    return " ".join(output.split())


def test_a_non_official_zoo_is_said_to_be_not_official_on_the_last_line(tmp_path, own_home):
    out = CliRunner().invoke(app, ["submit", str(TEMPLATE), "--zoo", "digits-mlp", "--results", str(tmp_path / "r"),
                                   *FAST])
    assert out.exit_code == 0, out.output
    text = flat(out.output)
    assert "digits-mlp: ok" in text
    end = text[text.rindex("not official"):]  # the verdict closes the output, naming the zoo and the official ones
    assert end.startswith("not official: digits-mlp is not an official zoo; the benchmark ranks on "
                          + ", ".join(defaults.OFFICIAL_ZOOS)), end
    assert all(f"`genbench zoo get {z}`" in end for z in defaults.OFFICIAL_ZOOS), end
    assert end.endswith(f"then `genbench submit {TEMPLATE} "
                        + " ".join(f"--zoo {z}" for z in defaults.OFFICIAL_ZOOS) + "`"), end


def test_no_zoo_and_no_official_zoo_built_falls_back_to_the_demo_zoo_and_names_the_missing(tmp_path, own_home,
                                                                                            monkeypatch):
    monkeypatch.setattr(defaults, "DEFAULT_ZOO", "digits-mlp")  # the demo zoo, built in seconds
    folder = without_zoos(tmp_path)
    out = CliRunner().invoke(app, ["submit", str(folder), "--results", str(tmp_path / "r"), *FAST])
    assert out.exit_code == 0, out.output
    text = flat(out.output)
    assert "no official zoo is built here: scoring on the demo zoo digits-mlp, which is not official" in text
    for z in defaults.OFFICIAL_ZOOS:
        assert f"{z}: `genbench zoo get {z}`" in text, z
    record = json.loads((tmp_path / "r" / "digits-mlp" / "plain.json").read_text())
    assert record["submission"]["zoos"] == []  # the record does not say submission.yaml named a zoo (it said the demo's)
    assert "not official: digits-mlp is not an official zoo" in text[text.rindex("record:"):]


def test_no_zoo_scores_on_the_official_zoos_built_here_and_ends_with_the_official_verdict(tmp_path, own_home,
                                                                                          monkeypatch):
    official = ("digits-mlp", "fantastic-cnn-mnist1d")  # one built here, one not
    monkeypatch.setattr(defaults, "OFFICIAL_ZOOS", official)
    monkeypatch.setattr(standings, "OFFICIAL_ZOOS", official)
    folder = without_zoos(tmp_path)
    out = CliRunner().invoke(app, ["submit", str(folder), "--results", str(tmp_path / "r"), *FAST])
    assert out.exit_code == 0, out.output
    text = flat(out.output)
    assert "zoos digits-mlp (the official zoos built here)" in text
    assert "official zoos not built here: fantastic-cnn-mnist1d: `genbench zoo get fantastic-cnn-mnist1d`" in text
    assert "not official" not in text
    assert text.endswith(
        "official verdict: mean rank 1.0 over 1 of 2 official zoos (1 on digits-mlp); not yet scored on "
        f"fantastic-cnn-mnist1d: `genbench zoo get fantastic-cnn-mnist1d`, then `genbench submit {folder} --zoo "
        "fantastic-cnn-mnist1d`"), text[-400:]


def test_the_zoos_of_submission_yaml_are_kept(tmp_path, own_home):
    from genbench.entries.submit import load_submission
    from genbench.entries.submit.zoos import choose_zoos
    folder = tmp_path / "named_zoos"
    shutil.copytree(TEMPLATE, folder)
    meta = folder / "submission.yaml"
    meta.write_text(meta.read_text() + "zoos:\n  - mnist1d-demogen\n")  # the template names none: planted here
    choice = choose_zoos(load_submission(folder))
    assert (choice.names, choice.source, choice.notes) == (("mnist1d-demogen",), "submission.yaml", ())
    assert choose_zoos(load_submission(TEMPLATE)).source != "submission.yaml"  # the template leaves it to submit
    assert load_submission(TEMPLATE).zoos == () and load_submission(folder).zoos == ("mnist1d-demogen",)
    assert choose_zoos(load_submission(TEMPLATE), ["digits-mlp", "digits-mlp"]).names == ("digits-mlp",)


def test_a_record_that_cannot_be_written_after_the_work_goes_to_the_temporary_folder(tmp_path, own_home, monkeypatch):
    """The results folder becomes unwritable once the work is done (planted: the first write fails): the record is
    written under the system's temporary folder, one line says where, and submit still ranks it."""
    import tempfile

    from genbench import record as record_module
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # gettempdir(): a folder of this test's own
    real, calls = record_module.write_record, []

    def failing_once(rec, root=None):
        calls.append(root)
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied")
        return real(rec, root)

    monkeypatch.setattr(record_module, "write_record", failing_once)
    import genbench.cli as cli
    monkeypatch.setattr(cli.console, "width", 1000)  # long paths on one line
    results = tmp_path / "r"
    out = CliRunner().invoke(app, ["submit", str(TEMPLATE), "--zoo", "digits-mlp", "--results", str(results),
                                   *FAST])
    assert out.exit_code == 0, out.output
    fallback = tmp_path / "tmp" / "genbench-results" / "digits-mlp" / "_template.json"
    assert fallback.is_file() and not (results / "digits-mlp" / "_template.json").exists()
    text = flat(out.output)
    assert (f"cannot write the record to {results / 'digits-mlp' / '_template.json'} (Permission denied); written to "
            f"{fallback} instead") in text
    assert f"record: {fallback}" in text and "rank 1 of" in text
    assert calls == [results, tmp_path / "tmp" / "genbench-results"]


def test_the_fallback_write_in_the_library_warns_where_it_wrote(tmp_path, monkeypatch):
    import tempfile

    from genbench import record as record_module
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    locked = tmp_path / "locked"
    locked.write_text("a file where the results folder should be")  # any write under it fails (NotADirectoryError)
    rec = {"schema": record_module.SCHEMA, "name": "x", "zoo": {"name": "z"}}
    with pytest.warns(UserWarning, match="cannot write the record to .*locked/z/x.json.*written to .*genbench-results"):
        path = record_module.write_record_safely(rec, locked)
    assert path == tmp_path / "tmp" / "genbench-results" / "z" / "x.json" and path.is_file()


def test_the_last_line_gets_only_the_official_zoos_not_built_here(monkeypatch):
    """Where the official zoos are built, the line says only how to submit there (`zoo get` for the unbuilt ones)."""
    from pathlib import Path

    from genbench.cli.submit import official_verdict
    from genbench.entries.submit import zoos
    monkeypatch.setattr(defaults, "OFFICIAL_ZOOS", ("a-zoo", "b-zoo"))
    monkeypatch.setattr(zoos, "official_built", lambda: (["a-zoo"], ["b-zoo"]))
    line = official_verdict("mine", ["own-zoo"], [], Path("submissions/mine"))
    assert line == ("not official: own-zoo is not an official zoo; the benchmark ranks on a-zoo, b-zoo: `genbench zoo "
                    "get b-zoo`, then `genbench submit submissions/mine --zoo a-zoo --zoo b-zoo`")
    line = official_verdict("mine", ["a-zoo"], [], Path("submissions/mine"))
    assert line == ("official verdict: not ranked on the official zoos (its records failed or are partial); not yet "
                    "scored on b-zoo: `genbench zoo get b-zoo`, then `genbench submit submissions/mine --zoo b-zoo`")
    monkeypatch.setattr(zoos, "official_built", lambda: (["a-zoo", "b-zoo"], []))
    line = official_verdict("mine", ["own-zoo"], [], Path("submissions/mine"))
    assert line.endswith("b-zoo: `genbench submit submissions/mine --zoo a-zoo --zoo b-zoo`") and "zoo get" not in line
