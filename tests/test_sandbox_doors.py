"""The sandbox's remaining doors, each planted and shown shut: rebuilding the evaluation data from the environment's
generators, output without limit, writable mounts without a size, checkpoints that carry metadata, the user's
site-packages, and a worker that times itself. Also the source review of `genbench leaderboard add`.

Sandbox tests skip where bubblewrap cannot run (they fail instead when CI is set), as in test_sandbox.py."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from genbench.errors import GenbenchError
from genbench.entries.submit import api, sandbox, submit, supervise
from genbench.entries.submit.review import review_source, review_submission
from genbench.entries.submit.sandbox import MemoryLimit
from test_sandbox import FAST, require_sandbox  # the shared set-up of the sandbox tests
from test_sandbox import make_sub as sandbox_sub

REPO = Path(__file__).resolve().parents[1]
NO_SANDBOX_NEEDED = ("test_the_job_folder_", "test_submit_refuses_", "test_the_review_", "test_only_the_env")


@pytest.fixture(autouse=True)
def needs_sandbox(request):
    require_sandbox(request, NO_SANDBOX_NEEDED)


def make_sub(root: Path, name: str, body: str, entry: str = "door.measure", legit: bool = True) -> Path:
    """test_sandbox's submission folder, its measure named door.measure by default."""
    return sandbox_sub(root, name, body, entry=entry, legit=legit)


def run(folder: Path, results: Path, echoed: list | None = None, **kw) -> dict:
    echo = (lambda text, kind: echoed.append((text, kind))) if echoed is not None else None
    (path,) = submit(folder, ["digits-mlp"], results_root=results, echo=echo, **{**FAST, **kw})
    return json.loads(path.read_text())


def report(rec: dict) -> dict:
    """The JSON report a planted measure.py raised at import."""
    assert rec["status"] == "failed" and "REPORT " in rec["failure"], rec["failure"]
    return json.loads(rec["failure"].split("REPORT ", 1)[1])


# ---------------------------------------------------------------- 1. the evaluation data cannot be rebuilt


def test_the_evaluation_data_cannot_be_rebuilt_inside(tmp_path, digits_zoo):
    """Every generator the environment ships (mnist1d, scikit-learn's bundled digits, genbench's own builders and
    recipes, the base interpreter's packages) fails in the sandbox; each works outside it, and an ordinary package
    still imports inside."""
    from sklearn.datasets import load_digits
    assert len(load_digits().target) == 1797  # outside: the data is there to rebuild
    digits_spec = digits_zoo.manifest["dataset"]
    base_sp = [p for p in sandbox.hidden_paths()[0] if p.endswith("-packages") and os.listdir(p)]
    attempts = {
        "mnist1d": "from mnist1d.data import get_dataset_args, make_dataset; make_dataset(get_dataset_args())",
        "digits": "from sklearn.datasets import load_digits; load_digits()",
        "genbench_digits": f"from genbench.zoo.data import load_pool; load_pool({digits_spec!r})",
        "genbench_mnist1d": "from genbench.zoo.data import load_pool; load_pool({'name': 'mnist1d', "
                            "'num_samples': 5000, 'train_split': 0.2, 'seed': 42})",
        "builder": "import genbench.zoo.build",
        "hf_images": "import genbench.zoo.hf_images",
        "importers": "import genbench.zoo.importers.pgdl",
        "recipes": "from genbench.zoo.recipe import list_recipes; assert list_recipes(), 'no recipe'",
        "base_site_packages": f"import os; assert any(os.listdir(p) for p in {base_sp!r}), 'empty'",
        "control": "import sklearn.linear_model, scipy.stats, pandas",
    }
    body = "import json\nout = {}\n" + "".join(
        f"try:\n    exec({code!r})\n    out[{name!r}] = 'ok'\nexcept BaseException as e:\n"
        f"    out[{name!r}] = type(e).__name__ + ': ' + str(e)[:200]\n" for name, code in attempts.items()
    ) + "raise RuntimeError('REPORT ' + json.dumps(out))\n"
    folder = make_sub(tmp_path / "subs", "rebuilder", body)
    out = report(run(folder, tmp_path / "r"))
    assert out.pop("control") == "ok"
    assert [k for k, v in out.items() if v == "ok"] == [], out
    assert out["mnist1d"].startswith("ModuleNotFoundError") and "Error" in out["digits"], out


