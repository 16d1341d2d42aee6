"""The sandbox holds: each escape a hostile submitter tried is planted as a measure.py and shown
contained, with a readable failure record or an unaffected score, and every other file unchanged.

The submitted code runs under bubblewrap and only computes values; the parent scores, audits and writes. These
tests skip where bubblewrap cannot run (they fail instead when CI is set); test_submit.py covers the rest."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from genbench.errors import GenbenchError
from genbench.entries.submit import api, submit, supervise, verify_submission
from genbench.entries.submit.events import Protocol, ProtocolError
from genbench.entries.submit.sandbox import PASSED_ENV, sandbox_problem, scrubbed_env

REPO = Path(__file__).resolve().parents[1]
FAST = dict(audit_zoo=None, n_boot=20, budget_s=30, device="cpu")
LEGIT = '''
@gb.register_measure("{entry}")
def measure(ctx):
    return float(sum(p.detach().abs().sum() for p in ctx.model.parameters()))
'''


NO_SANDBOX_NEEDED = ("test_the_channel_", "test_the_job_folder_", "test_verify_refuses_", "test_submit_refuses_")


def require_sandbox(request, exempt: tuple[str, ...]) -> None:
    """Skip a test that needs bubblewrap where it cannot run (fail it when CI is set), unless its name is exempt."""
    if request.node.name.startswith(exempt):
        return
    problem = sandbox_problem()
    if problem is not None:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{problem} and CI is set: the sandbox tests must run")
        pytest.skip(problem)


@pytest.fixture(autouse=True)
def sandbox(request):
    require_sandbox(request, NO_SANDBOX_NEEDED)


def make_sub(root: Path, name: str, body: str, entry: str = "evil.measure", legit: bool = True) -> Path:
    """A submission folder: the genbench import, `body`, and (unless `legit` is False) an honest measure."""
    folder = root / name
    folder.mkdir(parents=True)
    code = "import genbench as gb\n" + textwrap.dedent(body) + (LEGIT.format(entry=entry) if legit else "")
    (folder / "measure.py").write_text(code)
    meta = {"title": "t", "authors": ["A. Author"], "contact": "a@example.org", "paper_url": None,
            "licence": "MIT", "entry": entry, "zoos": ["digits-mlp"]}
    (folder / "submission.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in meta.items()) + "\n")
    return folder


def run(folder: Path, results: Path, output: list[str] | None = None, **kw) -> dict:
    """Submit on the digits zoo; the record written."""
    echo = (lambda text, kind: output.append(text)) if output is not None else None
    (path,) = submit(folder, ["digits-mlp"], results_root=results, echo=echo, **{**FAST, **kw})
    return json.loads(path.read_text())


def snapshot(*roots: Path) -> dict[str, str]:
    """sha256 of every file under `roots` (symbolic links as their target's text), but the logs the parent writes
    of a submission's output (GENBENCH_HOME/logs)."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.exists() else ():
            if p.relative_to(root).parts[0] == "logs":
                continue
            if p.is_symlink():
                out[str(p)] = "link:" + os.readlink(p)
            elif p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def alive(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `marker`."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace")
                    and (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


# ---------------------------------------------------------------- the channel and the job folder


def test_the_channel_takes_the_workers_messages_in_order_and_nothing_else():
    p = Protocol()
    meta = {"kind": "scalar", "needs": [], "invariances": [], "transform": "select", "higher_means": None,
            "version": 1, "citation": "", "doc": "", "registered": ["a.b"]}
    feed = lambda x: p.feed((json.dumps(x) + "\n").encode())  # noqa: E731
    assert [feed(x) for x in ({"stage": "importing measure.py"}, {"ready": meta})] == ["importing", "ready"]
    p.ask(), p.ask()
    assert feed({"task": 0, "value": [1.5], "shape": [], "seconds": 0.1}) == "task"
    assert feed({"task": 1, "raised": ["ValueError", "bad"], "seconds": 0.0}) == "task"
    p.end()
    assert feed({"done": True}) == "done"
    assert p.results[0] == {"value": [1.5], "shape": [], "seconds": 0.1}
    bad = [b'@@genbench {"call": "end"}\n', b'{"done": true}\n', b'{"task": 1, "value": [1], "shape": [], '
           b'"seconds": 0}\n', b'{"task": 0, "value": [1, 2], "shape": [], "seconds": 0}\n',
           b'{"task": 0, "value": [1' + b"0" * 400 + b'], "shape": [], "seconds": 0}\n',
           b'{"task": 0, "value": [1], "shape": [], "seconds": -1}\n', b'{"task": 0, "raised": ["a b", "x"], '
           b'"seconds": 0}\n', b'{"task": 0}', b"[" * 100000 + b"\n", b'{"task": 0, "skipped": true}\n']
    for line in bad:
        p = Protocol()
        p.feed(b'{"stage": "importing measure.py"}\n')
        p.feed((json.dumps({"ready": meta}) + "\n").encode())
        p.ask(), p.ask()
        with pytest.raises(ProtocolError):
            p.feed(line)
    p = Protocol()  # a result nobody asked for, and 'done' before the parent ended the run
    p.feed(b'{"stage": "importing measure.py"}\n')
    p.feed((json.dumps({"ready": meta}) + "\n").encode())
    with pytest.raises(ProtocolError, match="not asked for"):
        p.feed(b'{"task": 0, "value": [1], "shape": [], "seconds": 0}\n')
    p = Protocol()
    p.feed(b'{"stage": "importing measure.py"}\n')
    p.feed((json.dumps({"ready": meta}) + "\n").encode())
    with pytest.raises(ProtocolError, match="before the run ended"):
        p.feed(b'{"done": true}\n')
    p = Protocol()
    p.feed(b'{"stage": "importing measure.py"}\n')
    with pytest.raises(ProtocolError, match="kind"):
        p.feed((json.dumps({"ready": {**meta, "kind": "vector"}}) + "\n").encode())


def test_the_job_folder_holds_checkpoints_and_training_sets_only(tmp_path, digits_zoo):
    from safetensors.torch import load_file

    from genbench.entries.submit.job import JobFolder
    job = JobFolder(tmp_path / "job", entry="a.b", measure_file="/m.py", device="cpu", memory_bytes=1 << 30)
    assert sorted(p.name for p in (tmp_path / "job").rglob("*")) == ["job.json"]  # nothing until asked for
    specs = [job.model(digits_zoo, mid) for mid in digits_zoo.model_ids]
    assert job.model(digits_zoo, digits_zoo.model_ids[0]) is specs[0]  # exported once
    names = sorted(p.name for p in (tmp_path / "job").rglob("*") if p.is_file())
    trains = sorted({s["train"]["file"] for s in specs})
    assert names == sorted(["job.json", *trains]
                           + [f"m{j}{s}.safetensors" for j in range(len(digits_zoo)) for s in ("", ".init")])
    text = (tmp_path / "job" / "job.json").read_text() + json.dumps(specs)
    assert "gap" not in text and "test" not in text and digits_zoo.model_ids[0] not in text
    assert digits_zoo.name not in text
    pool = digits_zoo.pool
    for name in trains:
        for t in load_file(str(tmp_path / "job" / "z0" / name)).values():
            assert t.shape[0] <= len(pool.x_train)
            assert not (t.shape == pool.x_test.shape and t.float().allclose(pool.x_test))
            assert not (t.shape == pool.y_test.shape and t.equal(pool.y_test))


def test_the_parents_record_equals_the_in_process_harnesss(tmp_path, digits_zoo):
    """Values the parent's harness asked of the sandbox give the record the harness makes with the measure imported
    in its own process: scores, per-model values, the conformance suite and the audit (its values and its
    rescaling control come from the sandbox too)."""
    from genbench.entries.run import run_entry
    from genbench.measures.files import import_measure_file
    from genbench.measures.registry import unregister_measure
    body = """
        import torch

        @gb.register_measure("replay.margin", needs=("train_data",), invariances=("relu_rescale",))
        def margin(ctx):
            x, y = ctx.subsample(200)
            out = ctx.model(x).detach()
            top = out.gather(1, y[:, None]).squeeze(1)
            other = out.clone().scatter_(1, y[:, None], float("-inf")).max(1).values
            return float(torch.quantile(top - other, 0.25))  # of the function only: invariant to the rescaling
        """
    folder = make_sub(tmp_path / "subs", "replayed", body, entry="replay.margin", legit=False)
    kw = dict(audit_zoo="digits-mlp", n_boot=20, budget_s=30, device="cpu")
    rec = run(folder, tmp_path / "r", **kw)
    assert rec["status"] == "ok", rec["failure"]
    import_measure_file(folder / "measure.py")
    try:
        direct = run_entry("replay.margin", digits_zoo, name="replayed", cache=False, **kw)
    finally:
        unregister_measure("replay.margin")
    for key in ("status", "kind", "scores", "values", "audit"):
        assert rec[key] == direct[key], key
    assert len(rec["audit"]["control"]) == 8  # 4 models, each rescaled by 0.1 and by 10


# ---------------------------------------------------------------- test data is out of reach


@pytest.mark.parametrize("route", ["safetensors", "symlink", "models.parquet", "frames"])
def test_the_test_split_and_the_gaps_are_out_of_reach(tmp_path, home, digits_zoo, route):
    """Each route that once gave k-fold R^2 = 1.0 fails inside the sandbox, readably."""
    data, table = digits_zoo.root / "dataset.safetensors", digits_zoo.root / "models.parquet"
    bodies = {
        "safetensors": f"""
            from safetensors.torch import load_file
            stolen = load_file({str(data)!r})["x_test"]
            """,
        "symlink": """
            from pathlib import Path
            stolen = open(Path(__file__).parent / "data.safetensors", "rb").read()
            """,
        "models.parquet": f"""
            import pandas as pd
            stolen = pd.read_parquet({str(table)!r})["gap"]
            """,
        "frames": """
            import gc, inspect
            import pandas as pd

            def steal():
                frames = [f.frame.f_locals for f in inspect.stack()]
                objects = gc.get_objects() + [v for f in frames for v in f.values()]
                tables = [o for o in objects if isinstance(o, pd.DataFrame) and "gap" in o.columns]
                tests = [o for o in objects if type(o).__name__ in ("Zoo", "Pool")]
                if tables or tests:
                    return tables, tests
                raise LookupError("no zoo table and no test data in reach")
            """,
    }
    folder = make_sub(tmp_path / "subs", "thief", bodies[route], legit=route != "frames")
    if route == "symlink":
        (folder / "data.safetensors").symlink_to(data)
    if route == "frames":
        (folder / "measure.py").write_text((folder / "measure.py").read_text() + textwrap.dedent("""
            @gb.register_measure("evil.measure")
            def measure(ctx):
                steal()
                return 1.0
            """))
    before = snapshot(home, folder)
    rec = run(folder, tmp_path / "r")
    assert rec["status"] == "failed", "the measure reached the test data"
    if route == "frames":
        assert rec["failure"] == ("failed the conformance suite: runs, finite, right kind of output: LookupError: no "
                                  "zoo table and no test data in reach (on all 2 models checked)"), rec["failure"]
    else:  # the files are simply not there
        assert rec["failure"].startswith("measure.py raised at import (measure.py line 4): FileNotFoundError"), \
            rec["failure"]
        assert str(digits_zoo.root) in rec["failure"] or "data.safetensors" in rec["failure"]
    assert snapshot(home, folder) == before


# ---------------------------------------------------------------- the parent alone scores and writes


def test_monkeypatching_the_scorer_changes_no_number(tmp_path, digits_zoo):
    clean = run(make_sub(tmp_path / "subs", "clean", ""), tmp_path / "r")
    patched = run(make_sub(tmp_path / "subs", "patched", """
        import genbench.scoring, genbench.scoring.scores, genbench.entries.run as records
        from genbench.scoring.scores import Scores

        def fake(*args, **kwargs):
            raise SystemExit("scored by the submission")
        genbench.scoring.score = genbench.scoring.scores.score = fake
        records.run_entry = records.failure_record = fake
        """), tmp_path / "r2")  # its own results folder: one entry, one folder
    assert clean["status"] == patched["status"] == "ok", patched["failure"]
    assert patched["scores"] == clean["scores"] and patched["values"] == clean["values"]


def test_atexit_hooks_and_writes_outside_the_sandbox_change_no_file(tmp_path, home, digits_zoo):
    """The record is written by the parent after the sandbox is gone; nothing outside the sandbox is writable."""
    results = tmp_path / "r"
    other = results / "digits-mlp" / "someone_else.json"
    other.parent.mkdir(parents=True)
    other.write_text('{"name": "someone_else"}')
    cache = home / "cache" / "values"
    cache.mkdir(parents=True, exist_ok=True)
    shipped = REPO / "leaderboard" / "results" / "planted.json"
    targets = [results / "digits-mlp" / "vandal.json", other, results / "digits-mlp" / "planted.json",
               cache / "poison.json", digits_zoo.root / "models.parquet", digits_zoo.root / "zoo.json", shipped,
               tmp_path / "subs" / "vandal" / "measure.py", Path("/tmp/genbench-escaped")]
    folder = make_sub(tmp_path / "subs", "vandal", f"""
        import atexit, os
        TARGETS = {[str(t) for t in targets]!r}

        def vandalize():
            for t in TARGETS:
                try:
                    os.makedirs(os.path.dirname(t), exist_ok=True)
                    with open(t, "w") as f:
                        f.write('{{"status": "ok", "scores": {{"values": {{"kfold_r2": 1.0}}}}}}')
                except OSError:
                    pass
        vandalize()
        atexit.register(vandalize)
        """, entry="vandal.measure")
    before = snapshot(home, tmp_path / "subs", results)
    rec = run(folder, results)
    assert rec["status"] == "ok" and rec["scores"]["values"]["kfold_r2"] < 0.99
    after = snapshot(home, tmp_path / "subs", results)
    assert set(after) - set(before) == {str(results / "digits-mlp" / "vandal.json")}
    assert {k: v for k, v in after.items() if k in before} == before
    assert not Path("/tmp/genbench-escaped").exists() and not shipped.exists()


# ---------------------------------------------------------------- processes, memory, clocks


def test_setsid_descendants_die_with_the_sandbox(tmp_path, digits_zoo):
    marker = "4321.5"
    folder = make_sub(tmp_path / "subs", "daemon", f"""
        import os, subprocess
        subprocess.Popen(["setsid", "sleep", "{marker}"])
        if os.fork() == 0:  # a classic daemon: fork, setsid, fork again
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "{marker}1"])
            os._exit(0)
        """)
    rec = run(folder, tmp_path / "r")
    assert rec["status"] == "ok", rec["failure"]
    time.sleep(0.5)
    assert not alive(marker)


def test_fake_protocol_lines_on_stdout_stop_no_clock(tmp_path, digits_zoo, monkeypatch):
    monkeypatch.setattr(supervise, "HANG_GRACE_S", 1.0)
    folder = make_sub(tmp_path / "subs", "liar", """
        import time

        @gb.register_measure("evil.measure")
        def measure(ctx):
            print('@@genbench {"call": "end"}', flush=True)
            print('@@genbench {"stage": "done"}', flush=True)
            time.sleep(3600)
        """, legit=False)
    start = time.monotonic()
    rec = run(folder, tmp_path / "r", budget_s=1)
    assert rec["failure"].startswith("hung: one call of evil.measure ran for more than 2 s (its per-model budget is "
                                     "1 s) while running the conformance suite on 2 models on digits-mlp")
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("forgery, expected", [
    ("b'garbage\\n'", "a line that is not JSON"),
    ("b'{\"done\": true}\\n'", "'done' after 0 of"),
    ("b'{\"task\": 0, \"value\": [1.0], \"shape\": [], \"seconds\": 0}\\n{\"task\": 7, \"value\": [1.0], "
     "\"shape\": [], \"seconds\": 0}\\n'", "a result for task 7 where task 1 was expected"),
])
def test_forged_messages_on_the_result_channel_end_the_run(tmp_path, digits_zoo, forgery, expected):
    """The measure runs in the worker's process, so it can find the channel (the worker's last argument) and
    write to it: whatever it writes is checked like everything else from the worker, and it can only ever
    choose its own values."""
    folder = make_sub(tmp_path / "subs", "forger", f"""
        import os, sys

        @gb.register_measure("evil.measure")
        def measure(ctx):
            os.write(int(sys.argv[-1]), {forgery})
            return 1.0
        """, legit=False)
    rec = run(folder, tmp_path / "r")
    assert rec["failure"].startswith("broke the result protocol while running the conformance suite"), rec["failure"]
    assert expected in rec["failure"]


def test_a_hang_at_import_has_its_own_budget(tmp_path, digits_zoo, monkeypatch):
    monkeypatch.setattr(supervise, "IMPORT_GRACE_S", 2.0)
    folder = make_sub(tmp_path / "subs", "sleeper", """
        import time
        time.sleep(3600)
        """)
    start = time.monotonic()
    rec = run(folder, tmp_path / "r", budget_s=1)  # the overall limit would be 10 minutes and more
    assert rec["failure"] == ("hung at import: importing measure.py took more than 3 s (the per-model budget plus "
                              "2 s); the worker was killed")
    assert time.monotonic() - start < 60


# ---------------------------------------------------------------- network and environment


def test_no_network_in_or_out(tmp_path, digits_zoo):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        listen_port = s.getsockname()[1]  # a free port for the submission to listen on
    connections, reached = [], []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                connections.append(server.accept())
            except OSError:
                pass
            try:
                socket.create_connection(("127.0.0.1", listen_port), timeout=0.2).close()
                reached.append(listen_port)
            except OSError:
                pass

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    folder = make_sub(tmp_path / "subs", "caller", f"""
        import socket, time
        errors = []
        for address in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
            try:
                socket.create_connection(address, timeout=3).close()
                errors.append(f"reached {{address}}")
            except OSError as e:
                errors.append(f"{{address}}: {{e}}")
        listener = socket.socket()
        listener.bind(("0.0.0.0", {listen_port}))
        listener.listen()
        time.sleep(2)  # listening, for anyone outside to connect
        raise RuntimeError("; ".join(errors))
        """)
    try:
        rec = run(folder, tmp_path / "r")
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
    assert not connections and not reached
    assert "RuntimeError" in rec["failure"] and "reached" not in rec["failure"]
    assert f"('127.0.0.1', {port}): [Errno 111] Connection refused" in rec["failure"]  # its own loopback only
    assert rec["failure"].count("Network is unreachable") == 2, rec["failure"]


def test_the_environment_is_scrubbed(tmp_path, digits_zoo, monkeypatch):
    for key in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "KMP_DUPLICATE_LIB_OK"):
        monkeypatch.setenv(key, "secret-value")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    folder = make_sub(tmp_path / "subs", "snoop", """
        import os
        raise RuntimeError("ENV " + " ".join(sorted(f"{k}={v}" for k, v in os.environ.items())))
        """)
    rec = run(folder, tmp_path / "r")
    env = dict(item.split("=", 1) for item in rec["failure"].split("ENV ", 1)[1].split())
    assert "secret-value" not in rec["failure"]
    assert env["OMP_NUM_THREADS"] == "1" and env["HOME"] == "/tmp" and env["GENBENCH_HOME"] == "/tmp/genbench"
    # bwrap sets PWD; threadpoolctl, imported by the worker to pin the BLAS threads, sets KMP_DUPLICATE_LIB_OK itself
    assert env["KMP_DUPLICATE_LIB_OK"] == "True"  # its own value: the host's did not get in
    assert set(env) <= set(scrubbed_env("/tmp")) | set(PASSED_ENV) | {"PWD", "KMP_DUPLICATE_LIB_OK"}, sorted(env)


# ---------------------------------------------------------------- killing submit, and no sandbox at all


def test_submit_refuses_to_run_unsandboxed_unless_asked(tmp_path, digits_zoo, monkeypatch):
    monkeypatch.setattr(api, "sandbox_problem", lambda: "bubblewrap (bwrap) is not installed")
    folder = make_sub(tmp_path / "subs", "plain", "")
    with pytest.raises(GenbenchError, match=r"cannot sandbox the submission: bubblewrap \(bwrap\) is not installed.*"
                                            r"pass --unsandboxed"):
        run(folder, tmp_path / "r")
    assert not (tmp_path / "r").exists()
    rec = run(folder, tmp_path / "r", unsandboxed=True)
    assert rec["status"] == "ok" and rec["provenance"]["sandbox"] == "none (--unsandboxed)"


# ---------------------------------------------------------------- verify


def test_verify_refuses_names_that_are_paths_and_runs_nothing(tmp_path, digits_zoo, monkeypatch):
    from genbench.entries.verify import verify_record
    monkeypatch.setattr(api, "run_submission", lambda *a, **k: pytest.fail("verify ran a submission"))
    rec = {"schema": 3, "name": "../../etc", "measure": "x.y", "builtin": False, "status": "ok",
           "submission": {"path": "/tmp"}, "zoo": {"name": "digits-mlp", "table_sha256": digits_zoo.table_sha256},
           "provenance": {}, "scores": {"values": {}}}  # well-formed: only its names are wrong
    path = tmp_path / "r.json"
    for name, zoo, message in (("../../etc", "digits-mlp", "is not a submission folder's name"),
                               ("nowhere", "digits-mlp", "--submissions DIR names another trusted folder, the one "
                                "that holds nowhere/"),
                               ("ok_name", "../../zoos/x", "is not a plain name; verify opens no such path")):
        (tmp_path / "subs" / "ok_name").mkdir(parents=True, exist_ok=True)
        (tmp_path / "subs" / "ok_name" / "measure.py").write_text("")
        (tmp_path / "subs" / "ok_name" / "submission.yaml").write_text(
            'title: t\nauthors: ["A"]\ncontact: a@b.org\npaper_url: null\nlicence: MIT\nentry: x.y\n')
        path.write_text(json.dumps({**rec, "name": name, "zoo": {**rec["zoo"], "name": zoo}}))
        v = verify_submission(path, submissions=tmp_path / "subs", device="cpu")
        assert not v.ok and message in " ".join(v.problems), v.problems
        v = verify_record(path, submissions=tmp_path / "subs", device="cpu")  # the same path: no other way in
        assert not v.ok and message in " ".join(v.problems), v.problems


# ---------------------------------------------------------------- the slowest (about 40 s): -k "not TestSlow"


class TestSlow:
    """A CLI in a subprocess killed, a memory hog, verify's two full re-runs."""

    @pytest.mark.parametrize("fallback", [False, True])
    def test_the_memory_cap_covers_setsid_grandchildren(self, tmp_path, digits_zoo, monkeypatch, fallback):
        """With a memory cgroup the kernel ends the hog; with the fallback (forced here) the parent's watch of the
        whole sandbox's resident memory ends the run."""
        from genbench.entries.submit.sandbox import MemoryLimit
        if fallback:
            monkeypatch.setattr(api, "memory_limit", lambda limit: MemoryLimit("rlimit", limit))
        folder = make_sub(tmp_path / "subs", "hog", """
            import subprocess, sys, time
            HOG = ("import numpy as np, time; a = np.ones(200 * 2**20); "
                   "print('HOG HOLDS 1.6 GB', flush=True); time.sleep(60)")
            hog = subprocess.Popen(["setsid", sys.executable, "-c", HOG])  # setsid execs: this is the hog itself
            try:  # give it time to allocate; a memory cgroup's kernel ends it sooner
                hog.wait(timeout=8)
            except subprocess.TimeoutExpired:
                pass
            """)
        output: list[str] = []
        probe = api.memory_limit(1 << 30)
        probe.close()
        rec = run(folder, tmp_path / "r", output=output, memory_gb=1)
        if probe.kind.startswith("cgroup"):  # the kernel ends the hog alone; the measure carries on
            assert "HOG HOLDS 1.6 GB" not in output and rec["status"] == "ok", (output, rec["failure"])
        else:  # the parent's watch of the sandbox's resident memory ends the whole run
            assert rec["failure"].startswith("exceeded the memory cap of 1 GB (resident"), rec["failure"]
        assert not alive("HOG HOLDS")

    @pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
    def test_killing_submit_kills_the_sandbox(self, tmp_path, home, digits_zoo, sig):
        marker = f"777.{int(sig)}"
        folder = make_sub(tmp_path / "subs", "orphan", f"""
            import subprocess, time
            subprocess.Popen(["setsid", "sleep", "{marker}"])
            time.sleep(3600)
            """)
        cmd = [sys.executable, "-m", "genbench", "submit", str(folder), "--zoo", "digits-mlp", "--results",
               str(tmp_path / "r"), "--no-audit", "--device", "cpu"]
        proc = subprocess.Popen(cmd, env={**os.environ, "GENBENCH_HOME": str(home)}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not alive(marker) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert alive(marker), "the submission never started"
            proc.send_signal(sig)
            proc.wait(timeout=30)
            deadline = time.monotonic() + 10
            while alive(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(marker)
            from genbench.entries.submit.sandbox import scratch_dir
            for kind in ("submit", "home"):  # what the killed run left in the temp dir goes with the next run
                scratch_dir(kind).rmdir()
                assert not list(Path(tempfile.gettempdir()).glob(f"genbench-{kind}-{proc.pid}-*"))
        finally:
            proc.kill()

    def test_verify_reruns_from_the_trusted_folder_and_compares_every_field(self, tmp_path, digits_zoo):
        subs, results = tmp_path / "subs", tmp_path / "r"
        folder = make_sub(subs, "honest", "")
        rec = run(folder, results)
        path = results / "digits-mlp" / "honest.json"
        v = verify_submission(path, submissions=subs, device="cpu")
        assert v.ok, (v.problems, v.differences)

        # a forged record: metadata, provenance and one value edited, and its path pointing at other code
        elsewhere = make_sub(tmp_path / "elsewhere", "honest", f"""
            open({str(tmp_path / "ran-elsewhere")!r}, "w").write("x")
            """)
        forged = json.loads(path.read_text())
        forged["submission"].update(authors=["Someone Else"], path=str(elsewhere))
        forged["provenance"].update(git_commit="0" * 40, device="cuda", command="genbench submit x", sandbox="bwrap")
        forged.update(builtin=True, citation="Famous et al.")
        forged["values"]["value"][0] += 1.0
        forged["provenance"]["seconds"] = 1e6  # a timing: not compared
        path.write_text(json.dumps(forged))
        v = verify_submission(path, submissions=subs, device="cpu")
        fields = {f for f, _, _ in v.differences}
        assert {"submission.authors[0]", "submission.path", "provenance.git_commit", "provenance.device",
                "provenance.command", "provenance.sandbox", "builtin", "citation", "values.value[0]"} <= fields
        assert "provenance.seconds" not in fields and not (tmp_path / "ran-elsewhere").exists()
        assert rec["submission"]["path"] == str(folder)
        from genbench.entries.verify import verify_record
        v = verify_record(path, submissions=subs, device="cpu", scores_only=True)  # re-run without its audit
        assert [f for f, _, _ in v.differences] == ["values.value[0]"] and not (tmp_path / "ran-elsewhere").exists()
