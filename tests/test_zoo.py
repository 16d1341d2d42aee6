"""The zoo: format, API, exact training data, checksums, determinism and resume."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch
import yaml

import genbench as gb
from genbench.errors import GenbenchError
from genbench.zoo import build as build_mod
from genbench.zoo.recipe import load_recipe
from genbench.zoo.train import evaluate_model, init_model

COLUMNS = ["model_id", "hp.width", "hp.batchnorm", "hp.label_noise", "hp.seed", "hp.lr", "hp.optimizer",
           "hp.batch_size", "hp.train_size", "family", "arch", "dataset", "train_indices_seed", "train_acc",
           "test_acc", "train_loss", "test_loss", "gap", "epochs", "steps", "converged", "twin_of",
           "perturbation", "checkpoint", "checkpoint_sha256", "init_checkpoint", "init_sha256", "train_seconds"]


def test_layout_and_table(digits_zoo):
    root = digits_zoo.root
    assert len(digits_zoo) == 24
    assert set(COLUMNS) <= set(digits_zoo.table.columns)
    t = digits_zoo.table
    assert (t["gap"] == t["train_acc"] - t["test_acc"]).all()
    assert (t["epochs"] == 12).all() and (t["steps"] == 12 * (1258 // 64)).all()
    manifest = json.loads((root / "zoo.json").read_text())
    assert {"models.parquet", "dataset.safetensors"} <= set(manifest["files"])
    assert manifest["grid"] == {"width": [16, 32], "batchnorm": [False, True], "label_noise": [0.0, 0.3],
                                "seed": [0, 1, 2]}
    assert manifest["recipe"].startswith("name: digits-mlp")
    for rel in t["checkpoint"].tolist() + t["init_checkpoint"].tolist():
        assert (root / rel).is_file() and rel.endswith(".safetensors")
    assert not list(root.rglob("*.pt")) and not list(root.rglob("*.pkl")) and not list(root.rglob("*.tmp"))
    front = (root / "README.md").read_text().split("---")[1]
    assert yaml.safe_load(front)["configs"][0]["data_files"] == "models.parquet"
    assert digits_zoo.hparams["width"] == [16, 32]


def test_load_zoo_by_name_and_path(digits_zoo):
    assert gb.load_zoo("digits-mlp").root == digits_zoo.root
    assert len(gb.load_zoo(digits_zoo.root)) == 24


def test_reloaded_models_reproduce_recorded_metrics_exactly(digits_zoo):
    for model_id in digits_zoo.model_ids[::5]:
        row = digits_zoo.row(model_id)
        model = digits_zoo.load_model(model_id)
        assert not model.training
        x, y = digits_zoo.train_data(model_id)
        assert len(y) == row["hp.train_size"]
        acc, loss = evaluate_model(model, x, y)
        assert acc == row["train_acc"] and loss == pytest.approx(row["train_loss"], rel=1e-6)
        xt, yt = digits_zoo.test_data(model_id)
        assert evaluate_model(model, xt, yt)[0] == row["test_acc"]


def test_train_data_carries_the_corrupted_labels(digits_zoo):
    t = digits_zoo.table
    noisy = t[t["hp.label_noise"] == 0.3]["model_id"].iloc[0]
    clean = t[(t["hp.label_noise"] == 0.0) & (t["hp.seed"] == digits_zoo.row(noisy)["hp.seed"])]["model_id"].iloc[0]
    xn, yn = digits_zoo.train_data(noisy)
    xc, yc = digits_zoo.train_data(clean)
    assert torch.equal(xn, xc)  # same seed, same subset
    frac = (yn != yc).float().mean().item()
    assert 0.25 < frac < 0.35


def test_init_checkpoint_is_the_initialisation(digits_zoo):
    recipe = load_recipe("digits-mlp")
    spec = recipe.expand()[3]
    fresh = init_model(spec, digits_zoo.pool)
    loaded = digits_zoo.load_model(spec.model_id, init=True)
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k])
    final = digits_zoo.load_model(spec.model_id)
    assert not torch.equal(final.state_dict()["head.weight"], fresh.state_dict()["head.weight"])


def test_corrupted_checkpoint_names_file_and_hashes(digits_zoo, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(digits_zoo.root, root)
    zoo = gb.load_zoo(root)
    mid = zoo.model_ids[1]
    path = root / zoo.row(mid)["checkpoint"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(GenbenchError, match=rf"{mid}\.safetensors is corrupted: expected sha256 [0-9a-f]{{64}}, got"):
        zoo.load_model(mid)
    problems = zoo.verify()
    assert len(problems) == 1 and mid in problems[0]
    (root / zoo.row(mid)["init_checkpoint"]).unlink()
    with pytest.raises(GenbenchError, match="missing"):
        zoo.load_model(mid, init=True)


class Killed(Exception):
    pass


def test_a_build_limited_then_finished_is_the_zoo_an_uninterrupted_build_makes(nin_zoo, tmp_path):
    """Planted: `zoo build digits-nin --limit 3` then `zoo build digits-nin` gave a model other weights than one
    build (the limited build trained the first 3 models as a group of 3, and a group's members share its dropout
    stream), and `zoo verify` could not see it. The cut models are now trained again with their whole group."""
    cut = gb.build_zoo("digits-nin", tmp_path / "z", limit=3, progress=False)
    assert len(cut) == 3
    real, calls = build_mod._write_model, []

    def dying(root, t, *a, **k):  # the build that completes the group dies writing its second model
        calls.append(t.spec.model_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(root, t, *a, **k)

    build_mod._write_model = dying
    try:
        with pytest.raises(KeyboardInterrupt):
            gb.build_zoo("digits-nin", tmp_path / "z", progress=False)
    finally:
        build_mod._write_model = real
    assert calls[0] == cut.model_ids[0]  # the cut models are trained again first, with their whole group
    table = tmp_path / "z" / "models.parquet"  # no row cites a checkpoint written again: out of the table first
    assert not table.exists() or not set(pd.read_parquet(table)["model_id"]) & set(cut.model_ids)
    done = gb.build_zoo("digits-nin", tmp_path / "z", progress=False)
    assert done.model_ids == nin_zoo.model_ids  # the rows in the order one build writes them
    for col in ("checkpoint_sha256", "init_sha256", "train_acc", "test_acc"):
        assert done.table[col].tolist() == nin_zoo.table[col].tolist(), col
    assert done.table_sha256 == nin_zoo.table_sha256


def test_build_is_deterministic_and_resumes_after_interruption(home, tmp_path, monkeypatch):
    clean = gb.build_zoo("digits-mlp", tmp_path / "clean", limit=12, max_group=4, progress=False)
    calls, crashed = [], []
    real = build_mod.train_group

    def crashing(group, *a, **k):
        calls.append([s.model_id for s in group])
        if len(calls) == 2 and not crashed:
            crashed.append(True)
            raise Killed  # the build dies while training the second group
        return real(group, *a, **k)

    monkeypatch.setattr(build_mod, "train_group", crashing)
    with pytest.raises(Killed):
        gb.build_zoo("digits-mlp", tmp_path / "resumed", limit=12, max_group=4, progress=False)
    partial = pd.read_parquet(tmp_path / "resumed" / "models.parquet")
    assert list(partial["model_id"]) == calls[0]
    first_files = {mid: (tmp_path / "resumed" / "checkpoints" / f"{mid}.safetensors").stat().st_mtime_ns
                   for mid in calls[0]}
    calls.clear()
    resumed = gb.build_zoo("digits-mlp", tmp_path / "resumed", limit=12, max_group=4, progress=False)
    trained_again = {m for group in calls for m in group}
    assert not trained_again & set(first_files)  # nothing finished is retrained
    for mid, mtime in first_files.items():
        assert (tmp_path / "resumed" / "checkpoints" / f"{mid}.safetensors").stat().st_mtime_ns == mtime
    a = clean.table.set_index("model_id")
    b = resumed.table.set_index("model_id").loc[a.index]
    assert (a["checkpoint_sha256"] == b["checkpoint_sha256"]).all()
    assert (a["init_sha256"] == b["init_sha256"]).all()
    assert (a["train_acc"] == b["train_acc"]).all()
    assert clean.table_sha256 == resumed.table_sha256  # the same zoo, though each build timed itself
    changed = gb.load_zoo(tmp_path / "resumed")
    changed.table.loc[0, "train_acc"] += 0.01
    assert changed.table_sha256 != resumed.table_sha256


@pytest.mark.parametrize("env,expect", [({"GENBENCH_OMP_WAIT_POLICY": "active"}, None),
                                        ({"GENBENCH_OMP_WAIT_POLICY": "passive"}, "PASSIVE"),
                                        ({"GENBENCH_OMP_WAIT_POLICY": "passive", "OMP_WAIT_POLICY": "ACTIVE"},
                                         "ACTIVE")])
def test_genbench_lets_waiting_openmp_threads_sleep_when_asked(env, expect):
    """With GENBENCH_OMP_WAIT_POLICY=passive, importing genbench (before torch) sets OMP_WAIT_POLICY=PASSIVE, so
    that torch's OpenMP threads sleep at a barrier instead of spinning on a core another process needs; a policy
    of the user's wins; without it OpenMP keeps its own default (faster on an idle machine)."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GENBENCH_OMP_WAIT_POLICY")}
    code = "import os, genbench; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(expect)


