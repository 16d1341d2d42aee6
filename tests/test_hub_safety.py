"""The Hub paths against bad servers and bad repos: a server that never answers, a repo holding another zoo's files,
stray checkpoints, a local folder in the way of `zoo get`."""
from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import genbench as gb
from genbench.entries.publish import push_results
from genbench.zoo import hub as gbhub
from genbench.zoo.storage import DATASET, MANIFEST, save_checkpoint
from test_hub import RecordingApi, git, go_online, hub, hub_env, runner  # noqa: F401  fixtures
from genbench.cli import app

WAIT = 20  # seconds a call against a silent server may take before the test calls it hung


def within(seconds: float, fn: Callable[[], Any]) -> BaseException | None:
    """Run fn in a daemon thread; the exception it raised (None: it returned), or fail the test if it hangs."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as e:  # noqa: BLE001  handed to the test
            box.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        pytest.fail(f"still waiting after {seconds} s: the call hangs on a server that never answers")
    return box[0]


@pytest.fixture
def silent(monkeypatch, tmp_path):
    """HF_ENDPOINT at a loopback socket that accepts connections and never answers; a 0.3 s Hub timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    go_online(monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "0.3")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    yield url
    sock.close()


def test_a_silent_server_is_one_line_not_a_hang(silent, digits_zoo, tmp_path, monkeypatch):
    start = time.monotonic()
    err = within(WAIT, lambda: gb.load_zoo("hf://genbench/x"))
    assert isinstance(err, gb.GenbenchError) and time.monotonic() - start < WAIT
    text = str(err)
    assert "\n" not in text and text.startswith(f"the server at {silent} does not answer")
    assert "check the network or HF_ENDPOINT" in text
    err = within(WAIT, lambda: gbhub.push_zoo(digits_zoo.root, "genbench/x"))  # the real HfApi
    assert isinstance(err, gb.GenbenchError), err
    assert str(err).startswith(f"the server at {silent} does not answer"), str(err)


def test_zoo_get_builds_when_the_hub_is_silent(silent, tmp_path, monkeypatch):
    import genbench.zoo.build as build
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    notes: list[str] = []

    def fake_build(*args, **kwargs):
        raise RuntimeError("built")

    monkeypatch.setattr(build, "build_zoo", fake_build)
    err = within(WAIT, lambda: gbhub.get_zoo("digits-mlp", results=tmp_path / "none", note=notes.append))
    assert isinstance(err, RuntimeError) and str(err) == "built"
    assert len(notes) == 1 and "does not answer" in notes[0] and "built here instead" in notes[0]


def repo_files(hub, repo_id: str) -> list[str]:
    """The files a repo of the loopback Hub holds at its head."""
    return sorted(git(hub.repo_dir(repo_id), "ls-files").splitlines())


def with_data(src: Path, dest: Path, x_train: torch.Tensor | None) -> Path:
    """A copy of a zoo folder whose dataset.safetensors holds `x_train` (listed in zoo.json), or none at all."""
    shutil.copytree(src, dest)
    manifest = json.loads((dest / MANIFEST).read_text())
    (dest / DATASET).unlink()
    del manifest["files"][DATASET]
    if x_train is not None:
        n = len(x_train)
        tensors = {"x_train": x_train, "y_train": torch.zeros(n, dtype=torch.long), "x_test": x_train.clone(),
                   "y_test": torch.zeros(n, dtype=torch.long)}
        manifest["files"][DATASET] = save_checkpoint(dest / DATASET, tensors, {"dataset": "planted"})
    (dest / MANIFEST).write_text(json.dumps(manifest))
    return dest


def test_a_push_over_another_zoo_leaves_exactly_its_files(hub, hub_env, digits_zoo, tmp_path):
    """Issue: a push never deleted what an earlier push left, and pool read any dataset.safetensors found."""
    api, repo = RecordingApi(hub), "genbench/reused"
    old = with_data(digits_zoo.root, tmp_path / "old", torch.ones(7, 64))
    gbhub.push_zoo(old, repo, api=api)
    assert DATASET in repo_files(hub, repo)
    new = with_data(digits_zoo.root, tmp_path / "new", None)
    pushed = gbhub.push_zoo(new, repo, api=api)
    assert repo_files(hub, repo) == sorted(pushed.files) and DATASET not in pushed.files
    zoo = gb.load_zoo(f"hf://{repo}")
    assert zoo.pool.x_train.shape == digits_zoo.pool.x_train.shape  # the zoo's own data, from its source
    shutil.copyfile(old / DATASET, new / DATASET)  # a stray data file in a local folder is ignored too
    assert gb.load_zoo(str(new)).pool.x_train.shape == digits_zoo.pool.x_train.shape
    gbhub.push_zoo(new, repo, api=api)  # and never pushed
    assert DATASET not in repo_files(hub, repo)


def test_big_pushes_delete_stale_files_too(hub, hub_env, digits_zoo, tmp_path, monkeypatch):
    api, repo = RecordingApi(hub), "genbench/reused-large"
    gbhub.push_zoo(with_data(digits_zoo.root, tmp_path / "old", torch.ones(7, 64)), repo, api=api)
    monkeypatch.setattr(gbhub, "LARGE_UPLOAD_FILES", 10)
    pushed = gbhub.push_zoo(with_data(digits_zoo.root, tmp_path / "new", None), repo, api=api)
    assert repo_files(hub, repo) == sorted(pushed.files)


