"""Bad input to the zoo commands, each planted: one line that names the problem and the fix, never a traceback, and
nothing left behind on disk."""
from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

import genbench.cli as cli
from genbench.errors import GenbenchError
from genbench.zoo import hub as gbhub
from genbench.zoo.storage import MANIFEST, TABLE

runner = CliRunner()


def _refused(argv: list[str]) -> str:
    """The one-line GenbenchError a command ends in (a traceback-free refusal), flattened of the console's wrapping."""
    result = runner.invoke(cli.app, argv)
    assert isinstance(result.exception, GenbenchError), (result.exception, result.output)
    message = str(result.exception)
    assert "\n" not in message, message
    return message


@pytest.fixture
def fresh_home(monkeypatch, tmp_path):
    """An empty $GENBENCH_HOME of this test's own, so a folder left behind shows."""
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_set_value_that_is_not_yaml_is_refused_in_one_line(fresh_home):
    message = _refused(["zoo", "build", "digits-mlp", "--set", "train.epochs=[1"])
    assert message.startswith("--set train.epochs=[1: the value is not valid YAML (while parsing a flow sequence: "
                               "expected ',' or ']', but got '<stream end>' at line 1, column 3); write the value as "
                               "YAML"), message
    assert not (fresh_home / "zoos").exists()