@pytest.mark.parametrize("choice,others,user,expect", [
    ("auto", "all", None, "PASSIVE"), ("auto", 0, None, None), ("auto", None, None, None),
    (None, "all", None, "PASSIVE"), ("active", "all", None, None), ("passive", 0, None, "PASSIVE"),
    ("auto", "all", "ACTIVE", "ACTIVE"), ("sleepy", "all", None, "PASSIVE")])
def test_auto_wait_policy_sleeps_only_when_other_processes_hold_the_cores(monkeypatch, choice, others, user, expect):
    """`auto` (the default) sets OMP_WAIT_POLICY=PASSIVE when the threads running beside genbench at import leave it
    fewer free cores than it computes with, and leaves OpenMP's own default on an idle machine (where passive is
    2.1x slower); a policy of the user's wins; an unknown choice warns and acts as auto."""
    import os
    import warnings

    from genbench import numerics

    cores = len(os.sched_getaffinity(0))
    count = cores if others == "all" else others
    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "1")  # so that an idle 1-CPU host has a free core too
    monkeypatch.setenv("OMP_WAIT_POLICY", "x")  # recorded, so the value written below is undone after the test
    monkeypatch.delenv("OMP_WAIT_POLICY")
    if user:
        monkeypatch.setenv("OMP_WAIT_POLICY", user)
    if choice is None:
        monkeypatch.delenv("GENBENCH_OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("GENBENCH_OMP_WAIT_POLICY", choice)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        numerics.share_cores_when_waiting(lambda: count)
    assert os.environ.get("OMP_WAIT_POLICY") == expect
    assert bool(said) == (choice == "sleepy") and (not said or "not one of" in str(said[0].message))


def test_others_running_reads_procs_running(tmp_path, monkeypatch):
    """The count of other runnable threads is procs_running minus the reader itself, the median of the reads; an
    unreadable or foreign stat file gives None (then auto keeps OpenMP's default)."""
    from genbench.numerics import cores_taken, others_running

    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4\nprocs_running 3\nprocs_blocked 0\n")
    assert others_running(stat=str(stat), samples=3, spacing_s=0) == 2
    stat.write_text("cpu  1 2 3 4\n")
    assert others_running(stat=str(stat), samples=3, spacing_s=0) is None
    assert others_running(stat=str(tmp_path / "none")) is None
    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "1")
    assert cores_taken(None) is False and cores_taken(10_000) is True and cores_taken(0) is False
    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "abc")  # reported by a build, never a crash at import
    assert cores_taken(10_000) is False