def test_leaderboard_push_leaves_exactly_the_records(hub, hub_env, tmp_path):
    api, repo = RecordingApi(hub), "genbench/records"
    results = tmp_path / "results"
    (results / "z").mkdir(parents=True)
    for name in ("a", "b"):
        (results / "z" / f"{name}.json").write_text(json.dumps({"measure": name}))
    push_results(results, repo, api=api)
    (hub.repo_dir(repo) / "README.md").write_text("a card written on the Hub\n")  # not a record: kept
    git(hub.repo_dir(repo), "add", "-A")
    git(hub.repo_dir(repo), "commit", "-q", "-m", "a card")
    (results / "z" / "b.json").unlink()
    push_results(results, repo, api=api)
    assert repo_files(hub, repo) == ["README.md", "z/a.json"]


CANONICAL = "genbench/digits-mlp"  # the repo `zoo get digits-mlp` downloads


@pytest.fixture(scope="module")
def canonical(hub, digits_zoo, tmp_path_factory):
    """The digits zoo pushed to its canonical repo on the loopback Hub."""
    return gbhub.push_zoo(with_data(digits_zoo.root, tmp_path_factory.mktemp("z") / "zoo", None), CANONICAL,
                          api=RecordingApi(hub))


def test_only_the_zoos_files_are_downloaded_and_got(canonical, hub, hub_env, digits_zoo, tmp_path, monkeypatch):
    """Issue: a full download fetched all of checkpoints/, zoo get copied a stray file and zoo verify passed it."""
    repo = CANONICAL
    junk = hub.repo_dir(repo) / "checkpoints" / "junk.safetensors"
    junk.write_bytes(b"not a checkpoint")
    git(hub.repo_dir(repo), "add", "-A")
    git(hub.repo_dir(repo), "commit", "-q", "-m", "a stray file")
    zoo = gb.load_zoo(f"hf://{repo}")
    assert not (zoo.root / "checkpoints" / "junk.safetensors").exists() and len(zoo) == len(digits_zoo)
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    got, how = gbhub.get_zoo("digits-mlp", results=tmp_path / "none")
    assert how == "downloaded" and got.stray_files() == [] and got.verify() == []
    (got.root / "checkpoints" / "junk.safetensors").write_bytes(b"planted")
    result = runner.invoke(app, ["zoo", "verify", str(got.root)])
    flat = " ".join(result.output.split())  # a note, not a failure: genbench never reads such a file
    assert result.exit_code == 0 and "note: " in flat and "checkpoints/junk.safetensors is not part of zoo" in flat


def test_zoo_get_refuses_a_folder_that_is_no_zoo(canonical, hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    dest = tmp_path / "home" / "zoos" / "digits-mlp"
    (dest / "checkpoints").mkdir(parents=True)
    (dest / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["zoo", "get", "digits-mlp"])
    text = str(result.exception)  # the CLI's entry point prints a GenbenchError as one line
    assert isinstance(result.exception, gb.GenbenchError) and "\n" not in text
    assert f"{dest} exists and is not a zoo" in text and "move it away" in text and "Traceback" not in text
    assert sorted(p.name for p in dest.parent.iterdir()) == ["digits-mlp"]  # no temp folder, nothing touched
    assert (dest / "notes.txt").read_text() == "mine"


def test_zoo_get_never_leaves_its_temp_folder(canonical, hub_env, tmp_path, monkeypatch):
    """The folder appears while the zoo downloads (another process): one line, and the temp folder is gone."""
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    dest = tmp_path / "home" / "zoos" / "digits-mlp"
    download = gbhub.download_zoo

    def racing(*args, **kwargs):
        zoo = download(*args, **kwargs)
        dest.mkdir(parents=True)
        (dest / "notes.txt").write_text("mine")
        return zoo

    monkeypatch.setattr(gbhub, "download_zoo", racing)
    with pytest.raises(gb.GenbenchError, match=f"move {dest} away"):
        gbhub.get_zoo("digits-mlp", results=tmp_path / "none")
    assert sorted(p.name for p in dest.parent.iterdir()) == ["digits-mlp"]


def test_zoo_get_says_a_local_build_is_partial(canonical, hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    gb.build_zoo("digits-mlp", limit=2, progress=False)
    result = runner.invoke(app, ["zoo", "get", "digits-mlp"])
    text = str(result.exception)
    assert isinstance(result.exception, gb.GenbenchError), result.output
    assert "partial build of digits-mlp (2 of 24 models)" in text, text
    assert "finish it with `genbench zoo build digits-mlp`" in text and "move the folder away" in text


def test_a_repo_without_its_table_is_said_pushed_incompletely(hub, hub_env, digits_zoo, tmp_path):
    repo = "genbench/no-table"
    gbhub.push_zoo(with_data(digits_zoo.root, tmp_path / "zoo", None), repo, api=RecordingApi(hub))
    git(hub.repo_dir(repo), "rm", "-q", "models.parquet")
    git(hub.repo_dir(repo), "commit", "-q", "-m", "table lost")
    with pytest.raises(gb.GenbenchError) as err:
        gb.load_zoo(f"hf://{repo}")
    text = str(err.value)
    assert "has a zoo.json but no models.parquet: the zoo was pushed incompletely" in text
    assert "zoo build" not in text and "snapshots" not in text


def test_the_download_examples_pattern_matches_models_of_its_zoo():
    """The `zoo download --help` example's --models pattern selects models of the zoo it names ('w16_*' matched
    none of mnist1d-demogen)."""
    import fnmatch
    import re

    import typer

    from genbench.zoo.recipe import load_recipe
    epilog = typer.main.get_command(app).commands["zoo"].commands["download"].epilog
    m = re.search(r"genbench zoo download genbench/(\S+) --models '([^']+)'", epilog)
    assert m, epilog
    ids = [s.model_id for s in load_recipe(m.group(1)).expand()]
    assert fnmatch.filter(ids, m.group(2)), (m.group(2), ids[:3])
