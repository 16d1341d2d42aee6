"""`genbench zoo get NAME`: the official copy of one of genbench's zoos, downloaded from its canonical Hub repo (the
loopback server of test_hub) when reachable, else built, and refused when its table hash is not the one the shipped
records cite."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from test_hub import REPO, RecordingApi, free_port, go_online, hub  # noqa: F401  (hub: the loopback server fixture)

import genbench as gb
from genbench.errors import GenbenchError
from genbench.fileio import sha256_file, write_json_atomic
from genbench.zoo import hub as gbhub
from genbench.zoo.storage import MANIFEST, TABLE


def _records(folder, name: str, table_sha256: str):
    """A folder of shipped records of zoo `name` whose zoo block cites `table_sha256` (only that block is read)."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "norm.params.json").write_text(json.dumps({"zoo": {"name": name, "table_sha256": table_sha256}}))
    return folder


@pytest.fixture
def fresh(monkeypatch, tmp_path, hub):  # noqa: F811
    """A machine that never built a zoo, talking to the loopback Hub through a fresh HF cache."""
    go_online(monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    return tmp_path


def test_get_downloads_the_canonical_zoo_the_records_cite(hub, digits_zoo, fresh):  # noqa: F811
    gbhub.push_zoo(digits_zoo.root, REPO, api=RecordingApi(hub))
    results = _records(fresh / "results", "digits-mlp", digits_zoo.table_sha256)
    zoo, how = gbhub.get_zoo("digits-mlp", results=results)
    assert how == "downloaded" and zoo.root == fresh / "home" / "zoos" / "digits-mlp"
    assert not any(p.is_symlink() for p in zoo.root.rglob("*"))  # an ordinary folder, not links into the HF cache
    assert zoo.table_sha256 == digits_zoo.table_sha256 and zoo.verify() == []
    assert gb.load_zoo("digits-mlp").table_sha256 == digits_zoo.table_sha256  # every command now opens it by name
    assert gbhub.get_zoo("digits-mlp", results=results)[1] == "present"


def test_get_refuses_a_tampered_upload(hub, digits_zoo, fresh, monkeypatch):  # noqa: F811
    monkeypatch.setattr(gbhub, "canonical_repo", lambda name: "genbench/tampered-digits")  # a repo of its own
    tampered = fresh / "tampered"
    shutil.copytree(digits_zoo.root, tampered)
    table = pd.read_parquet(tampered / TABLE)
    table.loc[0, "test_acc"] += 0.01  # one recorded accuracy changed, the manifest's file hash made to match
    table.to_parquet(tampered / TABLE, index=False)
    manifest = json.loads((tampered / MANIFEST).read_text())
    manifest["files"][TABLE] = sha256_file(tampered / TABLE)
    write_json_atomic(tampered / MANIFEST, manifest)
    assert gb.load_zoo(tampered).verify() == []  # consistent in itself: only the cited hash gives it away
    gbhub.push_zoo(tampered, "genbench/tampered-digits", api=RecordingApi(hub))
    results = _records(fresh / "results", "digits-mlp", digits_zoo.table_sha256)
    with pytest.raises(GenbenchError, match=r"table sha256 .* but the shipped records cite .*: refused"):
        gbhub.get_zoo("digits-mlp", results=results)
    assert not (fresh / "home" / "zoos" / "digits-mlp").exists()  # nothing installed


def test_get_builds_the_zoo_when_the_hub_is_unreachable(digits_zoo, fresh, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    results = _records(fresh / "results", "digits-mlp", digits_zoo.table_sha256)
    said = []
    zoo, how = gbhub.get_zoo("digits-mlp", results=results, progress=False, note=said.append)
    assert how == "built" and zoo.table_sha256 == digits_zoo.table_sha256
    assert len(said) == 1 and said[0].startswith("no download of genbench/digits-mlp (could not reach http://127.0.0.1:")
    assert said[0].endswith("digits-mlp is built here instead (it takes seconds)")  # why, and how long


def test_get_refuses_a_name_that_is_not_one_of_genbenchs_zoos(fresh):
    with pytest.raises(GenbenchError, match="'my-zoo' is not one of genbench's zoos"):
        gbhub.get_zoo("my-zoo")