def test_builds_run_under_pinned_numerics_and_a_resume_refuses_other_settings(tmp_path, monkeypatch):
    """Issue 15 item 6: the manifest records the CPU numerics a build ran under (genbench pins AVX2 kernels and the
    build's thread count) and resuming it under other settings is refused, not mixed into one zoo."""
    import json

    import torch

    zoo = gb.build_zoo("digits-mlp", tmp_path / "z", limit=4, max_group=4, progress=False)
    numerics = zoo.manifest["numerics"]
    assert numerics["ATEN_CPU_CAPABILITY"] == "avx2" and numerics["MKL_CBWR"] == "AVX2,STRICT"
    assert numerics["aten_capability"] == "AVX2" and numerics["threads"] == 2
    assert torch.get_num_threads() != 2 or numerics["threads"] == 2  # the caller's thread count is restored
    path = tmp_path / "z" / "zoo.json"
    manifest = json.loads(path.read_text())
    manifest["numerics"]["MKL_CBWR"] = "AUTO"  # started elsewhere under the machine's native kernels
    path.write_text(json.dumps(manifest))
    with pytest.raises(GenbenchError, match=r"other CPU numerics settings \(MKL_CBWR=AUTO; now MKL_CBWR=AVX2,STRICT"):
        gb.build_zoo("digits-mlp", tmp_path / "z", limit=8, max_group=4, progress=False)
    manifest["numerics"]["MKL_CBWR"] = "AVX2,STRICT"
    path.write_text(json.dumps(manifest))
    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "1")
    with pytest.raises(GenbenchError, match="threads=2; now threads=1"):
        gb.build_zoo("digits-mlp", tmp_path / "z", limit=8, max_group=4, progress=False)
    monkeypatch.setenv("GENBENCH_BUILD_THREADS", "zero")
    with pytest.raises(GenbenchError, match="GENBENCH_BUILD_THREADS must be a whole number >= 1, got 'zero'"):
        gb.build_zoo("digits-mlp", tmp_path / "z", limit=8, max_group=4, progress=False)


