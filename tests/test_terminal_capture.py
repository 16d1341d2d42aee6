"""The leaderboard as a person sees it in a real terminal: `genbench leaderboard` run inside tmux at 80 and 200
columns, the pane captured; every entry's name, its k-fold R^2 and its interval whole, nothing past the edge, the
zoo's verdict first. tmux is installed by .ci/run; with CI set a missing tmux fails the test instead of skipping."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from genbench.leaderboard.export import entry_name
from genbench.record import write_record
from site_records import BIG_ZOO, make_many_records


def _tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail("tmux is missing: .ci/run installs it (apt-get install tmux)")
        pytest.skip("tmux is not installed")
    return path


def capture(command: list[str], width: int, env: dict[str, str], height: int = 200) -> str:
    """What `command` leaves in a tmux pane `width` columns wide (the whole pane and its history)."""
    tmux, sock = _tmux(), f"genbench-test-{uuid.uuid4().hex[:8]}"
    signal = f"done-{sock}"
    shell = " ".join(map(_quote, command)) + f"; tmux -L {sock} wait-for -S {signal}; sleep 60"
    base = [tmux, "-L", sock, "-f", "/dev/null"]
    try:
        subprocess.run([*base, "new-session", "-d", "-x", str(width), "-y", str(height), "-s", "t", shell],
                       check=True, env=env, timeout=30)
        subprocess.run([*base, "wait-for", signal], check=True, timeout=120)
        out = subprocess.run([*base, "capture-pane", "-p", "-S", "-", "-E", "-", "-t", "t"], check=True,
                             capture_output=True, text=True, timeout=30)
        return out.stdout
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=30)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("results")
    recs = make_many_records()
    recs[3]["scores"]["direction"] = {"claim": "larger_gap", "slope": -1.0, "tau": -1.0, "against": True}
    for r in recs:
        write_record(r, root)
    return root, recs


@pytest.mark.parametrize("width", [68, 80, 200])
def test_a_tmux_capture_of_the_leaderboard_cuts_no_name_and_no_interval(records, tmp_path, width):
    root, recs = records
    env = {**os.environ, "GENBENCH_HOME": str(tmp_path / "home"), "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)  # the width is the pane's
    text = capture([sys.executable, "-m", "genbench", "leaderboard", "--results", str(root)], width, env)
    lines = text.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= width
    assert " ".join(text.split()).startswith(f"{BIG_ZOO} (not an official zoo): ")  # the verdict first
    rows = {}
    for line in lines:
        cells = line.split()
        if len(cells) > 3 and (cells[0].isdigit() or cells[0] == "base") and cells[1].isdigit():
            rows[cells[2]] = line
    shown = {entry_name(r) for r in recs if r["name"] != "norm.fro_sum_copy"}  # the alias is folded in
    assert set(rows) == shown, set(rows) ^ shown  # every entry on a row of its own, its name whole
    for r in recs:
        name = entry_name(r)
        if name in rows:
            kf, (lo, hi) = r["scores"]["values"]["kfold_r2"], r["scores"]["intervals"]["kfold_r2"]
            assert f"{kf:.2f} [{_end(lo)}, {_end(hi)}]" in rows[name], (name, rows[name])
    verdicts = {r["audit"]["verdict"] for r in recs if r.get("audit")}
    labels = set(re.findall(r"[a-z][a-z-]*[a-z]", " ".join(verdicts))) | {"not", "audited"}
    assert labels >= {"fragile-value", "fragile-trend", "robust", "inconclusive"}
    words = set(re.findall(r"[a-z][a-z-]*[a-z]", text))
    cut = {w for w in words - labels - {"in", "no", "audit"} if any(label.startswith(w) for label in labels)}
    assert not cut, cut  # every fragility label whole (or its column dropped, as the caption says)
    against = entry_name(recs[3])
    after = {name: row.split(name, 1)[1].lstrip(" *")[:1] for name, row in rows.items()}  # the marks after it
    assert [name for name, mark in after.items() if mark == "!"] == [against]
    assert "after an entry's name: against its claim" in " ".join(text.split())
    if width == 200:  # citations do not wrap row by row: one zoo's table stays under 80 lines
        table = [line for line in lines if line.strip()]
        top = next(i for i, line in enumerate(table) if line.split()[:3] == ["rank", "group", "entry"])
        end = max(i for i, line in enumerate(table) if line in rows.values())  # the last row's first line
        assert end - top < 80, end - top
        assert "Jiang et al. 2020" in text and "Fantastic generalization measures" not in text  # the short form


def _end(x: float) -> str:
    """An interval's end as the table prints it: 2 decimals, or the first that shows the sign of a number that is
    not 0 but would print as 0.00."""
    for decimals in range(2, 16):
        if x == 0 or float(f"{x:.{decimals}f}") != 0:
            return f"{x:.{decimals}f}"
    return f"{x:.15f}"