def test_submit_refuses_a_folder_that_carries_data(tmp_path, digits_zoo):
    folder = make_sub(tmp_path / "subs", "heavy", "")
    (folder / "table.npy").write_bytes(b"\0" * (sandbox.SUBMISSION_MAX_BYTES + 1))
    with pytest.raises(GenbenchError, match=r"heavy holds at least 3 files of 1\.0 MB \(the largest: table\.npy.*"
                                            r"carries code, not data"):
        run(folder, tmp_path / "r", unsandboxed=True)
    assert not (tmp_path / "r").exists()
    many = make_sub(tmp_path / "subs", "many", "")  # measure.py, submission.yaml and 199 more: MAX_FILES + 1
    for i in range(sandbox.SUBMISSION_MAX_FILES - 1):
        (many / f"f{i}.txt").write_text("x")
    with pytest.raises(GenbenchError, match=rf"many holds at least {sandbox.SUBMISSION_MAX_FILES + 1} files "):
        sandbox.check_submission_size(many)  # it said "more than 201" of 201 files


def test_only_the_environments_own_site_packages_are_bound(tmp_path, monkeypatch):
    user = tmp_path / "dotlocal" / "site-packages"
    (user / "mnist1d").mkdir(parents=True)
    monkeypatch.setattr(sandbox.site, "getusersitepackages", lambda: str(user))
    argv = sandbox.bwrap_argv(job_dir=tmp_path, submission=tmp_path, tmp_bytes=1 << 20)
    assert not any(str(tmp_path / "dotlocal") in a for a in argv)
    hidden_dirs, hidden_files = sandbox.hidden_paths()
    own = sandbox._env_site_packages()
    assert {f"{own[0]}/mnist1d", f"{own[0]}/sklearn/datasets/data"} <= set(hidden_dirs)
    assert str(sandbox.PACKAGE / "zoo" / "build.py") in hidden_files
    if sys.base_prefix != sys.prefix:  # a venv: its base interpreter's packages are hidden
        base = [d for d in hidden_dirs if d.startswith(sys.base_prefix) and d.endswith("site-packages")]
        assert base, hidden_dirs


# ---------------------------------------------------------------- review at `leaderboard add`


PLANTED = {
    "import mnist1d": "imports mnist1d",
    "from sklearn.datasets import load_digits": "imports from sklearn.datasets",
    "from genbench.zoo.data import load_pool": "imports from genbench.zoo",
    "import torchvision.datasets as tvd": "imports torchvision.datasets",
    "from datasets import load_dataset": "imports from datasets",
    "x = hub.load_dataset('mnist')": "calls load_dataset()",
    "z = gb.load_zoo('digits-mlp')": "calls load_zoo()",
    "GAPS = {" + ", ".join(f"'m{i}': 0.{i}" for i in range(20)) + "}": "a table of 20 numbers by key",
    "T = [" + ", ".join(str(i) for i in range(100)) + "]": "a literal of 100 numbers",
    "d = open('/home/me/.cache/genbench/zoos/x/models.parquet').read()": "calls open()",
    "import numpy as np\nd = np.load('/data/test.npy')": "calls load()",
    "m = __import__('mnist1d')": "calls __import__()",
    "import importlib\nm = importlib.import_module('sklearn.' + 'datasets')": "calls import_module()",
    "B = '" + "QUJD" * 600 + "'": "literal of 2400 characters",
}


@pytest.mark.parametrize("line", list(PLANTED))
def test_the_review_flags_planted_data_generation(line):
    found = review_source(line + "\n", "measure.py")
    assert found and any(PLANTED[line] in f for f in found), found
    assert found[0].startswith("measure.py line ")


