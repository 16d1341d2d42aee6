"""The command line starts fast: help, a misspelt command and the leaderboard on the shipped records import
neither torch nor scikit-learn, and help not even pandas (each run in a fresh interpreter, since this one has imported
them already)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "leaderboard" / "results"
# Runs the CLI's main once per argv in one fresh interpreter, then says which heavy modules it imported.
CHILD = """
import json, sys
from genbench.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["genbench", *argv]
    try:
        main()
        codes.append(0)
    except SystemExit as e:
        codes.append(e.code if isinstance(e.code, int) else 1)
print("\\n" + json.dumps({"codes": codes, "torch": "torch" in sys.modules, "sklearn": "sklearn" in sys.modules,
                  "pandas": "pandas" in sys.modules}))
"""


def run_cli(*argvs: list[str]) -> tuple[dict, subprocess.CompletedProcess]:
    """Run `genbench ARGV` for each argv in one fresh interpreter: (its report, the process)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([[str(a) for a in argv] for argv in argvs])],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


def command_paths() -> list[list[str]]:
    """Every command and sub-command of `genbench`, as the words that name it ([] for genbench itself)."""
    import typer.main

    from genbench.cli import app

    def walk(cmd, path: list[str]) -> list[list[str]]:
        return [path] + [p for name, sub in sorted(getattr(cmd, "commands", {}).items()) for p in walk(sub, [*path, name])]

    return walk(typer.main.get_command(app), [])


@pytest.mark.parametrize("argv, shows", [
    (["--help"], "leaderboard"),
    (["leaderboard", "run", "--help"], "--audit-zoo"),
    (["lederboard"], "Did you mean 'leaderboard'"),
    (["zoo", "biuld"], "Did you mean 'build'"),
], ids=["help", "subcommand-help", "misspelt", "misspelt-subcommand"])
def test_help_and_misspelt_commands_import_neither_torch_nor_sklearn_nor_pandas(argv, shows):
    report, proc = run_cli(argv)
    assert shows in proc.stdout + proc.stderr
    assert report["codes"] == [2 if shows.startswith("Did you") else 0]
    assert not report["torch"], f"genbench {' '.join(argv)} imported torch"
    assert not report["sklearn"], f"genbench {' '.join(argv)} imported scikit-learn"
    assert not report["pandas"], f"genbench {' '.join(argv)} imported pandas"


def test_every_commands_help_imports_neither_torch_nor_sklearn_nor_pandas():
    paths = command_paths()
    assert len(paths) > 15 and ["leaderboard", "push"] in paths and ["submit"] in paths
    report, _ = run_cli(*([*p, "--help"] for p in paths))
    assert report["codes"] == [0] * len(paths)
    assert not report["torch"] and not report["sklearn"] and not report["pandas"]


def test_leaderboard_on_the_shipped_records_imports_neither_torch_nor_sklearn():
    zoo = "mnist1d-demogen"
    assert (RESULTS / zoo).is_dir()
    report, proc = run_cli(["leaderboard", "--results", RESULTS, "--zoo", zoo],
                           *(["leaderboard", "--results", RESULTS, "--format", f] for f in ("markdown", "csv", "json")))
    assert report["codes"] == [0, 0, 0, 0], proc.stderr
    out = proc.stdout
    assert "margin.qrt_log" in out and "| mnist1d-demogen |" in out and "mnist1d-demogen,1," in out and '"entry":' in out
    assert not report["torch"], "the leaderboard imported torch"
    assert not report["sklearn"], "the leaderboard imported scikit-learn"
