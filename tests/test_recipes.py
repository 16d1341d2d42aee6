"""Recipes: the shipped grids, twins and seeds, and clear errors for malformed ones."""
from __future__ import annotations

import pytest

from genbench.errors import GenbenchError
from genbench.zoo.recipe import list_recipes, load_recipe, parse_recipe

SHIPPED = {"mnist1d-demogen": 216, "mnist1d-fragility": 750, "mnist1d-fantastic": 1215, "digits-mlp": 24,
           "demogen-nin-cifar10": 216, "demogen-resnet32-cifar10": 216, "demogen-resnet32-cifar100": 324,
           "demogen-nin-mnist1d": 216, "digits-nin": 8, "fantastic-cnn-mnist1d": 243, "fragility-cnn-mnist1d": 750}


@pytest.mark.parametrize("name,count", sorted(SHIPPED.items()))
def test_shipped_recipes_expand_to_their_grid(name, count):
    specs = load_recipe(name).expand()
    assert len(specs) == count
    assert len({s.model_id for s in specs}) == count


def test_all_recipes_are_listed():
    assert set(SHIPPED) <= set(list_recipes())


def test_fragility_twins_share_init_data_and_order_with_their_baseline():
    specs = load_recipe("mnist1d-fragility").expand()
    by_id = {s.model_id: s for s in specs}
    twins = [s for s in specs if s.twin_of]
    assert len(twins) == 600 and {t.perturbation for t in twins} == {"lr_div1.5", "adam", "no_momentum",
                                                                      "batch_x2_lr_x2"}
    for t in twins:
        base = by_id[t.twin_of]
        assert (t.init_seed, t.data_seed, t.run_seed) == (base.init_seed, base.data_seed, base.run_seed)
        assert t.train["train_size"] == base.train["train_size"]
        assert t.train["label_noise"] == base.train["label_noise"]
        change = {k for k in t.train if t.train[k] != base.train[k]}
        assert change == {"lr_div1.5": {"lr"}, "adam": {"optimizer", "lr"}, "no_momentum": {"momentum", "lr"},
                          "batch_x2_lr_x2": {"batch_size", "lr"}}[t.perturbation]
        if t.perturbation == "lr_div1.5":
            assert t.train["lr"] == pytest.approx(base.train["lr"] / 1.5)
        if t.perturbation == "no_momentum":  # the same effective step lr / (1 - momentum)
            assert t.train["lr"] == pytest.approx(base.train["lr"] / (1 - base.train["momentum"]))
        if t.perturbation == "batch_x2_lr_x2":
            assert (t.train["batch_size"], t.train["lr"]) == (2 * base.train["batch_size"],
                                                              pytest.approx(2 * base.train["lr"]))
        if t.perturbation == "adam":
            assert t.train["optimizer"] == "adam" and base.train["optimizer"] == "sgd"
    # replicates of one seed draw nested subsets: the data seed depends on the seed axis only
    assert len({s.data_seed for s in specs}) == 5


def test_the_cnn_twin_of_the_fragility_zoo_differs_from_it_only_in_the_network():
    mlp, cnn = load_recipe("mnist1d-fragility"), load_recipe("fragility-cnn-mnist1d")
    assert (mlp.family, cnn.family) == ("mlp", "cnn1d") and cnn.arch == {"depth": 3, "channels": 32}
    assert (cnn.dataset, cnn.grid, cnn.train, cnn.twins, cnn.seed) == (mlp.dataset, mlp.grid, mlp.train, mlp.twins,
                                                                       mlp.seed)
    same = ("model_id", "init_seed", "data_seed", "run_seed", "train", "twin_of", "perturbation")
    for a, b in zip(mlp.expand(), cnn.expand(), strict=True):
        assert {k: getattr(a, k) for k in same} == {k: getattr(b, k) for k in same}
        assert {k: v for k, v in a.hp.items() if k not in a.arch} == {k: v for k, v in b.hp.items() if k not in b.arch}


def test_demogen_grid_models_get_distinct_inits():
    specs = load_recipe("mnist1d-demogen").expand()
    assert len({s.init_seed for s in specs}) == 216


BASE = {"name": "r", "dataset": {"name": "digits"}, "family": "mlp", "grid": {"width": [8]}}


@pytest.mark.parametrize("change,message", [
    ({"grid": {"width": 8}}, r"key 'grid.width': expected a non-empty list"),
    ({"train": {"epoch": 3}}, r"Did you mean 'epochs'"),
    ({"family": "mpl"}, r"Did you mean 'mlp'"),
    ({"train": {"optimizer": "rmsprop"}}, r"key 'train.optimizer': expected one of"),
    ({"train": {"stop": {"metric": "val_acc", "threshold": 1}}}, r"key 'train.stop'"),
    ({"train": {"lr": -1}}, r"key 'train.lr': expected a positive number"),
    ({"grid": {"width": [8, 8]}}, r"distinct values"),
    ({"twins": [{"name": "x", "scale": {"lrr": 10}}]}, r"Did you mean 'lr'"),
    ({"extra": 1}, r"top-level key"),
])
def test_malformed_recipes_name_the_key(change, message):
    with pytest.raises(GenbenchError, match=message):
        parse_recipe({**BASE, **change})


def test_missing_key_and_unknown_recipe():
    with pytest.raises(GenbenchError, match="missing required key 'grid'"):
        parse_recipe({k: v for k, v in BASE.items() if k != "grid"})
    with pytest.raises(GenbenchError, match="Did you mean 'mnist1d-demogen'"):
        load_recipe("mnist1d-demogn")


def test_overrides_apply_dotted_keys():
    r = load_recipe("digits-mlp", {"train.epochs": 2, "grid.width": [4]})
    assert r.train["epochs"] == 2 and r.grid["width"] == [4]
