"""The `genbench` command, and the CIFAR recipes run end to end on a tiny local image dataset."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.zoo.train import evaluate_model

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory):
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    rng = np.random.default_rng(0)
    feats = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b", "c"])})

    def split(n):
        imgs = [Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(n)]
        return datasets.Dataset.from_dict({"img": imgs, "label": list(rng.integers(0, 3, n))}, features=feats)

    path = tmp_path_factory.mktemp("tiny_cifar")
    datasets.DatasetDict({"train": split(24), "test": split(12)}).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("recipe", ["demogen-nin-cifar10", "demogen-resnet32-cifar10", "demogen-resnet32-cifar100"])
def test_cifar_recipes_build_two_models_on_local_images(recipe, tiny_images, tmp_path, home):
    out = tmp_path / recipe
    result = runner.invoke(app, ["zoo", "build", recipe, "--limit", "2", "--out", str(out),
                                 "--set", f"dataset.path={tiny_images}", "--set", "train.epochs=1",
                                 "--set", "train.batch_size=8"])
    assert result.exit_code == 0, result.output
    zoo = gb.load_zoo(out)
    assert len(zoo) == 2 and zoo.manifest["data_kind"] == "image"
    assert "dataset.safetensors" not in zoo.manifest["files"]  # image data is re-loaded through `datasets`
    for mid in zoo.model_ids:
        x, y = zoo.train_data(mid)
        assert x.shape == (24, 3, 8, 8)
        assert evaluate_model(zoo.load_model(mid), x, y)[0] == zoo.row(mid)["train_acc"]


def test_cli_zoo_list_info_verify(digits_zoo):
    result = runner.invoke(app, ["zoo", "list"])
    assert result.exit_code == 0 and "mnist1d-demogen" in result.output and "digits-mlp" in result.output
    result = runner.invoke(app, ["zoo", "info", "digits-mlp"])
    assert result.exit_code == 0 and "test accuracy" in result.output and "24 models" in result.output
    result = runner.invoke(app, ["zoo", "verify", "digits-mlp"])
    assert result.exit_code == 0 and "all 50 files match" in result.output


def test_module_entry_point_reports_user_errors_in_one_line(home):
    env = {**os.environ, "GENBENCH_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "genbench", "zoo", "build", "mnist1d-demogn"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert "error: unknown recipe 'mnist1d-demogn'. Did you mean 'mnist1d-demogen'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "genbench", "zoo", "build", "digits-mlp", "--set", "oops"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "--set takes KEY=VALUE" in proc.stderr


@pytest.mark.parametrize("width", [80, 200])
def test_measures_list_never_cuts_a_measure_name(monkeypatch, width):
    import genbench.cli as cli

    monkeypatch.setattr(cli.console, "width", width)
    out = CliRunner().invoke(app, ["measures", "list"])
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.output.splitlines()) <= width and "\u2026" not in out.output
    shown = {cell.strip() for line in out.output.splitlines() if line.startswith("\u2502")
             for cell in line.split("\u2502")[1:2]}
    assert set(gb.list_measures()) <= shown  # every name whole, in its own cell
