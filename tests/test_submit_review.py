"""genbench submit, as a reviewer broke it: what the ranking after the records cannot do is one yellow line (with
each flag of its fix given once), a measure's odd return values are the same per-model errors in the sandbox as in
process, a later zoo's crash keeps the records of the zoos that finished, and a folder named like a shipped
submission is refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from genbench.errors import GenbenchError


def test_a_ranking_that_cannot_pair_is_one_yellow_line_whose_fix_gives_n_boot_once(monkeypatch, tmp_path):
    import genbench.cli as cli
    from genbench.cli import submit as submit_cli
    from genbench.leaderboard import standings
    from genbench.record import Record

    mine = Record({"name": "my_measure", "zoo": {"name": "z"}, "submission": {"path": "x"},
                   "provenance": {"command": "genbench submit x --zoo z --no-audit --n-boot 200 --budget-s 3"}})
    message = (f"cannot pair the records of 'z': they were made with different bootstrap settings; regenerate the odd "
               f"ones with the same settings ({standings._commands([mine], ' --n-boot 1000')}, seed 0)")
    assert message.count("--n-boot") == 1  # the record's own --n-boot 200 is not repeated before the fix's

    def refuse(records):
        raise GenbenchError(message)

    monkeypatch.setattr(standings, "rank_records", refuse)
    with cli.console.capture() as out:
        assert submit_cli._ranked_beside_the_shipped(tmp_path) == []
    line = " ".join(out.get().split())
    assert line.startswith("cannot rank the new records beside the others: cannot pair the records of 'z'"), line
    assert "(`genbench submit x --zoo z --no-audit --budget-s 3 --n-boot 1000`, seed 0)" in line, line


# ---------------------------------------------------------------- a value the harness refuses, in the sandbox


class _ZooModel:
    """The worker's view of one model (worker.JobModel's methods), read from a built zoo."""

    def __init__(self, zoo, model_id: str):
        self.zoo, self.model_id = zoo, model_id

    def load_model(self, *, init: bool = False, device: str = "cpu"):
        return self.zoo.load_model(self.model_id, init=init, device=device)

    def training_set(self):
        return None


@pytest.mark.parametrize("returned", ["312.08", b"1.5", True, np.bool_(False), np.array([True]), None, 10 ** 400,
                                      object(), [1.0, 2.0], float("nan"), 2.5, 7, ["1.2"], [True], [1.0, None], [True, 2.0],
                                      torch.tensor([1 + 2j])],
                         ids=lambda v: repr(v)[:12])
def test_the_worker_refuses_a_value_as_the_harness_does(digits_zoo, returned):
    """Each value the measure returns is the same per-model entry through the sandbox's worker, channel and executor
    as gb.evaluate's run_measure makes in process (a string, a boolean, None: refused; 10**400: OverflowError)."""
    from genbench.entries.submit import worker
    from genbench.entries.submit.events import check_outcome
    from genbench.entries.submit.executor import entry_of
    from genbench.harness.evaluate import make_context, run_measure
    from genbench.measures.registry import Measure

    m = Measure(name="t.odd", fn=lambda ctx: returned, kind="scalar", needs=(), citation="", version=1,
                higher_means=None)
    where = _ZooModel(digits_zoo, digits_zoo.model_ids[0])
    out = worker.call(m, where, {"alpha": None, "seed": 0, "budget_s": 30}, "cpu")
    got = entry_of(m, check_outcome({"task": 0, **out}), 30)
    ctx = make_context(m, model=where.load_model(), train=None, init_model=None, memo={}, budget_s=30)
    expected = run_measure(m, ctx)
    assert (got["value"], got["error"]) == (expected["value"], expected["error"]), (got, expected)
    if isinstance(returned, (str, bytes, bool, np.bool_, np.ndarray)) or returned is None:
        assert got["error"].startswith("returned a string" if isinstance(returned, (str, bytes)) else
                                       "returned None" if returned is None else "returned a boolean"), got
    if isinstance(returned, list) and not all(isinstance(v, float) for v in returned):  # np.asarray read them
        assert got["error"] == ("returned a list holding strings, booleans or None; a measure must return a finite "
                                "number or array"), got
    if isinstance(returned, torch.Tensor):  # the imaginary part was dropped with only numpy's warning
        assert got["error"] == "returned complex numbers; a measure must return a finite real number or array", got
    if isinstance(returned, int) and returned > 10 ** 300:
        assert got["error"] == "OverflowError: int too large to convert to float"