def test_build_refuses_a_folder_of_another_recipe(digits_zoo, home):
    with pytest.raises(GenbenchError, match="different recipe"):
        gb.build_zoo("digits-mlp", digits_zoo.root, overrides={"train.epochs": 3}, progress=False)


def test_unknown_zoo_name_suggests_and_hints(digits_zoo):
    with pytest.raises(GenbenchError, match="Did you mean 'digits-mlp'"):
        gb.load_zoo("digits-mpl")
    with pytest.raises(GenbenchError, match="not built here.*`genbench zoo build mnist1d-fragility`"):
        gb.load_zoo("mnist1d-fragility")
    with pytest.raises(GenbenchError, match="unknown model id"):
        digits_zoo.load_model("w16_nope")


def test_cuda_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(GenbenchError, match="no CUDA GPU"):
        gb.build_zoo("digits-mlp", device="cuda", progress=False)


# ---------------------------------------------------------------- complete and partial zoos


@pytest.fixture(scope="module")
def partial_zoo(home, tmp_path_factory):
    """digits-mlp with 12 of its 24 models (an interrupted build), in a GENBENCH_HOME of its own."""
    return gb.build_zoo("digits-mlp", tmp_path_factory.mktemp("partial_home") / "zoos" / "digits-mlp", limit=12,
                        progress=False)


def test_expected_count_is_the_number_of_models_each_recipe_expands_to():
    from genbench.zoo import list_recipes
    from genbench.zoo.storage import expected_count

    for name in list_recipes():
        recipe = load_recipe(name)
        assert expected_count(recipe.grid, recipe.twins) == len(recipe.expand()), name


