"""genbench submit: the submission format is checked field by field, the entry's values are computed in the
sandboxed worker (unsandboxed where bubblewrap cannot run here), and every way submitted code can go wrong
becomes a failure record while the harness carries on. The planted escapes are in test_sandbox.py."""
from __future__ import annotations

import json
import math
import re
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.entries.submit import load_submission, submit, supervise
from genbench.entries.submit.sandbox import sandbox_problem
from helpers import parsed_command

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "submissions" / "_template"
SANDBOXED = sandbox_problem() is None  # elsewhere the same tests run the worker unsandboxed
FAST = dict(audit_zoo=None, n_boot=20, budget_s=30, device="cpu", unsandboxed=not SANDBOXED)
CLI_SANDBOX = [] if SANDBOXED else ["--unsandboxed"]
YAML = {"title": "t", "authors": ["A. Author"], "contact": "a@example.org", "paper_url": None,
        "licence": "MIT", "entry": "bad.entry", "zoos": ["digits-mlp"]}


def make_submission(root: Path, name: str, body: str, **fields) -> Path:
    """A submission folder whose measure.py is the genbench import plus `body`."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "measure.py").write_text("import genbench as gb\n" + textwrap.dedent(body))
    meta = {**YAML, **fields}
    (folder / "submission.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in meta.items()) + "\n")
    return folder


def run_one(folder: Path, results: Path, **kw) -> dict:
    paths = submit(folder, ["digits-mlp"], results_root=results, **{**FAST, **kw})
    assert len(paths) == 1 and paths[0] == results / "digits-mlp" / f"{folder.name}.json"
    return json.loads(paths[0].read_text())


# ---------------------------------------------------------------- the format


def test_template_is_a_valid_submission():
    sub = load_submission(TEMPLATE)
    assert sub.name == "_template" and sub.entry == "template.logit_margin"
    assert sub.fields()["path"].endswith("submissions/_template")
    for example in ("weightwatcher_alpha", "gradient_noise_scale"):
        sub = load_submission(REPO / "submissions" / example)
        assert (REPO / "submissions" / example / "README.md").is_file() and sub.authors


@pytest.mark.parametrize("change, expected", [
    ({"drop": "contact"}, r"missing field\(s\) 'contact'"),
    ({"authors": "Ada Lovelace"}, r"field 'authors': expected a non-empty list of names .* found 'Ada Lovelace'"),
    ({"authors": []}, r"field 'authors': expected a non-empty list"),
    ({"contact": "nobody"}, r"field 'contact': expected an e-mail address .* found 'nobody'"),
    ({"paper_url": "ftp://x.org/p.pdf"}, r"field 'paper_url': expected an http\(s\) URL"),
    ({"licence": "all rights reserved!"}, r"field 'licence': expected an SPDX licence identifier"),
    ({"licence": "MIT-ish"}, r"field 'licence': expected an identifier on the SPDX licence list \(Unknown license: "
                             r"'mit-ish'\), found 'MIT-ish'"),
    ({"licence": "apache-2.0 OR mit"}, r"expected an identifier on the SPDX licence list \(the list spells it "
                                       r"'Apache-2.0 OR MIT'\)"),
    ({"entry": "nodot"}, r"field 'entry': expected a measure name of the form 'family.variant'"),
    ({"zoos": "digits-mlp"}, r"field 'zoos': expected a non-empty list of zoo names"),
    ({"license": "MIT"}, r"unknown field in .*submission.yaml: 'license'. Did you mean 'licence'"),
])
def test_bad_yaml_names_the_file_the_field_and_what_was_found(tmp_path, change, expected):
    folder = make_submission(tmp_path, "bad", "")
    data = dict(YAML)
    if "drop" in change:
        data.pop(change["drop"])
    else:
        data.update(change)
    (folder / "submission.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in data.items()))
    with pytest.raises(GenbenchError, match=expected) as info:
        load_submission(folder)
    assert str(folder / "submission.yaml") in str(info.value)


def test_unparsable_yaml_and_missing_files_are_refused(tmp_path):
    folder = make_submission(tmp_path, "bad", "")
    (folder / "submission.yaml").write_text("title: [unclosed\n")
    with pytest.raises(GenbenchError, match=r"submission.yaml: not valid YAML at line \d+"):
        load_submission(folder)
    (folder / "submission.yaml").write_text("- a list\n")
    with pytest.raises(GenbenchError, match="expected a mapping of fields"):
        load_submission(folder)
    (folder / "measure.py").unlink()
    with pytest.raises(GenbenchError, match="has no measure.py"):
        load_submission(folder)
    with pytest.raises(GenbenchError, match="does not exist"):
        load_submission(tmp_path / "nowhere")
    (folder / "measure.py").write_text("")
    (folder / "submission.yaml").write_text("# nothing yet\n")
    with pytest.raises(GenbenchError, match="submission.yaml is empty; copy submissions/_template"):
        load_submission(folder)
    with pytest.raises(GenbenchError, match="is a file; pass the submission's folder"):
        load_submission(folder / "measure.py")


def test_the_workers_output_is_shown_never_parsed(tmp_path):
    """Lines that look like the old stdout protocol are the submission's output like any other: they change no
    clock and no stage (the results come on a channel of their own); only where the log is is said."""
    import collections
    import io

    tail, seen = collections.deque(maxlen=30), []
    stream = io.BytesIO(b'progress 50%\r@@genbench {"call": "start"}\n@@genbench {"call": "end"}\nplain\n')
    supervise._pump(stream, tail, supervise.OutputLog(tmp_path / "out.log", lambda text, kind: seen.append((kind, text))))
    assert list(tail) == ['progress 50%\\r@@genbench {"call": "start"}', '@@genbench {"call": "end"}', "plain"]
    assert [text for kind, text in seen if kind == "output"] == list(tail)
    assert [kind for kind, _ in seen].count("stage") == 1 and str(tmp_path / "out.log") in seen[0][1]


def running_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker`."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def test_processes_the_measure_starts_do_not_outlive_the_submission(tmp_path, digits_zoo):
    marker = "1234.567"  # sleep's argument: how the processes are found afterwards
    folder = make_submission(tmp_path, "spawner", f"""
        import subprocess
        child = subprocess.Popen(["sleep", "{marker}"])

        @gb.register_measure("sub.spawner")
        def spawner(ctx):
            return float(sum(p.detach().abs().sum() for p in ctx.model.parameters()))
        """, entry="sub.spawner")
    rec = run_one(folder, tmp_path / "r")
    assert rec["status"] == "ok", rec["failure"]
    left = [pid for pid in running_with(marker) if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
            != "Z"]  # killed (a zombie until its new parent reaps it)
    assert not left


def test_the_zoos_are_not_there_at_import(tmp_path, digits_zoo):
    """The worker's GENBENCH_HOME is empty (and in the sandbox the zoos' folders do not exist): a zoo cannot even be
    opened by name."""
    folder = make_submission(tmp_path, "early_peek", """
        zoo = gb.load_zoo("digits-mlp")

        @gb.register_measure("sub.early_peek")
        def early_peek(ctx):
            return 1.0
        """, entry="sub.early_peek")
    rec = run_one(folder, tmp_path / "r")
    assert rec["status"] == "failed" and rec["failure"].startswith("measure.py raised at import (measure.py line 3): "
                                                                   "GenbenchError: unknown zoo 'digits-mlp'")


def test_a_rerun_that_names_the_audit_zoo_auto_picked_writes_the_same_command(digits_zoo):
    """verify re-makes a submission's record with its audit zoo by name and compares every field, the command too:
    the zoo the default picks is said as the default, so an honest record reproduces."""
    from genbench.entries.submit.api import submit_command
    from genbench.zoo.roles import audit_zoo_of
    sub = load_submission(TEMPLATE)
    plain = "genbench submit submissions/_template --zoo digits-mlp"
    assert submit_command(sub, digits_zoo, audit_zoo=audit_zoo_of(digits_zoo)) == plain  # `submit` with the default
    assert submit_command(sub, digits_zoo, audit_zoo="fragility-cnn-mnist1d") == \
        plain + " --audit-zoo fragility-cnn-mnist1d"
    assert submit_command(sub, digits_zoo, audit_zoo=None, n_boot=20) == plain + " --no-audit --n-boot 20"


def test_settings_that_cannot_work_are_refused_before_the_worker_starts(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "fine", """
        @gb.register_measure("sub.fine")
        def fine(ctx):
            return 1.0
        """, entry="sub.fine")
    for kw, message in (({"budget_s": 0}, "per-model budget must be a positive"),
                        ({"n_boot": 0}, "bootstrap resamples must be at least 1")):
        with pytest.raises(GenbenchError, match=message):
            submit(folder, ["digits-mlp"], results_root=tmp_path / "r", **{**FAST, **kw})
    assert not (tmp_path / "r").exists()  # nothing recorded against the submission


def test_unknown_zoo_and_builtin_entry_are_refused_before_anything_runs(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "ok", "")
    with pytest.raises(GenbenchError, match="unknown zoo 'digits-mpl'. Did you mean 'digits-mlp'"):
        submit(folder, ["digits-mpl"], results_root=tmp_path / "r", **FAST)
    folder = make_submission(tmp_path, "taken", "", entry="norm.params")
    with pytest.raises(GenbenchError, match="'norm.params' is already a registered"):
        submit(folder, ["digits-mlp"], results_root=tmp_path / "r", **FAST)
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- a good submission, through the CLI


def test_template_submission_gets_an_ok_record_with_scores_and_provenance(tmp_path, digits_zoo, monkeypatch):
    from genbench.entries.submit import supervise
    monkeypatch.setattr(supervise, "POLL_S", 1.0)  # a watcher that looks seldom: stages must not wait for it
    results = tmp_path / "results"
    out = CliRunner().invoke(app, ["submit", str(TEMPLATE), "--zoo", "digits-mlp", "--results", str(results),
                                   "--no-audit", "--n-boot", "20", "--budget-s", "30", "--device", "cpu", *CLI_SANDBOX])
    assert out.exit_code == 0, out.output
    assert "conformance suite passed" in out.output and "adj R2" in out.output and "k-fold R2" in out.output
    text = " ".join(out.output.split())
    # each stage is said when its first call is asked for, not when a watcher next looks: in the order they ran
    said = [text.index(s) for s in ("-> running the conformance suite on 2 models on digits-mlp",
                                    "-> [digits-mlp] conformance suite passed",
                                    f"-> evaluating template.logit_margin on {len(digits_zoo)} models on digits-mlp",
                                    "adj R2")]
    assert said == sorted(said), text
    # the verdict: rank and group among the records ranked beside it, the recipe, what it adds, its direction
    assert "audit: skipped (--no-audit)" in text and "rank 1 of 1 measures, group 1 (k-fold R² " in text
    assert "no baseline.hparams record on digits-mlp to compare with: `genbench leaderboard baselines --zoo " \
           "digits-mlp` makes it" in text
    assert re.search(r"adds (nothing to the recipe \(-?[0-9.]+ \[|-?[0-9.]+ \[-?[0-9.]+, -?[0-9.]+\] to the recipe)",
                     text)
    assert "direction: as claimed (" in text or "AGAINST ITS CLAIM: it declares" in text
    path = results / "digits-mlp" / "_template.json"
    assert str(path) in out.output.replace("\n", "")
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok" and rec["failure"] is None and rec["builtin"] is False
    assert rec["name"] == "_template" and rec["measure"] == "template.logit_margin" and rec["kind"] == "scalar"
    for key in ("adj_r2", "kfold_r2", "tau"):
        assert math.isfinite(rec["scores"]["values"][key])
        lo, hi = rec["scores"]["intervals"][key]
        assert lo <= hi
    assert len(rec["values"]["value"]) == len(digits_zoo)
    prov = rec["provenance"]
    for key in ("genbench_version", "git_commit", "measure_source_hash", "device", "seconds", "date", "command"):
        assert key in prov
    # the same from any folder, with every setting it ran with that is not the default, read back by the CLI
    again = "genbench submit submissions/_template --zoo digits-mlp --no-audit --n-boot 20 --budget-s 30"
    assert prov["command"] == again + ("" if SANDBOXED else " --unsandboxed")
    command, params = parsed_command(prov["command"])
    assert command == "submit" and params["no_audit"] and (params["n_boot"], params["budget_s"]) == (20, 30)
    assert prov["sandbox"] == ("bubblewrap" if SANDBOXED else "none (--unsandboxed)") and prov["budget_s"] == 30
    assert len(prov["measure_source_hash"]) == 64
    assert rec["zoo"]["table_sha256"] == digits_zoo.table_sha256
    assert rec["submission"]["entry"] == "template.logit_margin" and rec["submission"]["licence"] == "Apache-2.0"


@pytest.mark.parametrize("example, entry", [("gradient_noise_scale", "gradnoise.noise_scale_log"),
                                            ("weightwatcher_alpha", "spectral.ww_alpha")])
def test_example_submissions_score_on_the_digits_zoo(tmp_path, digits_zoo, example, entry):
    if example == "weightwatcher_alpha":
        pytest.importorskip("weightwatcher")
    rec = run_one(REPO / "submissions" / example, tmp_path / "r")
    assert rec["status"] == "ok", rec["failure"]
    assert rec["measure"] == entry and math.isfinite(rec["scores"]["values"]["tau"])
    assert all(math.isfinite(v) for v in rec["values"]["value"])


def test_weightwatcher_example_reads_a_1d_convolution_as_a_2d_kernel_of_height_1(monkeypatch):
    """weightwatcher 0.7 fits no Conv1d layer; the example hands it each (out, in, k) kernel as (out, in, 1, k)."""
    pytest.importorskip("weightwatcher")
    import importlib.util

    import torch

    import genbench as gb

    monkeypatch.setattr(gb, "register_measure", lambda *a, **k: (lambda f: f))  # keep the registry as it is
    spec = importlib.util.spec_from_file_location("ww_example", REPO / "submissions" / "weightwatcher_alpha" /
                                                  "measure.py")
    ww = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ww)
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv1d(16, 24, 3), torch.nn.ReLU(), torch.nn.Conv1d(24, 24, 1),
                               torch.nn.Flatten(), torch.nn.Linear(24, 10))
    view = ww.as_conv2d(conv)
    kernels = [m for m in view.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [tuple(k.weight.shape) for k in kernels] == [(24, 16, 1, 3), (24, 24, 1, 1)]
    assert torch.equal(kernels[0].weight[:, :, 0, :], conv[0].weight)
    assert ww.layer_alphas(conv).size == 3  # both convolutions and the head
    monkeypatch.setattr(ww, "as_conv2d", lambda model: model)  # the model as it is: only the head is fitted
    assert ww.layer_alphas(conv).size == 1
    mlp = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    assert ww.as_conv2d(mlp) is mlp  # an MLP's alphas are what they were before 1-D convolutions were read


# ---------------------------------------------------------------- every way to fail, and the parent survives


def test_exception_at_import_gives_a_failure_record(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "boom", """
        x = 1
        raise RuntimeError("boom at import")
        """)
    rec = run_one(folder, tmp_path / "r")
    assert rec["status"] == "failed" and rec["scores"] is None
    assert "measure.py raised at import (measure.py line 4): RuntimeError: boom at import" in rec["failure"]


def test_entry_not_registered_lists_what_is(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "other", """
        @gb.register_measure("sub.something")
        def something(ctx):
            return 1.0
        """, entry="sub.other")
    rec = run_one(folder, tmp_path / "r")
    assert rec["failure"].startswith("measure.py does not register 'sub.other'")
    assert "it registers ['sub.something']" in rec["failure"]


def test_hard_crash_in_the_measure_gives_a_failure_record(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "crash", """
        import os

        @gb.register_measure("sub.crash")
        def crash(ctx):
            print("about to die", flush=True)
            os._exit(3)
        """, entry="sub.crash")
    rec = run_one(folder, tmp_path / "r")
    assert rec["status"] == "failed" and rec["kind"] == "scalar"
    assert "crashed while running the conformance suite on 2 models on digits-mlp" in rec["failure"]
    assert "exited with status 3" in rec["failure"] and "about to die" in rec["failure"]
    assert rec["provenance"]["measure_source_hash"]
    assert " --zoo digits-mlp --no-audit --n-boot 20 --budget-s 30" in rec["provenance"]["command"]  # FAST's settings


def test_hanging_measure_is_killed_after_its_budget(tmp_path, digits_zoo, monkeypatch):
    monkeypatch.setattr(supervise, "HANG_GRACE_S", 1.0)
    folder = make_submission(tmp_path, "hang", """
        import time

        @gb.register_measure("sub.hang")
        def hang(ctx):
            time.sleep(3600)
        """, entry="sub.hang")
    rec = run_one(folder, tmp_path / "r", budget_s=1)
    assert rec["failure"].startswith("hung: one call of sub.hang ran for more than 2 s")


def test_hang_outside_the_measure_hits_the_overall_timeout(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "slowimport", """
        import time
        time.sleep(3600)
        """)
    rec = run_one(folder, tmp_path / "r", timeout_s=4)
    assert rec["failure"].startswith("timed out: the submission ran past its wall-clock limit of 4 s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory cap is Linux-only (documented)")
def test_over_memory_gives_a_failure_record(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "hog", """
        import numpy as np

        @gb.register_measure("sub.hog")
        def hog(ctx):
            return float(np.ones(1 << 28).sum())  # 2 GiB
        """, entry="sub.hog")
    rec = run_one(folder, tmp_path / "r", memory_gb=1)
    assert rec["failure"].startswith("exceeded the memory cap of 1 GB") and "MemoryError" in rec["failure"]


def test_nan_measure_gives_a_failure_record(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "nan", """
        @gb.register_measure("sub.nan")
        def nan(ctx):
            return float("nan")
        """, entry="sub.nan")
    rec = run_one(folder, tmp_path / "r")
    assert "failed the conformance suite" in rec["failure"] and "non-finite value (nan)" in rec["failure"]


def test_the_zoo_cannot_be_opened_from_the_measure_and_the_failure_says_why(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "peek", """
        @gb.register_measure("sub.peek")
        def peek(ctx):
            zoo = gb.load_zoo("digits-mlp")
            return float(zoo.test_data(zoo.model_ids[0])[1].float().mean())
        """, entry="sub.peek")
    result = CliRunner().invoke(app, ["submit", str(folder), "--zoo", "digits-mlp", "--results", str(tmp_path / "r"),
                                      "--no-audit", "--n-boot", "20", "--device", "cpu", *CLI_SANDBOX])
    assert result.exit_code == 1
    assert "FAILED failed the conformance suite" in " ".join(result.output.split())
    last = " ".join(result.output.split()).rsplit("record: ", 1)[1]  # the last line says to fix the measure, not
    assert last.endswith(f"no record was scored: fix what the FAILED line above says, then run `genbench submit "
                         f"{folder} --zoo digits-mlp --no-audit --n-boot 20` again"), last  # to submit it on the
    # official zoos, or to drop the zoo it was submitted on: the record's own command
    rec = json.loads((tmp_path / "r" / "digits-mlp" / "peek.json").read_text())
    assert rec["status"] == "failed" and "GenbenchError: unknown zoo 'digits-mlp'" in rec["failure"]
    assert rec["failure"].endswith("(on all 2 models checked)")


# ---------------------------------------------------------------- where a submission's records go


def test_submit_writes_to_the_users_results_folder_never_the_shipped_one(tmp_path, home, digits_zoo, monkeypatch):
    """By default under $GENBENCH_HOME/results, whatever the current folder; the repository's leaderboard/results
    (and a leaderboard/results under the current folder) stay as they were; the leaderboard ranks the record
    beside the shipped ones, marked local."""
    import genbench.cli as cli

    shipped = REPO / "leaderboard" / "results"
    before = {p: p.read_bytes() for p in shipped.rglob("*") if p.is_file()}
    user_home = tmp_path / "home"
    user_home.mkdir()
    (user_home / "zoos").symlink_to(home / "zoos")  # the session's digits zoo, in a home of its own
    monkeypatch.setenv("GENBENCH_HOME", str(user_home))
    cwd = tmp_path / "cwd"
    (cwd / "leaderboard" / "results").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    out = CliRunner().invoke(app, ["submit", str(TEMPLATE), "--zoo", "digits-mlp", "--no-audit", "--n-boot", "20",
                                   "--budget-s", "30", "--device", "cpu", *CLI_SANDBOX])
    assert out.exit_code == 0, out.output
    path = user_home / "results" / "digits-mlp" / "_template.json"
    assert json.loads(path.read_text())["status"] == "ok" and str(path) in out.output.replace("\n", "")
    assert {p: p.read_bytes() for p in shipped.rglob("*") if p.is_file()} == before
    assert not any((cwd / "leaderboard" / "results").iterdir())

    monkeypatch.setattr(cli.console, "width", 80)
    board = CliRunner().invoke(app, ["leaderboard", "--all"])
    assert board.exit_code == 0, board.output
    rows = {line.split()[2]: line.split() for line in board.output.splitlines()
            if line.split() and line.split()[0].lstrip("=").isdigit()}  # a tied rank reads =N
    mine = rows["template.logit_margin"]  # an entry is named by its measure (its folder: the submission column)
    assert mine[:2] == ["1", "1"] and mine[3] == "*"  # ranked, marked local
    from genbench.leaderboard.standings import rank_records
    from genbench.record import load_records
    from genbench.leaderboard.export import entry_name
    shipped_names = {entry_name(r) for r in rank_records(load_records(shipped)) if r.rank is not None}  # no baselines
    assert shipped_names and shipped_names <= set(rows)  # beside every ranked shipped record, which is not marked
    assert all(rows[name][3] != "*" for name in shipped_names)


def test_a_partial_zoo_is_refused_before_the_worker_starts_and_marked_partial_when_allowed(home, tmp_path,
                                                                                           monkeypatch):
    import genbench as gb
    from genbench.entries.submit import api

    partial = gb.build_zoo("digits-mlp", tmp_path / "partial", limit=12, progress=False)  # an interrupted build
    results = tmp_path / "r"
    args = ["submit", str(TEMPLATE), "--zoo", str(partial.root), "--results", str(results), "--no-audit",
            "--n-boot", "20", "--budget-s", "30", "--device", "cpu", *CLI_SANDBOX]
    real = api.Worker
    monkeypatch.setattr(api, "Worker", lambda *a, **k: pytest.fail("the worker started on a partial zoo"))
    out = CliRunner().invoke(app, args)
    assert isinstance(out.exception, GenbenchError), out.output
    message = " ".join(str(out.exception).split())
    assert message.startswith("zoo 'digits-mlp' is partial: 12 of 24 models, 12 missing; finish it with "
                              f"`genbench zoo build digits-mlp --out {partial.root}`"), message
    assert "(or pass --allow-partial to score it anyway" in message
    assert not results.exists()  # no failure record either: the user gets the error

    monkeypatch.setattr(api, "Worker", real)
    out = CliRunner().invoke(app, [*args, "--allow-partial"])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "digits-mlp: ok" in flat and "(unranked: partial zoo (12 of 24 models))" in flat
    rec = json.loads((results / "digits-mlp" / "_template.json").read_text())
    assert rec["status"] == "ok", rec["failure"]
    assert rec["zoo"]["complete"] is False and (rec["zoo"]["models"], rec["zoo"]["expected_models"]) == (12, 24)
    assert rec["provenance"]["command"].endswith("--zoo digits-mlp --no-audit --n-boot 20 --budget-s 30 --allow-partial"
                                                 + (" --unsandboxed" if not SANDBOXED else ""))
    assert len(rec["values"]["model_id"]) == 12