def test_a_recipe_file_that_is_not_utf8_is_refused_in_one_line(fresh_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lat.yaml").write_bytes(b"n\xe9me: x\n")
    message = _refused(["zoo", "build", "lat.yaml"])
    assert message == "recipe lat.yaml: not UTF-8 text (invalid continuation byte at byte 1); save it as UTF-8"
    (tmp_path / "bad.yaml").write_text("grid: [1\n")  # invalid YAML: said on one line too, with where
    assert _refused(["zoo", "build", "bad.yaml"]) == ("recipe bad.yaml: not valid YAML (while parsing a flow sequence: "
                                                      "expected ',' or ']', but got '<stream end>' at line 2, column 1)")


def test_a_recipe_path_that_is_a_folder_or_a_file_without_yaml_says_what_it_is(fresh_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.yaml").mkdir()
    (tmp_path / "afile").write_text("name: x\n")
    assert _refused(["zoo", "build", "d.yaml"]).startswith("'d.yaml' is a folder, not a recipe file: pass a recipe's "
                                                           "YAML file")
    message = _refused(["zoo", "build", str(tmp_path / "afile")])
    assert message.startswith(f"'{tmp_path / 'afile'}' is a file whose name does not end in .yaml (or .yml), not a "
                              "recipe file"), message
    assert "unknown recipe" not in message
    assert _refused(["zoo", "build", "digits-mlq"]).startswith("unknown recipe 'digits-mlq'")  # a name is still a name


@pytest.mark.parametrize("content", [b"", b"junk", b"PAR1 not a parquet file PAR1"])
def test_an_unreadable_table_is_one_line_in_every_command_that_opens_the_zoo(digits_zoo, tmp_path, content):
    broken = tmp_path / "broken"
    shutil.copytree(digits_zoo.root, broken)
    (broken / TABLE).write_bytes(content)
    for argv in (["zoo", "info", str(broken)], ["zoo", "verify", str(broken)],
                 ["evaluate", "norm.param", "--zoo", str(broken)]):
        message = _refused(argv)
        assert message.startswith(f"{broken / TABLE}: the table file is unreadable ("), (argv, message)
        assert message.endswith(f"delete it and rebuild the zoo (`genbench zoo build digits-mlp --out {broken}`), or "
                                "download it again"), (argv, message)


@pytest.mark.parametrize("damage, says", [
    (lambda t: t.drop(columns=["model_id"]), "has no column 'model_id': a zoo's table holds one row per model with at "
                                             "least model_id and gap (train_acc - test_acc); rebuild or re-download"),
    (lambda t: t.drop(columns=["gap"]), "has no column 'gap': a zoo's table"),
    (lambda t: t.assign(model_id=["m000", *t["model_id"][1:-1], "m000"]), "has the model_id 'm000' on 2 rows: each "
                                                                          "model needs its own id"),
    (lambda t: t.assign(model_id=[*t["model_id"][:-1], None]), "has no model_id in row 71: each model needs"),
])
def test_a_table_without_its_ids_or_gaps_is_refused_when_the_zoo_is_opened(tmp_path, damage, says):
    """A parquet table that reads but lacks what every reader needs (a hand-made zoo: no sha256 in its manifest to
    catch it) is refused in one line, not a KeyError later, and not a zoo of silently merged models."""
    import pandas as pd
    from planted import GRID, planted_gap, write_zoo
    root = tmp_path / "z"
    write_zoo(root, GRID, planted_gap)
    table = pd.read_parquet(root / TABLE)
    assert len(table) == 72
    damage(table).to_parquet(root / TABLE, index=False)
    message = _refused(["zoo", "info", str(root)])
    assert message.startswith(f"{root / TABLE} {says}"), message
    assert message.endswith("rebuild or re-download the zoo"), message


def test_a_manifest_that_is_not_utf8_is_refused_as_invalid_json_is(digits_zoo, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(digits_zoo.root, broken)
    (broken / MANIFEST).write_bytes(b'{"n\xe9": 1}')
    assert _refused(["zoo", "info", str(broken)]) == (f"{broken / MANIFEST} is not UTF-8 text (invalid continuation "
                                                      "byte at byte 3); rebuild or re-download the zoo")
    # a build resumed in that folder reads the same manifest: the same line
    assert _refused(["zoo", "build", "digits-mlp", "--out", str(broken)]) == _refused(["zoo", "info", str(broken)])


@pytest.mark.parametrize("field, value", [("num_classes", "ten"), ("num_classes", 1), ("test_size", -1),
                                          ("in_shape", [64, "x"])])
def test_an_edited_manifest_field_is_refused_by_info_and_verify(digits_zoo, tmp_path, field, value):
    """Planted: `"num_classes": "ten"` passed `zoo info` and `zoo verify` ("all files match"), then every model
    failed in evaluate with int()'s message, naming neither the field nor the file."""
    import json
    edited = tmp_path / "edited"
    shutil.copytree(digits_zoo.root, edited)
    manifest = json.loads((edited / MANIFEST).read_text())
    manifest[field] = value
    (edited / MANIFEST).write_text(json.dumps(manifest))
    for command in (["zoo", "info", str(edited)], ["zoo", "verify", str(edited)]):
        assert _refused(command) == (f"{edited / MANIFEST}: its field {field} is {value!r}, not "
                                     + ("a list of whole numbers >= 1" if field == "in_shape" else
                                        f"a whole number >= {2 if field == 'num_classes' else 0}")
                                     + " (was it edited?); rebuild or re-download the zoo"), command


@pytest.mark.parametrize("name, says", [
    ("demogen-nin-mnist1d-t99", "no shipped training 99 of demogen-nin-mnist1d (shipped: -t1, -t2); build it with "
                                "`genbench zoo build demogen-nin-mnist1d --training 99`"),
    ("digits-mlp-t1", "no shipped training 1 of digits-mlp (trainings are shipped for the official grids only: "
                      "demogen-nin-mnist1d, fantastic-cnn-mnist1d); build it with `genbench zoo build digits-mlp "
                      "--training 1`"),
])
def test_get_refuses_a_training_that_is_not_shipped_before_fetching_or_building(name, says, fresh_home, monkeypatch):
    import genbench.zoo.build as build

    def planted(*args, **kwargs):
        raise AssertionError("zoo get fetched or built a training genbench does not ship")

    monkeypatch.setattr(gbhub, "download_zoo", planted)
    monkeypatch.setattr(build, "build_zoo", planted)
    assert _refused(["zoo", "get", name]) == says
    assert not (fresh_home / "zoos" / name).exists()


def test_submit_points_a_training_that_is_not_shipped_to_its_build_command_not_zoo_get(fresh_home):
    """submit's hint for a zoo not built here: `zoo get` for what genbench ships, the build for any other training."""
    from genbench.entries.submit.api import known_zoo
    for name, command in (("demogen-nin-mnist1d-t9", "genbench zoo build demogen-nin-mnist1d --training 9"),
                          ("demogen-nin-mnist1d-t1", "genbench zoo get demogen-nin-mnist1d-t1"),
                          ("digits-mlp", "genbench zoo get digits-mlp")):
        with pytest.raises(GenbenchError) as e:
            known_zoo(name)
        assert f"is not built here: get it with `{command}`, or name the zoo" in str(e.value), str(e.value)


def test_a_limit_below_one_is_refused_before_the_zoo_folder_is_made(fresh_home):
    assert _refused(["zoo", "build", "digits-mlp", "--limit", "0"]) == "limit (--limit) must be at least 1, got 0"
    assert not (fresh_home / "zoos" / "digits-mlp").exists()


@pytest.mark.parametrize("argv", [["zoo", "build", "digits-mlp", "--address", "ray://h:10001"],
                                  ["evaluate", "norm.params", "--zoo", "digits-mlp", "--address", "ray://h:10001"]])
def test_an_address_without_the_ray_executor_is_said_in_the_command_lines_words(argv, fresh_home):
    """The API's 'pass executor='ray'' is not what a command line takes: it names --executor ray."""
    assert _refused(argv) == ("--address is a Ray cluster's address; pass --executor ray with it (got --executor "
                              "local)")
    assert not (fresh_home / "zoos").exists()