def test_a_zoo_knows_whether_it_holds_every_model_of_its_recipe(digits_zoo, partial_zoo):
    assert digits_zoo.complete and digits_zoo.expected_models == 24 and digits_zoo.missing_count == 0
    assert digits_zoo.state() == "complete: all 24 models of the recipe"
    digits_zoo.require_complete()  # nothing to refuse
    assert not partial_zoo.complete and partial_zoo.expected_models == 24 and partial_zoo.missing_count == 12
    command = f"genbench zoo build digits-mlp --out {partial_zoo.root}"  # not the default folder of this home
    assert partial_zoo.state() == f"partial: 12 of 24 models; finish it with `{command}`"
    assert "expected_models=24" in repr(partial_zoo)
    with pytest.raises(GenbenchError) as info:
        partial_zoo.require_complete()
    assert str(info.value) == (f"zoo 'digits-mlp' is partial: 12 of 24 models, 12 missing; finish it with `{command}` "
                               "(or pass --allow-partial to score it anyway: the scores then describe those 12 models "
                               "only, and a record of them is marked partial and not ranked beside records on "
                               "complete zoos)")
    partial_zoo.require_complete(allow_partial=True)


def test_a_hub_zoo_missing_some_downloads_is_partial_and_says_how_to_fetch_them(digits_zoo, tmp_path):
    import shutil

    root = tmp_path / "snapshot"
    shutil.copytree(digits_zoo.root, root)
    (root / digits_zoo.row(digits_zoo.model_ids[0])["checkpoint"]).unlink()  # as if not downloaded
    zoo = gb.Zoo(root, revision="abc123", repo_id="org/digits")
    assert len(zoo.missing_models) == 1 and not zoo.complete and zoo.missing_count == 1
    with pytest.raises(GenbenchError, match=r"23 of 24 models, 1 missing; download the rest with "
                                            r"`genbench zoo download org/digits --revision abc123`"):
        zoo.require_complete()


