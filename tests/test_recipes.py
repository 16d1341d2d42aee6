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


def test_the_cnn_audit_zoo_shares_the_mlp_audit_zoos_curves_and_keeps_only_mild_twins():
    mlp, cnn = load_recipe("mnist1d-fragility"), load_recipe("fragility-cnn-mnist1d")
    assert (mlp.family, cnn.family) == ("mlp", "cnn1d") and cnn.arch == {"depth": 3, "channels": 32}
    assert (cnn.dataset, cnn.grid, cnn.train, cnn.seed) == (mlp.dataset, mlp.grid, mlp.train, mlp.seed)
    shared = [t for t in cnn.twins if t in mlp.twins]
    assert [t["name"] for t in shared] == ["lr_div1.5", "batch_x2_lr_x2"]
    same = ("model_id", "init_seed", "data_seed", "run_seed", "train", "twin_of", "perturbation")
    mine = {s.model_id: s for s in cnn.expand()}
    theirs = [s for s in mlp.expand() if s.perturbation in (None, "lr_div1.5", "batch_x2_lr_x2")]
    assert len(theirs) == 450 and len(mine) == 750
    for a in theirs:  # the baselines and the shared twins: the same seeds and training as the MLPs'
        b = mine[a.model_id]
        assert {k: getattr(a, k) for k in same} == {k: getattr(b, k) for k in same}
    base = cnn.train
    step = base["lr"] / (1 - base["momentum"])
    for s in cnn.expand():  # the replacements for Adam and SGD without momentum stay SGD with momentum and keep
        t = s.train           # the baseline's effective step, or its learning rate per example
        if s.perturbation == "momentum_0.8":
            assert t["optimizer"] == "sgd" and t["lr"] / (1 - t["momentum"]) == pytest.approx(step)
        elif s.perturbation == "batch_div2_lr_div2":
            assert t["lr"] / t["batch_size"] == pytest.approx(base["lr"] / base["batch_size"])
    assert {s.perturbation for s in cnn.expand()} == {None, "lr_div1.5", "batch_x2_lr_x2", "batch_div2_lr_div2",
                                                    "momentum_0.8"}


def test_demogen_grid_models_get_distinct_inits():
    specs = load_recipe("mnist1d-demogen").expand()
    assert len({s.init_seed for s in specs}) == 216


BASE = {"name": "r", "dataset": {"name": "digits"}, "family": "mlp", "grid": {"width": [8]}}