def test_an_int_too_large_for_a_float_is_each_models_error_and_the_worker_goes_on(tmp_path, digits_zoo):
    from genbench.entries.submit import submit
    from genbench.entries.submit.sandbox import sandbox_problem

    folder = tmp_path / "bigint"
    folder.mkdir()
    (folder / "measure.py").write_text('import genbench as gb\n\n\n@gb.register_measure("t.bigint", kind="scalar")\n'
                                       'def f(ctx):\n    return 10 ** sum(p.numel() for p in ctx.model.parameters())\n')
    (folder / "submission.yaml").write_text('title: t\nauthors: ["A. Author"]\ncontact: a@example.org\n'
                                            'paper_url: null\nlicence: MIT\nentry: t.bigint\n')
    (path,) = submit(folder, ["digits-mlp"], results_root=tmp_path / "r", audit_zoo=None, n_boot=20, budget_s=30,
                     device="cpu", unsandboxed=sandbox_problem() is not None)
    failure = json.loads(path.read_text())["failure"]
    assert failure == ("failed the conformance suite: runs, finite, right kind of output: OverflowError: int too "
                       "large to convert to float (on all 2 models checked)"), failure


# ---------------------------------------------------------------- a later zoo's failure keeps the earlier records


def test_a_hang_on_a_later_zoo_keeps_the_records_of_the_zoos_that_finished(tmp_path, digits_zoo, nin_zoo,
                                                                         monkeypatch):
    """The worker is killed on the second zoo: the first zoo's record is written as it finished and stays ok (the
    second zoo's failure used to replace it); only the zoo in progress gets the failure record."""
    from genbench.entries.submit import submit, supervise
    from genbench.entries.submit.sandbox import sandbox_problem

    monkeypatch.setattr(supervise, "HANG_GRACE_S", 1.0)
    folder = tmp_path / "convhang"
    folder.mkdir()
    (folder / "measure.py").write_text(
        "import time\nimport torch\nimport genbench as gb\n\n\n"
        '@gb.register_measure("t.convhang", kind="scalar")\n'
        "def f(ctx):\n"
        "    if any(isinstance(m, torch.nn.Conv1d) for m in ctx.model.modules()):\n"
        "        time.sleep(3600)\n"
        "    return float(sum(p.abs().sum() for p in ctx.model.parameters()))\n")
    (folder / "submission.yaml").write_text('title: t\nauthors: ["A. Author"]\ncontact: a@example.org\n'
                                            'paper_url: null\nlicence: MIT\nentry: t.convhang\n')
    written: list[Path] = []
    paths = submit(folder, ["digits-mlp", "digits-nin"], results_root=tmp_path / "r", audit_zoo=None, n_boot=20,
                   budget_s=1, device="cpu", unsandboxed=sandbox_problem() is not None,
                   echo=lambda text, kind: written.append(text) if "record written" in text else None)
    assert paths == [tmp_path / "r" / "digits-mlp" / "convhang.json", tmp_path / "r" / "digits-nin" / "convhang.json"]
    first, second = (json.loads(p.read_text()) for p in paths)
    assert first["status"] == "ok", first["failure"]
    assert second["status"] == "failed" and second["failure"].startswith("hung: one call of t.convhang"), second
    assert second["failure"].endswith("the worker was killed: call ctx.check_time() in the measure's long loops, or "
                                      "pass a larger --budget-s")  # the fix, beside the budget it names
    assert written == [f"[digits-mlp] record written: {paths[0]}"]  # as it finished, before the second zoo