def test_zoo_list_shows_every_folder_with_its_state_and_info_says_partial(partial_zoo, monkeypatch):
    from typer.testing import CliRunner

    import genbench.cli as cli

    zoos = partial_zoo.root.parent
    monkeypatch.setenv("GENBENCH_HOME", str(zoos.parent))
    monkeypatch.setattr(cli.console, "width", 300)  # one line per row
    (zoos / "no-table").mkdir(exist_ok=True)  # a build that died before its first group was written
    manifest = json.loads((partial_zoo.root / "zoo.json").read_text())
    (zoos / "no-table" / "zoo.json").write_text(json.dumps({**manifest, "name": "no-table"}))
    (zoos / "unreadable").mkdir(exist_ok=True)
    (zoos / "unreadable" / "zoo.json").write_text("{not json")
    runner = CliRunner()
    result = runner.invoke(cli.app, ["zoo", "list"])
    assert result.exit_code == 0, result.output
    rows = {cells[0]: " ".join(cells) for cells in (line.replace("\u2502", " ").split()
                                                    for line in result.output.splitlines()) if cells}
    assert rows["digits-mlp"] == "digits-mlp test partial 12 of 24 finish it with `genbench zoo build digits-mlp`"
    assert rows["no-table"] == ("no-table own empty 0 of 24 no model built yet; build it with "
                                "`genbench zoo build RECIPE.yaml`")
    assert rows["unreadable"].startswith("unreadable own broken") and "is not valid JSON" in rows["unreadable"]
    # recipes not built are listed too, with their role, their build time and the command that builds them
    assert rows["mnist1d-demogen"] == ("mnist1d-demogen demo not built ~2 min on 2 CPU cores: genbench zoo build "
                                       "mnist1d-demogen")
    monkeypatch.setattr(cli.console, "width", 80)  # a narrow terminal: the notes under the table, no word broken
    narrow = runner.invoke(cli.app, ["zoo", "list"])
    assert narrow.exit_code == 0 and "\u2026" not in narrow.output, narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    words = {w for line in narrow.output.splitlines() for w in line.replace("\u2502", " ").split()}
    assert {"mnist1d-demogen", "`genbench", "digits-mlp`"} <= words  # whole, never folded mid-word
    assert "mnist1d-demogen: ~2 min on 2 CPU cores: genbench zoo build mnist1d-demogen" in " ".join(narrow.output.split())
    result = runner.invoke(cli.app, ["zoo", "info", "digits-mlp"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "12 of 24 models: partial" in flat
    assert "partial: 12 of 24 models; finish it with `genbench zoo build digits-mlp`" in flat
    result = runner.invoke(cli.app, ["zoo", "info", "no-table"])
    assert "has no models.parquet yet: no model is built; build it with `genbench zoo build RECIPE.yaml`" in " ".join(
        str(result.exception).split())


def test_a_zoo_path_that_is_a_file_or_a_folder_without_zoo_json_says_so(digits_zoo, tmp_path):
    from genbench.zoo import load_zoo
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "zoos").mkdir()
    (tmp_path / "zoos" / "copy").symlink_to(digits_zoo.root)
    cases = {str(tmp_path / "notes.txt"): "is a file, not a zoo",
             str(digits_zoo.root / "zoo.json"): f"not the zoo: pass its folder, {digits_zoo.root}",
             str(tmp_path / "empty"): "is a folder without zoo.json, so it is no zoo",
             str(tmp_path / "zoos"): f"it holds the zoos ['copy']: pass one of them, e.g. {tmp_path / 'zoos' / 'copy'}",
             str(tmp_path / "absent"): f"there is no folder {tmp_path / 'absent'}"}
    for given, says in cases.items():
        with pytest.raises(GenbenchError) as e:
            load_zoo(given)
        assert says in str(e.value), (given, str(e.value))
    with pytest.raises(GenbenchError, match="Did you mean 'digits-mlp'"):  # a name is still a name
        load_zoo("digits-mpl")
    assert load_zoo(str(tmp_path / "zoos" / "copy")).name == digits_zoo.name


def test_a_name_and_a_path_are_never_taken_for_each_other(digits_zoo, tmp_path, monkeypatch):
    """./digits-mlp without zoo.json opened the zoo built here; digits-mlp opened a copy in the current folder."""
    from genbench.zoo import load_zoo
    monkeypatch.chdir(tmp_path)
    (tmp_path / "digits-mlp").mkdir()
    assert load_zoo("digits-mlp").root == digits_zoo.root  # a name: the zoo built here
    with pytest.raises(GenbenchError, match="is a folder without zoo.json, so it is no zoo"):
        load_zoo("./digits-mlp")  # a path: that folder, never the name
    (tmp_path / "digits-mlp").rmdir()
    (tmp_path / "digits-mlp").symlink_to(tmp_path / "zoo-copy")
    shutil.copytree(digits_zoo.root, tmp_path / "zoo-copy", ignore=shutil.ignore_patterns("checkpoints"))
    with pytest.raises(GenbenchError, match=r"'digits-mlp' is both a zoo built here .* write \./digits-mlp for the "
                                            r"folder"):
        load_zoo("digits-mlp")
    assert load_zoo("./digits-mlp").root.resolve() == (tmp_path / "zoo-copy").resolve()


def test_zoo_list_gives_every_recipe_and_official_training_its_role_and_state(partial_zoo, monkeypatch):
    from genbench.cli.zoo import zoo_listing
    from genbench.defaults import OFFICIAL_ZOOS, TRAININGS
    from genbench.zoo import list_recipes

    monkeypatch.setenv("GENBENCH_HOME", str(partial_zoo.root.parent.parent))
    rows = {r[0]: r[1:] for r in zoo_listing()}
    assert set(list_recipes()) <= set(rows)
    for grid in OFFICIAL_ZOOS:
        assert rows[grid][:2] == ("official", "not built")
        for k in range(1, TRAININGS):
            role, state, _, note = rows[f"{grid}-t{k}"]
            assert (role, state) == (f"official training {k}", "not built")
            assert note.endswith(f": genbench zoo build {grid} --training {k}")
    assert rows["mnist1d-fragility"][0] == rows["fragility-cnn-mnist1d"][0] == "audit"
    assert rows["mnist1d-demogen"][0] == "demo" and rows["digits-nin"][0] == "test"
    assert rows["digits-mlp"][:3] == ("test", "partial", "12 of 24")
    assert rows["demogen-nin-cifar10"][3].startswith("GPU only: ")


def test_a_built_training_and_an_imported_or_own_zoo_get_their_roles(digits_zoo):
    from genbench.zoo.roles import zoo_role

    assert zoo_role("demogen-nin-mnist1d-t2") == "official training 2"
    assert zoo_role("demogen-nin-mnist1d-t3") == "training 3 (unscored)"  # past the shipped trainings
    assert zoo_role("digits-mlp-t1") == "training 1 (unscored)"
    assert zoo_role("my-zoo") == zoo_role("no-such-recipe-t1") == "own"
    assert zoo_role("pgdl-task1", type("Z", (), {"manifest": {"imported": {}}})()) == "imported"
    assert zoo_role("digits-mlp", digits_zoo) == "test"


def _says_not_built(name: str, command: str, took: str) -> None:
    """A zoo a recipe makes, not built here, is refused in one line saying so, how long it takes and the command."""
    with pytest.raises(GenbenchError) as info:
        gb.load_zoo(name)
    msg = str(info.value)
    assert msg == f"zoo {name!r} is not built here; building it {took}: `{command}`", msg


def test_a_known_recipe_or_training_that_is_not_built_is_never_unknown(home):
    cases = [("demogen-nin-mnist1d", "genbench zoo build demogen-nin-mnist1d", "takes about 9 min on 2 CPU cores"),
             ("fantastic-cnn-mnist1d-t2", "genbench zoo build fantastic-cnn-mnist1d --training 2",
              "takes about 25 min on 2 CPU cores"),
             ("demogen-resnet32-cifar10", "genbench zoo build demogen-resnet32-cifar10",
              "needs a GPU (CIFAR data from the Hub; hours on a CPU)")]
    for case in cases:
        _says_not_built(*case)
    with pytest.raises(GenbenchError, match="unknown zoo 'no-such-zoo'"):  # a name no recipe makes stays unknown
        gb.load_zoo("no-such-zoo")


def test_the_old_unknown_zoo_message_for_a_recipe_is_caught(home, monkeypatch):
    from genbench.zoo import storage

    monkeypatch.setattr(storage, "not_built", lambda name: None)  # the old behaviour: "unknown zoo ... Did you mean"
    with pytest.raises(AssertionError):
        _says_not_built("demogen-nin-mnist1d", "genbench zoo build demogen-nin-mnist1d",
                        "takes about 9 min on 2 CPU cores")


def test_every_recipe_has_a_build_time():
    from genbench.defaults import BUILD_MINUTES, GPU_ONLY
    from genbench.zoo import list_recipes

    assert set(list_recipes()) == set(BUILD_MINUTES) | set(GPU_ONLY)


def test_submitting_to_a_recipe_that_is_not_built_says_so_and_how_to_build_it(home):
    from pathlib import Path

    from genbench.entries.submit import submit

    folder = Path(__file__).resolve().parents[1] / "submissions" / "gradient_noise_scale"
    with pytest.raises(GenbenchError) as info:
        submit(folder, ["demogen-nin-mnist1d"], results_root=home / "no-results")
    assert str(info.value) == ("zoo 'demogen-nin-mnist1d' is not built here; building it takes about 9 min on 2 CPU "
                               "cores: `genbench zoo build demogen-nin-mnist1d`")
