"""The Hub for real, offline: zoos pushed into and downloaded from a Hub-compatible server (olah) on loopback."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pandas as pd
import pytest
import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub.utils import filter_repo_objects
from typer.testing import CliRunner

import genbench as gb
from genbench.entries.publish import push_results
from genbench.zoo import hub as gbhub
from genbench.cli import app
from genbench.fileio import sha256_file

REPO = "genbench/digits-mlp"
runner = CliRunner()


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; return its stdout."""
    cmd = ["git", "-c", "user.name=genbench-test", "-c", "user.email=test@genbench.invalid",
           "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    url: str
    mirrors: Path

    def repo_dir(self, repo_id: str) -> Path:
        return self.mirrors / "datasets" / repo_id


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """An olah server on a free loopback port, serving the git repos under its mirrors folder, offline."""
    base = tmp_path_factory.mktemp("olah")
    mirrors = base / "mirrors"
    (mirrors / "datasets").mkdir(parents=True)
    port = free_port()
    config = base / "olah.toml"
    config.write_text(f'[basic]\nhost = "127.0.0.1"\nport = {port}\nrepos-path = "{base / "repos"}"\n'
                      f'mirrors-path = ["{mirrors}"]\n\n[accessibility]\noffline = true\n')
    log = base / "olah.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(config), "--log-path", str(base / "logs")],
                                cwd=base, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"olah exited with status {proc.returncode}:\n{log.read_text()}")
            try:
                urllib.request.urlopen(f"{url}/api/datasets/none/none/revision/main", timeout=2)
                break
            except urllib.error.HTTPError:
                break  # it answers (401/404 for a repo it does not hold)
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"olah did not answer on {url} within 60 s:\n{log.read_text()}")
                time.sleep(0.2)
        yield Hub(url, mirrors)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RecordingApi:
    """Stands in for HfApi (olah has no upload API): records every call and commits what upload_folder
    would send into the loopback server's git mirror, so that the pushed repo can be downloaded for real."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self.calls: list[tuple[str, dict]] = []
        self.uploaded: dict[str, list[str]] = {}

    def __call__(self, **kwargs) -> "RecordingApi":  # used as the HfApi class: HfApi(endpoint=...)
        self.calls.append(("HfApi", kwargs))
        return self

    def create_repo(self, repo_id: str, **kwargs) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        repo = self.hub.repo_dir(repo_id)
        if not repo.exists():
            repo.mkdir(parents=True)
            git(repo, "init", "-q", "-b", "main")
        return f"{self.hub.url}/datasets/{repo_id}"

    def _commit(self, kwargs: dict) -> str:
        folder = Path(kwargs["folder_path"])
        local = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        files = list(filter_repo_objects(local, allow_patterns=kwargs.get("allow_patterns"),
                                         ignore_patterns=kwargs.get("ignore_patterns")))
        repo = self.hub.repo_dir(kwargs["repo_id"])
        if kwargs.get("delete_patterns"):  # as huggingface_hub: remote files not uploaded, .gitattributes kept
            old = filter_repo_objects(self._files(repo), allow_patterns=kwargs["delete_patterns"])
            self._delete(repo, [f for f in old if f not in files and f != ".gitattributes"])
        for rel in files:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / rel, repo / rel)
        self.uploaded[kwargs["repo_id"]] = files
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", kwargs.get("commit_message") or "upload")
        return git(repo, "rev-parse", "HEAD")

    @staticmethod
    def _files(repo: Path) -> list[str]:
        return git(repo, "ls-files").splitlines()

    @staticmethod
    def _delete(repo: Path, rels: list[str]) -> None:
        for rel in rels:
            (repo / rel).unlink()

    def list_repo_files(self, repo_id: str, **kwargs) -> list[str]:
        self.calls.append(("list_repo_files", {"repo_id": repo_id, **kwargs}))
        return self._files(self.hub.repo_dir(repo_id))

    def delete_files(self, repo_id: str, *, delete_patterns: list[str], **kwargs) -> None:
        self.calls.append(("delete_files", {"repo_id": repo_id, "delete_patterns": delete_patterns, **kwargs}))
        repo = self.hub.repo_dir(repo_id)
        self._delete(repo, list(filter_repo_objects(self._files(repo), allow_patterns=delete_patterns)))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", kwargs.get("commit_message") or "delete")

    def upload_folder(self, **kwargs) -> SimpleNamespace:
        self.calls.append(("upload_folder", kwargs))
        return SimpleNamespace(oid=self._commit(kwargs))

    def upload_large_folder(self, **kwargs) -> None:
        self.calls.append(("upload_large_folder", kwargs))
        self._commit(kwargs)

    def create_tag(self, repo_id: str, *, tag: str, revision: str, repo_type: str, exist_ok: bool) -> None:
        self.calls.append(("create_tag", {"repo_id": repo_id, "tag": tag, "revision": revision,
                                          "repo_type": repo_type, "exist_ok": exist_ok}))
        git(self.hub.repo_dir(repo_id), "tag", "-f", tag, revision)


def zoo_files(zoo) -> list[str]:
    """Every file a zoo is made of, as pushed."""
    meta = [f for f in ("zoo.json", "models.parquet", "README.md", "dataset.safetensors") if (zoo.root / f).is_file()]
    return meta + [p for pair in zip(zoo.table["checkpoint"], zoo.table["init_checkpoint"]) for p in pair]


@pytest.fixture(scope="module")
def published(hub, digits_zoo):
    """The digits zoo pushed through the recording fake into the loopback Hub: (fake, pushed)."""
    api = RecordingApi(hub)
    pushed = gbhub.push_zoo(digits_zoo.root, REPO, api=api)
    return api, pushed


def go_online(monkeypatch) -> None:
    """Undo HF_HUB_OFFLINE, which other test modules set for the whole session (huggingface_hub reads it
    once, at import)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub_env(hub, monkeypatch, tmp_path):
    """HF_ENDPOINT pointing at the loopback server, a fresh HF cache, online."""
    go_online(monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"


def test_zoo_round_trips_through_the_loopback_hub(published, hub, hub_env, digits_zoo, tmp_path):
    api, pushed = published
    files = zoo_files(digits_zoo)
    assert len(files) == 4 + 2 * len(digits_zoo)
    # the exact calls of the publish path
    assert api.calls[0] == ("create_repo", {"repo_id": REPO, "repo_type": "dataset", "private": False, "exist_ok": True})
    name, upload = api.calls[1]
    assert name == "upload_folder" and len(api.calls) == 3
    assert upload["repo_id"] == REPO and upload["repo_type"] == "dataset"
    assert upload["folder_path"] == str(digits_zoo.root) and "digits-mlp" in upload["commit_message"]
    assert sorted(api.uploaded[REPO]) == sorted(files)  # exactly the zoo's files, nothing else of the folder
    head = git(hub.repo_dir(REPO), "rev-parse", "HEAD")
    assert pushed.commit == head and pushed.files == files
    tag = "table-" + digits_zoo.table_sha256[:16]  # the zoo's content hash names its commit
    assert api.calls[2] == ("create_tag", {"repo_id": REPO, "tag": tag, "revision": head, "repo_type": "dataset",
                                           "exist_ok": True})
    assert pushed.tag == tag and gb.load_zoo(f"hf://{REPO}", revision=tag).revision == head

    result = runner.invoke(app, ["zoo", "download", REPO])
    assert result.exit_code == 0, result.output
    assert head in result.output and "24 models" in result.output
    zoo = gb.load_zoo(f"hf://{REPO}")
    assert zoo.revision == head and zoo.repo_id == REPO and zoo.missing_models == []
    assert zoo.root.is_relative_to(hub_env) and zoo.root.name == head  # the standard HF cache layout
    pd.testing.assert_frame_equal(zoo.table, digits_zoo.table)
    assert zoo.manifest == digits_zoo.manifest
    for rel in files:
        assert sha256_file(zoo.root / rel) == sha256_file(digits_zoo.root / rel), rel
    mid = digits_zoo.model_ids[7]
    for a, b in zip(zoo.load_model(mid).state_dict().values(), digits_zoo.load_model(mid).state_dict().values()):
        assert torch.equal(a, b)
    assert gb.load_zoo(f"hf://{REPO}", revision=head).revision == head

    values = gb.evaluate("norm.params", zoo, cache=tmp_path / "c", progress=False)
    local = gb.evaluate("norm.params", digits_zoo, cache=tmp_path / "c", progress=False)
    pd.testing.assert_frame_equal(values, local)
    assert values.attrs["zoo_revision"] == head and values.attrs["zoo_repo"] == REPO
    assert local.attrs["zoo_revision"] is None

    # the dataset card's front matter makes the table open with `datasets` (through the same server)
    code = ("import datasets, json; ds = datasets.load_dataset(%r, revision='main', split='train'); "
            "print(json.dumps(list(ds['model_id'])))" % REPO)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_CACHE=str(tmp_path / "ds-hub"),
               HF_DATASETS_CACHE=str(tmp_path / "ds-cache"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == digits_zoo.model_ids


def test_a_record_made_on_a_hub_zoo_is_verified_from_the_hub(published, hub_env, tmp_path):
    """Issue 18: a record made from an hf:// zoo names its repository and commit, and verify downloads that commit
    (before, it passed the revision with the bare zoo name, which load_zoo refuses)."""
    from genbench.entries.run import run_entry
    from genbench.record import Record, write_record
    from genbench.entries.verify import verify_record
    _, pushed = published
    zoo = gb.load_zoo(f"hf://{REPO}")
    rec = Record(run_entry("norm.params", zoo, audit_zoo=None, n_boot=50, cache=False))
    assert rec.zoo["repo"] == REPO and rec.zoo_revision == pushed.commit
    assert rec.zoo_source() == (f"hf://{REPO}", pushed.commit)
    path = write_record(rec, tmp_path / "results")
    shutil.rmtree(hub_env)  # nothing local: verify must fetch the recorded commit again
    v = verify_record(path)
    assert v.ok, (v.problems, v.differences[:3])
    assert any(p.name == pushed.commit for p in hub_env.rglob("*") if p.is_dir())
    planted = json.loads(path.read_text())
    planted["scores"]["values"]["kfold_r2"] += 0.1
    path.write_text(json.dumps(planted))
    assert [d[0] for d in verify_record(path).differences] == ["scores.values.kfold_r2"]


def test_a_record_on_a_local_build_is_verified_against_the_canonical_zoo_found_by_its_hash(
        published, hub_env, digits_zoo, tmp_path, monkeypatch):
    """Issue 15 item 6: a record made on a local build cites the zoo's table hash; a machine without that build (or
    with a build that differs) verifies it against the canonical copy on the Hub, found by the hash's tag."""
    from genbench.entries.run import run_entry
    from genbench.record import Record, write_record
    from genbench.entries.verify import verify_record
    _, pushed = published
    rec = Record(run_entry("norm.params", digits_zoo, audit_zoo=None, n_boot=50, cache=False))
    assert rec.zoo_source() == ("digits-mlp", None) and rec.table_sha256 == digits_zoo.table_sha256
    path = write_record(rec, tmp_path / "results")
    other = tmp_path / "other-home"  # a machine that never built digits-mlp
    monkeypatch.setenv("GENBENCH_HOME", str(other))
    v = verify_record(path)
    assert v.ok, (v.problems, v.differences[:3])
    assert any(p.name == pushed.commit for p in hub_env.rglob("*") if p.is_dir())  # fetched by the tag
    # a local rebuild that differs (one gap changed: a different CPU's floating point) is not trusted; the Hub is
    local = other / "zoos" / "digits-mlp"
    shutil.copytree(digits_zoo.root, local)
    table = pd.read_parquet(local / "models.parquet")
    table.loc[0, "gap"] += 0.001
    table.to_parquet(local / "models.parquet")
    manifest = json.loads((local / "zoo.json").read_text())
    manifest["files"]["models.parquet"] = sha256_file(local / "models.parquet")
    (local / "zoo.json").write_text(json.dumps(manifest))
    assert gb.load_zoo("digits-mlp").table_sha256 != rec.table_sha256
    assert verify_record(path).ok
    # without the canonical copy (not in the HF cache, the Hub unreachable): one clear sentence saying what differs
    # and how to get the cited zoo
    shutil.rmtree(hub_env)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    v = verify_record(path)
    assert not v.ok and len(v.problems) == 1
    why = v.problems[0]
    assert why.startswith("your zoo digits-mlp differs from the one this record cites")
    assert f"genbench zoo download {REPO} --revision table-{rec.table_sha256[:16]}" in why
    assert gb.load_zoo("digits-mlp").table_sha256[:12] in why and "--zoo" in why
    # a copy named explicitly is used when its hash matches, and refused when it does not
    assert verify_record(path, zoo=digits_zoo.root).ok
    assert "differs" in verify_record(path, zoo=local).problems[0]


def test_partial_download_holds_only_the_chosen_models(published, hub_env, digits_zoo, tmp_path):
    wanted = [m for m in digits_zoo.model_ids if m.startswith("w16_bn0_")] + ["w32_bn1_ln0.3_s2"]
    result = runner.invoke(app, ["zoo", "download", REPO, "--models", "w16_bn0_*", "--models", "w32_bn1_ln0.3_s2"])
    assert result.exit_code == 0, result.output
    assert f"{len(wanted)} models" in result.output and f"not downloaded: {24 - len(wanted)} models" in result.output
    zoo = gb.load_zoo(f"hf://{REPO}", models=["w16_bn0_*", "w32_bn1_ln0.3_s2"])
    assert zoo.model_ids == wanted
    assert zoo.missing_models == [m for m in digits_zoo.model_ids if m not in wanted]
    on_disk = sorted(p.name for p in (zoo.root / "checkpoints").iterdir())
    assert on_disk == sorted(f"{m}{ext}" for m in wanted for ext in (".safetensors", ".init.safetensors"))
    expected = digits_zoo.table[digits_zoo.table["model_id"].isin(wanted)].reset_index(drop=True)
    pd.testing.assert_frame_equal(zoo.table, expected)
    assert "missing_models=" in repr(zoo) and zoo.verify() == []
    values = gb.evaluate("norm.params", zoo, cache=tmp_path / "c", progress=False)
    assert list(values["model_id"]) == wanted and values["norm.params:error"].isna().all()
    with pytest.raises(gb.GenbenchError, match="no model of zoo 'digits-mlp' matches 'w99_\\*'"):
        gb.load_zoo(f"hf://{REPO}", models="w99_*")
    with pytest.raises(gb.GenbenchError, match="Did you mean"):
        gb.load_zoo(f"hf://{REPO}", models="w16_bn0_ln0.0_s9")


def test_a_corrupted_file_on_the_server_is_named_and_nothing_is_deleted(published, hub, hub_env, digits_zoo):
    good = gb.load_zoo(f"hf://{REPO}")
    mid = digits_zoo.model_ids[3]
    rel = f"checkpoints/{mid}.safetensors"
    repo = hub.repo_dir(REPO)
    git(repo, "checkout", "-q", "-b", "corrupt")
    try:
        data = bytearray((repo / rel).read_bytes())
        data[-1] ^= 0xFF  # one flipped bit pattern in the last weight: still a valid safetensors file
        (repo / rel).write_bytes(bytes(data))
        git(repo, "commit", "-q", "-am", "bit rot")
        bad_commit = git(repo, "rev-parse", "HEAD")
    finally:
        git(repo, "checkout", "-q", "main")
    with pytest.raises(gb.GenbenchError) as err:
        gb.load_zoo(f"hf://{REPO}", revision="corrupt")
    msg = str(err.value)
    expected, actual = digits_zoo.row(mid)["checkpoint_sha256"], hashlib.sha256(bytes(data)).hexdigest()
    assert f"{rel} is corrupted: expected sha256 {expected}, got {actual}" in msg
    assert f"genbench zoo download {REPO} --revision {bad_commit} --force" in msg and "nothing was deleted" in msg
    result = runner.invoke(app, ["zoo", "download", REPO, "--revision", "corrupt"])
    assert result.exit_code != 0 and rel in str(result.exception)
    # the good snapshot is untouched, the bad file is kept for inspection
    assert good.verify() == [] and len(gb.load_zoo(f"hf://{REPO}", revision=good.revision)) == 24
    assert (hub_env / "datasets--genbench--digits-mlp" / "snapshots" / bad_commit / rel).is_file()


def test_offline_mode_reads_the_hf_cache_only(published, hub_env, monkeypatch):
    online = gb.load_zoo(f"hf://{REPO}", models="w16_bn0_ln0.0_s0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    offline = gb.load_zoo(f"hf://{REPO}", models="w16_bn0_ln0.0_s0")
    assert offline.revision == online.revision and offline.model_ids == ["w16_bn0_ln0.0_s0"]
    with pytest.raises(gb.GenbenchError, match="HF_HUB_OFFLINE is set"):
        gb.load_zoo(f"hf://{REPO}", models="w32_*")


def test_bad_hub_input_is_named(published, hub_env, digits_zoo):
    with pytest.raises(gb.GenbenchError, match="is not a Hub dataset repo"):
        gb.load_zoo("hf://just-a-name")
    with pytest.raises(gb.GenbenchError, match="no dataset repo genbench/nope with revision 'main'"):
        gb.load_zoo("hf://genbench/nope")
    with pytest.raises(gb.GenbenchError, match="write hf://genbench/digits-mlp"):
        gb.load_zoo(REPO)
    with pytest.raises(gb.GenbenchError, match="apply to zoos on the Hub"):
        gb.load_zoo(digits_zoo.root, revision="main")
    result = runner.invoke(app, ["zoo", "download", "genbench/nope"])
    assert result.exit_code != 0 and "no dataset repo genbench/nope" in str(result.exception)


def test_an_unreachable_hub_is_said_in_one_line(published, hub_env, monkeypatch):
    """Online, with nothing listening at HF_ENDPOINT and the repo not cached: one line that names the server and
    the way out (huggingface_hub's own message is three lines about the internet connection)."""
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    with pytest.raises(gb.GenbenchError) as err:
        gb.load_zoo(f"hf://{REPO}", models="w16_bn0_ln0.0_s0")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"could not reach {dead} to download {REPO}")
    assert "HF_HUB_OFFLINE=1" in text


@pytest.fixture
def fake_hfapi(hub, monkeypatch):
    """HfApi replaced by the recording fake, as the CLI would construct it."""
    api = RecordingApi(hub)
    go_online(monkeypatch)
    monkeypatch.setattr(huggingface_hub, "HfApi", api)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    return api


def test_push_checks_the_zoo_and_its_card(fake_hfapi, digits_zoo, hub, tmp_path, monkeypatch):
    copy = tmp_path / "zoo"
    shutil.copytree(digits_zoo.root, copy)
    (copy / "README.md").unlink()
    result = runner.invoke(app, ["zoo", "push", str(copy), "genbench/digits-copy", "--private"])
    assert result.exit_code == 0, result.output
    head = git(hub.repo_dir("genbench/digits-copy"), "rev-parse", "HEAD")
    assert head in result.output
    assert fake_hfapi.calls[0] == ("HfApi", {"endpoint": hub.url, "library_name": "genbench",
                                             "library_version": gb.__version__})
    assert fake_hfapi.calls[1] == ("create_repo", {"repo_id": "genbench/digits-copy", "repo_type": "dataset",
                                                   "private": True, "exist_ok": True})
    card = (copy / "README.md").read_text()  # a missing card is written, with the table as default config
    assert gbhub.card_has_table_config(card) and "README.md" in fake_hfapi.uploaded["genbench/digits-copy"]
    assert 'gb.load_zoo("hf://genbench/digits-copy")' in card  # the snippet loads it from where it now lives

    (copy / "README.md").write_text("# my zoo\nno front matter\n")
    with pytest.raises(gb.GenbenchError, match="no YAML front matter making models.parquet the default config"):
        gbhub.push_zoo(copy, "genbench/digits-copy", api=fake_hfapi)
    (copy / "README.md").write_text(card)
    ckpt = copy / digits_zoo.row(digits_zoo.model_ids[0])["checkpoint"]
    ckpt.write_bytes(ckpt.read_bytes()[:-1] + b"\0")
    calls = len(fake_hfapi.calls)
    with pytest.raises(gb.GenbenchError, match="fails verification, so it is not pushed"):
        gbhub.push_zoo(copy, "genbench/digits-copy", api=fake_hfapi)
    assert len(fake_hfapi.calls) == calls  # nothing was sent
    with pytest.raises(gb.GenbenchError, match="already on the Hub"):
        gbhub.push_zoo(f"hf://{REPO}", "genbench/x", api=fake_hfapi)


def test_big_zoos_go_through_upload_large_folder(fake_hfapi, digits_zoo, monkeypatch):
    monkeypatch.setattr(gbhub, "LARGE_UPLOAD_FILES", 10)
    pushed = gbhub.push_zoo(digits_zoo.root, "genbench/digits-large", api=fake_hfapi)
    name, kwargs = next(c for c in fake_hfapi.calls[::-1] if c[0] == "upload_large_folder")
    assert pushed.commit is None
    assert fake_hfapi.calls[-1][1]["revision"] == "main" and pushed.tag == fake_hfapi.calls[-1][1]["tag"]
    assert kwargs["repo_type"] == "dataset" and kwargs["private"] is False
    assert sorted(fake_hfapi.uploaded["genbench/digits-large"]) == sorted(zoo_files(digits_zoo))


def test_leaderboard_push_uploads_the_result_records(fake_hfapi, hub, tmp_path):
    results = tmp_path / "results"
    (results / "digits-mlp").mkdir(parents=True)
    (results / ".drafts").mkdir()
    records = {"digits-mlp/margin.json": {"measure": "margin.qrt_log", "kfold_r2": 0.5},
               "digits-mlp/norm.json": {"measure": "norm.params", "kfold_r2": 0.1}}
    for rel, rec in records.items():
        (results / rel).write_text(json.dumps(rec))
    (results / "digits-mlp" / "notes.txt").write_text("not a record")
    (results / ".drafts" / "wip.json").write_text("{")
    result = runner.invoke(app, ["leaderboard", "push", str(results), "genbench/leaderboard"])
    assert result.exit_code == 0, result.output
    assert fake_hfapi.calls[1] == ("create_repo", {"repo_id": "genbench/leaderboard", "repo_type": "dataset",
                                                   "private": False, "exist_ok": True})
    name, kwargs = fake_hfapi.calls[2]
    assert name == "upload_folder" and kwargs["folder_path"] == str(results) and kwargs["repo_type"] == "dataset"
    assert sorted(fake_hfapi.uploaded["genbench/leaderboard"]) == sorted(records)
    # and they download back byte for byte from the loopback Hub
    path = Path(huggingface_hub.snapshot_download("genbench/leaderboard", repo_type="dataset", revision="main",
                                                  endpoint=hub.url, cache_dir=str(tmp_path / "hf")))
    assert {rel: json.loads((path / rel).read_text()) for rel in records} == records

    (results / "digits-mlp" / "broken.json").write_text("{not json")
    with pytest.raises(gb.GenbenchError, match="broken.json is not valid JSON"):
        push_results(results, "genbench/leaderboard", api=fake_hfapi)
    (tmp_path / "empty").mkdir()
    with pytest.raises(gb.GenbenchError, match="holds no result records"):
        push_results(tmp_path / "empty", "genbench/x", api=fake_hfapi)