@pytest.mark.parametrize("change,message", [
    ({"grid": {"width": 8}}, r"key 'grid.width': expected a non-empty list"),
    ({"train": {"epoch": 3}}, r"unknown training key 'train.epoch'. Did you mean 'train.epochs'"),
    ({"family": "mpl"}, r"Did you mean 'mlp'"),
    ({"train": {"optimizer": "rmsprop"}}, r"key 'train.optimizer': expected one of"),
    ({"train": {"stop": {"metric": "val_acc", "threshold": 1}}}, r"key 'train.stop'"),
    ({"train": {"lr": -1}}, r"key 'train.lr': expected a positive number"),
    ({"grid": {"width": [8, 8]}}, r"distinct values"),
    ({"twins": [{"name": "x", "scale": {"lrr": 10}}]}, r"unknown training key of twins\[0\] \(x\) 'lrr'. Did you mean 'lr'"),
    ({"extra": 1}, r"top-level key"),
    # trained as whole numbers: 2.5 epochs trained 2 while the table said 2.5 (baseline.hparams read that)
    ({"train": {"epochs": 2.5}}, r"key 'train.epochs': expected a whole number, got 2.5"),
    ({"grid": {"width": [8], "batch_size": [32, 2.5]}}, r"key 'train.batch_size': expected a whole number, got 2.5"),
    ({"train": {"lr": float("nan")}}, r"key 'train.lr': expected a positive number, got nan"),
    ({"train": {"epochs": "1e9"}}, r"expected a positive number \(YAML reads 1e9 as text: write 1.0e9\)"),
    # a traceback from int() or, for a milestone, one from inside training after it had started
    ({"seed": "abc"}, r"key 'seed': expected a whole number, got 'abc'"),
    ({"version": 1.5}, r"key 'version': expected a whole number, got 1.5"),
    ({"train": {"lr_milestones": ["abc"]}}, r"key 'train.lr_milestones': expected a list of epochs \(whole numbers"),
    ({"twins": [{"name": "small", "scale": {"batch_size": 0.7}}]},
     r"key 'twins \(small\): train.batch_size': expected a whole number >= 1 once scaled or set, got 89.6"),
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
    with pytest.raises(GenbenchError, match=r"digits-mlp.yaml with the overrides \(--set\) train.lr: key 'train.lr'"):
        load_recipe("digits-mlp", {"train.lr": float("nan")})  # the override is wrong, not the recipe file


# ---------------------------------------------------------------- the one audit-zoo rule

def _check_audit_rule() -> None:
    """Convolutional zoos are audited on the CNN audit zoo, MLP zoos on the MLP one: by family, by recipe name (a
    training's name included) and from a loaded zoo's table."""
    import pandas as pd

    from genbench.defaults import AUDIT_ZOO, CNN_AUDIT_ZOO
    from genbench.zoo.roles import audit_zoo_of

    for name in ("demogen-nin-mnist1d", "demogen-nin-mnist1d-t2", "fantastic-cnn-mnist1d", "fragility-cnn-mnist1d",
                 "digits-nin", "demogen-resnet32-cifar10"):
        assert audit_zoo_of(name) == CNN_AUDIT_ZOO, name
    for name in ("mnist1d-demogen", "mnist1d-fantastic", "mnist1d-fragility", "digits-mlp", "digits-mlp-t1"):
        assert audit_zoo_of(name) == AUDIT_ZOO, name
    zoo = type("LoadedZoo", (), {})
    for family, expected in (("cnn1d", CNN_AUDIT_ZOO), ("nin", CNN_AUDIT_ZOO), ("resnet32v2", CNN_AUDIT_ZOO),
                             ("keras", CNN_AUDIT_ZOO), ("mlp", AUDIT_ZOO)):
        z = zoo()
        z.table, z.manifest = pd.DataFrame({"family": [family, family]}), {}
        assert audit_zoo_of(z) == expected, family
        z.table, z.manifest = pd.DataFrame({"model_id": []}), {"recipe_effective": {"family": family}}
        assert audit_zoo_of(z) == expected, family


def test_the_audit_zoo_of_a_ranked_zoo_follows_its_family():
    _check_audit_rule()


@pytest.mark.parametrize("planted", ["all_mlp", "swapped"])
def test_a_wrong_audit_rule_is_caught(monkeypatch, planted):
    from genbench.defaults import AUDIT_ZOO, CNN_AUDIT_ZOO
    from genbench.zoo import roles

    wrong = ((lambda family: AUDIT_ZOO) if planted == "all_mlp"  # the rule before: one audit zoo for every record
             else (lambda family: AUDIT_ZOO if family != "mlp" else CNN_AUDIT_ZOO))
    monkeypatch.setattr(roles, "audit_zoo_for", wrong)
    with pytest.raises(AssertionError):
        _check_audit_rule()


def test_every_recipe_is_audited_on_a_recipe_and_an_explicit_audit_zoo_wins():
    import inspect

    from genbench.defaults import AUDIT_ZOO, AUTO_AUDIT, CNN_AUDIT_ZOO
    from genbench.entries.run import run_entry
    from genbench.entries.submit.api import run_submission, submit
    from genbench.zoo.roles import audit_zoo_of, resolve_audit_zoo

    for name in list_recipes():
        assert audit_zoo_of(name) in (AUDIT_ZOO, CNN_AUDIT_ZOO) and audit_zoo_of(name) in list_recipes()
    assert resolve_audit_zoo(AUTO_AUDIT, "demogen-nin-mnist1d") == CNN_AUDIT_ZOO
    assert resolve_audit_zoo(AUDIT_ZOO, "demogen-nin-mnist1d") == AUDIT_ZOO  # --audit-zoo overrides the rule
    assert resolve_audit_zoo(None, "demogen-nin-mnist1d") is None  # no audit
    for fn in (run_entry, submit, run_submission):  # the entry points take the rule unless told otherwise
        assert inspect.signature(fn).parameters["audit_zoo"].default == AUTO_AUDIT, fn.__name__