def test_the_review_passes_the_shipped_examples_and_flags_data_files(tmp_path):
    for name in ("_template", "weightwatcher_alpha", "gradient_noise_scale"):
        assert review_submission(REPO / "submissions" / name) == [], name
    folder = make_sub(tmp_path, "carrier", "")
    (folder / "gaps.parquet").write_bytes(b"PAR1")
    (folder / "linked.py").symlink_to(REPO / "genbench" / "zoo" / "data.py")
    found = review_submission(folder)
    assert any(f.startswith("gaps.parquet: a file that is not source") for f in found), found
    assert any(f.startswith("linked.py: a link") for f in found), found
    assert review_source("def f(x):\n    '''" + "doc " * 1000 + "'''\n    return x\n") == []  # docstrings are text


def test_leaderboard_add_refuses_a_flagged_submission_unless_reviewed(tmp_path, digits_zoo, monkeypatch):
    """Refused with the review's reasons before anything re-runs; with --reviewed it goes on to verification (here
    stopped at its start: test_sandbox.py's verify test runs it whole)."""
    from typer.testing import CliRunner

    from genbench.cli import app
    from genbench.entries import verify
    reached = []

    def verification_starts(path, **kw):
        reached.append(path)
        v = verify.Verification(str(path), rtol=kw["rtol"], atol=kw["atol"])
        v.problems.append("verification reached (stopped here by the test)")
        return v
    subs, results, shipped = tmp_path / "subs", tmp_path / "r", tmp_path / "shipped"
    shipped.mkdir()
    make_sub(subs, "flagged", "import sklearn.datasets  # imported, never called: the review flags it anyway\n",
             entry="flagged.measure")
    rec = run(subs / "flagged", results)
    assert rec["status"] == "ok", rec["failure"]
    path = results / "digits-mlp" / "flagged.json"
    args = ["leaderboard", "add", str(path), "--to", str(shipped), "--submissions", str(subs), "--device", "cpu"]
    monkeypatch.setattr(verify, "verify_record", verification_starts)
    res = CliRunner().invoke(app, args)
    said = " ".join(res.output.split())
    assert res.exit_code == 1 and "the review of submissions/flagged found" in said, res.output
    assert "imports sklearn.datasets" in said and "--reviewed" in said
    assert not reached and not list(shipped.rglob("*.json"))
    res = CliRunner().invoke(app, [*args, "--reviewed"])
    said = " ".join(res.output.split())
    assert reached == [path] and "verification reached" in said and "review" not in said, res.output


# ---------------------------------------------------------------- 3. output, bounded and sanitised


def test_the_submissions_output_is_bounded_and_sanitised(tmp_path, home, digits_zoo, monkeypatch):
    monkeypatch.setattr(supervise, "LOG_LIMIT", 200_000)
    folder = make_sub(tmp_path / "subs", "loud", r"""
        import sys
        for i in range(5000):
            print(f"line {i} \x1b[2J\x1b]0;owned\x07\u202e " + "x" * 100)
        print("y" * 500_000)
        print("the last line", flush=True)
        """)
    echoed: list = []
    rec = run(folder, tmp_path / "r", echoed)
    assert rec["status"] == "ok", rec["failure"]
    shown = [t for t, k in echoed if k == "output"]
    assert len(shown) == supervise.SHOWN_HEAD + supervise.SHOWN_TAIL
    assert shown[0].startswith("line 0 \\x1b[2J\\x1b]0;owned\\x07\\u202e") and shown[-1] == "the last line"
    assert all(len(t) < supervise.SHOWN_CHARS + 40 and "\x1b" not in t and "\u202e" not in t for t in shown)
    stages = [t for t, k in echoed if k == "stage"]
    (cut,) = [t for t in stages if "lines of output not shown" in t]
    n_lines = 5000 + 500_000 // supervise.LINE_LIMIT + 1 + 1
    assert cut.startswith(f"... {n_lines - len(shown)} lines of output not shown")
    (named,) = [t for t in stages if t.startswith("the submission's output:")]
    log = Path(named.rsplit(" in ", 1)[1])
    assert log.parent == home / "logs" and str(log) in cut
    data = log.read_bytes()
    assert data.startswith(b"line 0 \x1b[2J") and len(data) < 200_000 + 100
    assert data.rstrip().endswith(b"more bytes of output not logged]")


# ---------------------------------------------------------------- 4. every writable mount is bounded


