"""Trainings of a grid: `genbench zoo build RECIPE --training K` trains the same grid on the same data with every
seed of the training noise changed, as the zoo RECIPE-tK; K = 0 is the recipe's own zoo, byte for byte."""
from __future__ import annotations

import hashlib
import json

import pytest
import torch
from typer.testing import CliRunner

import genbench as gb
from genbench.defaults import official_trainings, training_name, training_of
from genbench.errors import GenbenchError
from genbench.zoo import list_recipes
from genbench.zoo import recipe as recipe_mod
from genbench.zoo.recipe import load_recipe


def _old_seed(*parts) -> int:
    """The seed derivation every zoo was built with before trainings existed, written out independently."""
    return int(hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def _old_seeds(recipe) -> list[tuple[int, int, int]]:
    """(init, data, run) of every model as the code before trainings derived them (ident = the grid point's id)."""
    out = []
    for spec in recipe.expand():
        ident = spec.model_id.split("__")[0]
        out.append((_old_seed(recipe.seed, ident, "init"), _old_seed(recipe.seed, f"s{spec.train['seed']}", "data"),
                    _old_seed(recipe.seed, ident, "run")))
    return out


def _seeds(recipe) -> list[tuple[int, int, int]]:
    return [(s.init_seed, s.data_seed, s.run_seed) for s in recipe.expand()]


def _check_training_zero_keeps_the_old_seeds() -> None:
    for name in list_recipes():
        recipe = load_recipe(name)
        assert _seeds(recipe) == _old_seeds(recipe), name
        assert _seeds(recipe.with_training(0)) == _old_seeds(recipe), name


def test_training_zero_derives_exactly_the_old_seeds_of_every_stream_of_every_recipe():
    _check_training_zero_keeps_the_old_seeds()


def test_a_derivation_that_changes_training_zero_is_caught(monkeypatch):
    def planted(recipe_seed, key, stream, training=0):  # a tag on every training, K = 0 included
        return _old_seed(recipe_seed, key, stream, f"t{training}")

    monkeypatch.setattr(recipe_mod, "stream_seed", planted)
    with pytest.raises(AssertionError):
        _check_training_zero_keeps_the_old_seeds()


def test_a_training_changes_init_and_run_seeds_and_keeps_the_data_seed():
    recipe = load_recipe("mnist1d-fragility")  # twins and several seeds
    base, t1, t2 = (_seeds(recipe.with_training(k)) for k in (0, 1, 2))
    for a, b in ((base, t1), (base, t2), (t1, t2)):
        assert [s[1] for s in a] == [s[1] for s in b]  # data: the same subsets and corrupted labels
        assert all(x[0] != y[0] and x[2] != y[2] for x, y in zip(a, b))  # init, order, dropout, augmentation
    assert [s.model_id for s in recipe.with_training(2).expand()] == [s.model_id for s in recipe.expand()]


def test_training_names_map_to_grid_and_index():
    assert training_name("demogen-nin-mnist1d", 0) == "demogen-nin-mnist1d"
    assert training_name("demogen-nin-mnist1d", 2) == "demogen-nin-mnist1d-t2"
    assert training_of("demogen-nin-mnist1d-t2") == ("demogen-nin-mnist1d", 2)
    assert training_of("demogen-nin-mnist1d-t12") == ("demogen-nin-mnist1d", 12)
    for plain in ("demogen-nin-mnist1d", "x-t0", "x-t01", "x-t", "-t1"):
        assert training_of(plain) == (plain, 0)
    assert official_trainings("demogen-nin-mnist1d") == ["demogen-nin-mnist1d", "demogen-nin-mnist1d-t1",
                                                          "demogen-nin-mnist1d-t2"]
    with pytest.raises(ValueError, match="not an official grid"):
        official_trainings("mnist1d-demogen")


@pytest.fixture(scope="module")
def trainings(home, digits_zoo):
    """Trainings 1 and 2 of digits-mlp, built by name into this session's GENBENCH_HOME."""
    return {k: gb.build_zoo("digits-mlp", training=k, progress=False) for k in (1, 2)}


def test_training_zero_builds_the_same_checkpoints_and_table_as_a_plain_build(digits_zoo, tmp_path):
    again = gb.build_zoo("digits-mlp", tmp_path / "t0", training=0, progress=False)
    assert again.name == "digits-mlp" and again.training == 0
    assert again.table_sha256 == digits_zoo.table_sha256
    for col in ("checkpoint_sha256", "init_sha256", "init_seed", "run_seed", "train_indices_seed"):
        assert list(again.table[col]) == list(digits_zoo.table[col]), col
    manifest = json.loads((again.root / "zoo.json").read_text())
    assert "training" not in manifest and "training_of" not in manifest  # the manifest of K = 0 is as before


def test_trainings_share_the_data_and_grid_and_differ_in_their_weights(digits_zoo, trainings):
    zoos = {0: digits_zoo, **trainings}
    grid_cols = [c for c in digits_zoo.table.columns if c.startswith("hp.")] + ["model_id", "train_indices_seed"]
    for k in (1, 2):
        z = zoos[k]
        assert z.name == f"digits-mlp-t{k}" and z.training == k and z.complete
        assert z.manifest["training"] == k and z.manifest["training_of"] == "digits-mlp"
        assert z.table[grid_cols].equals(digits_zoo.table[grid_cols])
    for a, b in ((0, 1), (0, 2), (1, 2)):
        ta, tb = zoos[a].table, zoos[b].table
        assert not set(ta["init_sha256"]) & set(tb["init_sha256"]), (a, b)
        assert not set(ta["checkpoint_sha256"]) & set(tb["checkpoint_sha256"]), (a, b)
        assert (ta["init_seed"] != tb["init_seed"]).all() and (ta["run_seed"] != tb["run_seed"]).all()
        assert zoos[a].table_sha256 != zoos[b].table_sha256
        for mid in ("w16_bn0_ln0.3_s1", "w32_bn1_ln0.0_s2"):
            xa, ya = zoos[a].train_data(mid)
            xb, yb = zoos[b].train_data(mid)
            assert torch.equal(xa, xb) and torch.equal(ya, yb)  # the same examples and corrupted labels
            wa = zoos[a].load_model(mid, init=True).state_dict()
            wb = zoos[b].load_model(mid, init=True).state_dict()
            assert any(not torch.equal(wa[n], wb[n]) for n in wa if wa[n].is_floating_point())


def test_a_training_loads_by_name_and_info_shows_its_index(trainings):
    import genbench.cli as cli

    z = gb.load_zoo("digits-mlp-t1")
    assert z.root == trainings[1].root and z.training == 1
    result = CliRunner().invoke(cli.app, ["zoo", "info", "digits-mlp-t1"])
    assert result.exit_code == 0, result.output
    assert "training 1 of the grid digits-mlp" in " ".join(result.output.split())


def test_a_partial_training_says_to_finish_it_with_training_k(home, tmp_path):
    zoo = gb.build_zoo("digits-mlp", training=3, limit=4, progress=False)
    assert not zoo.complete and zoo.name == "digits-mlp-t3"
    assert "finish it with `genbench zoo build digits-mlp --training 3`" in zoo.state()
    with pytest.raises(GenbenchError, match="different recipe"):  # training 3 is not resumed into another training
        gb.build_zoo("digits-mlp", zoo.root, training=4, progress=False)


def test_an_unbuilt_training_is_not_unknown():
    with pytest.raises(GenbenchError) as info:
        gb.load_zoo("digits-nin-t7")
    msg = str(info.value)
    assert "unknown" not in msg and "\n" not in msg
    assert msg == ("zoo 'digits-nin-t7' is not built here; building it takes seconds: "
                   "`genbench zoo build digits-nin --training 7`")


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", ""])
def test_a_bad_training_index_is_one_line(bad, home):
    import genbench.cli as cli

    result = CliRunner().invoke(cli.app, ["zoo", "build", "digits-mlp", "--training", bad])
    assert isinstance(result.exception, GenbenchError)  # the command line prints it as one line, no traceback
    assert str(result.exception) == ("training (--training) must be a whole number >= 0 (0: the recipe's own zoo; "
                                     f"K >= 1: training K, the zoo RECIPE-tK), got {bad!r}")


@pytest.mark.parametrize("bad", [-1, 1.0, True, "2"])
def test_the_python_api_refuses_a_bad_training_index(bad, home):
    if bad == "2":  # a string of digits is read as the number, as on the command line
        assert recipe_mod.check_training(bad) == 2
        return
    with pytest.raises(GenbenchError, match="whole number >= 0"):
        gb.build_zoo("digits-mlp", training=bad, progress=False)


def test_training_on_a_name_that_is_not_a_recipe_is_one_line(home):
    import genbench.cli as cli

    runner = CliRunner()
    result = runner.invoke(cli.app, ["zoo", "build", "digits-mlp-t1", "--training", "1"])
    assert isinstance(result.exception, GenbenchError)
    assert str(result.exception) == ("digits-mlp-t1 is training 1 of the recipe digits-mlp, not a recipe: build it "
                                     "with `genbench zoo build digits-mlp --training 1`")
    result = runner.invoke(cli.app, ["zoo", "build", "no-such-recipe", "--training", "1"])
    assert isinstance(result.exception, GenbenchError)
    assert str(result.exception).startswith("unknown recipe 'no-such-recipe'") and "\n" not in str(result.exception)
