"""A regular (non-editable) install ships the recipes as package data, so every named zoo can be built."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_regular_install_finds_every_recipe(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("genbench-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, cwd=tmp_path)
    code = ("import genbench, sys; from genbench.zoo import list_recipes, load_recipe; "
            "print(genbench.__file__); print(','.join(list_recipes())); "
            "r = load_recipe('digits-mlp'); print(r.name, len(r.expand()))")
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "GENBENCH_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env=env, capture_output=True,
                         text=True).stdout.splitlines()
    assert Path(out[0]).is_relative_to(target)  # the installed copy, not the repository
    shipped = sorted(p.stem for p in (REPO / "model_zoo").glob("*.yaml"))
    assert out[1].split(",") == shipped
    assert out[2].startswith("digits-mlp ") and int(out[2].split()[1]) > 0