def test_an_interrupted_submit_says_what_it_keeps_and_that_a_rerun_scores_every_zoo_again(tmp_path, digits_zoo,
                                                                                          monkeypatch, capsys):
    """Through the command's entry point, as a shell runs it: submit's own line, and not the general one, which says
    a rerun goes on (a submit scores every zoo again)."""
    import sys

    import genbench.cli as cli
    import genbench.entries.submit as entries_submit

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(entries_submit, "submit", interrupted)
    template = Path(__file__).resolve().parents[1] / "submissions" / "_template"
    monkeypatch.setattr(sys, "argv", ["genbench", "submit", str(template), "--zoo", "digits-mlp", "--results",
                                      str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 130
    flat = " ".join(capsys.readouterr().err.split())
    assert "submit interrupted: each zoo with a 'record written' line above keeps its record" in flat, flat
    assert "run the command again (it scores every zoo again), or with --zoo naming only the zoos left" in flat
    assert "to go on" not in flat and flat.count("interrupted") == 1


# ---------------------------------------------------------------- a folder named like a shipped submission


def test_a_folder_named_like_a_shipped_submission_with_another_entry_is_refused(tmp_path, digits_zoo, monkeypatch):
    """Records are filed under the folder's name: a copy of gradient_noise_scale/ with an entry of its own would
    hide the shipped entry in the leaderboard (and `leaderboard add` would overwrite its verified record)."""
    import shutil

    from genbench.entries.submit import api, submit

    repo = Path(__file__).resolve().parents[1]
    shipped = sorted((repo / "leaderboard" / "results").glob("*/gradient_noise_scale.json"))
    assert shipped, "the shipped record this test plants a clash with"
    folder = tmp_path / "gradient_noise_scale"
    shutil.copytree(repo / "submissions" / "gradient_noise_scale", folder)
    yaml = folder / "submission.yaml"
    yaml.write_text(yaml.read_text().replace("gradnoise.noise_scale_log", "t.gnsmine"))
    assert "t.gnsmine" in yaml.read_text()
    monkeypatch.setattr(api, "Worker", lambda *a, **k: pytest.fail("the worker started on a clashing folder"))
    with pytest.raises(GenbenchError) as e:
        submit(folder, ["digits-mlp"], results_root=tmp_path / "r", audit_zoo=None, n_boot=20, device="cpu",
               unsandboxed=True)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{folder}: the folder name 'gradient_noise_scale' is that of "
                                                      "the shipped submission of entry 'gradnoise.noise_scale_log'")
    assert message.endswith(f"this entry 't.gnsmine' would hide that one; rename the folder {folder} (a name no "
                            "shipped submission has) and submit it from there"), message
    assert not (tmp_path / "r").exists()


def test_a_call_over_budget_names_the_fix():
    from genbench.entries.submit.executor import entry_of
    from genbench.measures.registry import Measure

    m = Measure(name="t.slow", fn=lambda ctx: 1.0, kind="scalar", needs=(), citation="", version=1, higher_means=None)
    got = entry_of(m, {"value": [1.0], "shape": [], "seconds": 2.5}, 1.0)
    assert got["value"] is None and got["error"] == ("over budget: took 2.5 s, budget 1 s: call ctx.check_time() in "
                                                     "the measure's long loops, or pass a larger --budget-s")


def test_importing_a_module_of_the_submissions_folder_names_the_fix(tmp_path):
    """`from helpers import f` with helpers.py beside measure.py said 'No module named helpers' and nothing more."""
    from genbench.entries.submit.worker import _own_module
    from genbench.measures import import_measure_file

    (tmp_path / "my_helpers_q7.py").write_text("def f():\n    return 1.0\n")
    for source, hint in (("from my_helpers_q7 import f\n", True), ("import no_such_package_xyz\n", False)):
        (tmp_path / "measure.py").write_text(source)
        with pytest.raises(ModuleNotFoundError) as e:
            import_measure_file(tmp_path / "measure.py")
        said = _own_module(e.value, tmp_path / "measure.py")
        assert (said == "; my_helpers_q7 is in the submission's folder, which is not on the import path: put its "
                        "code in measure.py") if hint else said == ""