def test_nothing_but_tmp_and_shm_is_writable(tmp_path, digits_zoo):
    """The root and /dev (tmpfs without a size, once) are read-only, like every bind."""
    body = """
        import json, os
        out = {}
        for d in ["/", "/dev", "/job", "/submissions/ro", "/usr", "/proc", "/tmp", "/dev/shm"]:
            try:
                with open(os.path.join(d, "planted"), "wb") as f:
                    f.write(b"x" * 4096)
                out[d] = "ok"
            except OSError as e:
                out[d] = e.strerror
        raise RuntimeError("REPORT " + json.dumps(out))
        """
    out = report(run(make_sub(tmp_path / "subs", "ro", body), tmp_path / "r"))
    assert out.pop("/tmp") == out.pop("/dev/shm") == "ok"
    assert set(out.values()) <= {"Read-only file system", "Permission denied", "No such file or directory"}, out


@pytest.mark.parametrize("mount, fallback", [("/tmp", False), ("/tmp", True), ("/dev/shm", False),
                                             ("/dev/shm", True), ("memfd", True)])
def test_files_past_the_memory_cap_fail_the_run(tmp_path, digits_zoo, monkeypatch, mount, fallback):
    """A measure that keeps 1.5 GB of files (or of a memfd) under a 1 GB cap: the kernel (cgroup) or the parent's
    watch (fallback: resident memory plus the files in memory) ends it, and the record says so."""
    if fallback:
        monkeypatch.setattr(api, "memory_limit", lambda limit: MemoryLimit("rlimit", limit))
    where = "os.memfd_create('hoard')" if mount == "memfd" else f"os.open('{mount}/hoard', os.O_CREAT | os.O_WRONLY)"
    body = f"""
        import os, time
        chunk = b"x" * (64 << 20)
        with os.fdopen({where}, "wb") as f:
            for _ in range(24):
                f.write(chunk)
                f.flush()
        time.sleep(5)
        """
    rec = run(make_sub(tmp_path / "subs", "hoarder", body), tmp_path / "r", memory_gb=1)
    assert rec["status"] == "failed" and "exceeded the memory cap of 1 GB" in rec["failure"], rec["failure"]


# ---------------------------------------------------------------- 5. checkpoints carry tensors only


def test_the_job_folder_checkpoints_carry_no_metadata(tmp_path, digits_zoo):
    from safetensors import safe_open
    from safetensors.torch import load_file

    from genbench.entries.submit.job import JobFolder
    mid = digits_zoo.model_ids[0]
    row = digits_zoo.row(mid)
    with safe_open(str(digits_zoo.root / row["checkpoint"]), framework="pt") as f:
        assert f.metadata(), "the zoo's checkpoint carries metadata: the test would show nothing"
    job = JobFolder(tmp_path / "job", entry="a.b", measure_file="/m.py", device="cpu", memory_bytes=1 << 30)
    spec = job.model(digits_zoo, mid)
    for key, column in (("checkpoint", "checkpoint"), ("init", "init_checkpoint")):
        exported = tmp_path / "job" / spec["folder"] / spec[key]
        with safe_open(str(exported), framework="pt") as f:
            assert not f.metadata()
        original, copy = load_file(str(digits_zoo.root / row[column])), load_file(str(exported))
        assert original.keys() == copy.keys() and all(original[k].equal(copy[k]) for k in original)
        assert b"label_noise" not in exported.read_bytes()


# ---------------------------------------------------------------- 9. budgets on the parent's clock


def test_a_worker_that_times_itself_falsely_is_over_budget(tmp_path, digits_zoo):
    """The measure rewrites the clock the worker times it with: the worker reports 0 s, the parent's clock over 1 s."""
    folder = make_sub(tmp_path / "subs", "stopwatch", """
        import time
        sleep = time.sleep
        time.perf_counter = lambda: 0.0

        @gb.register_measure("door.measure")
        def measure(ctx):
            sleep(1.0)
            return 1.0
        """, legit=False)
    rec = run(folder, tmp_path / "r", budget_s=0.3)
    assert rec["status"] == "failed", "an over-budget call was accepted"
    assert "over budget: took 1." in rec["failure"] and "budget 0.3 s" in rec["failure"], rec["failure"]
