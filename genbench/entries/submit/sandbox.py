"""The OS sandbox a submitted measure runs in: Debian's bubblewrap (`bwrap`) with a filesystem of its own (the
system, Python and genbench read-only; a private tmpfs; the job folder the parent exported, read-only), no
network, its own PID namespace whose processes all die with it, no capabilities, a scrubbed environment, and a
memory limit over all of its processes (`MemoryLimit.kind` says which is in force).

What it guarantees (Linux, bubblewrap able to make user namespaces):
- the measure sees only /usr (and the top-level links into it), a few files of /etc, the interpreter's folders
  (their site-packages hidden), the environment's own site-packages (not the user's ~/.local one), genbench's
  package folder (not the checkout around it), its own submission folder, and the job folder: each model's
  checkpoints (tensors only, no metadata) and its training set. Not the test split, not a zoo's models.parquet
  (gaps, test accuracies), not $GENBENCH_HOME (zoos, value cache, results), not $HOME, not the repository's records;
- nothing in it can rebuild a zoo's data: the packages that generate a task's data (mnist1d), the datasets bundled
  with packages (scikit-learn's), genbench's dataset builders, importers and recipes are hidden (hidden_paths()),
  and genbench's own generators in zoo/data.py fail without them; the Hub is offline and there is no network;
- nothing outside the sandbox is writable: every bind is read-only, and so are its root and /dev; /tmp and /dev/shm
  are private tmpfs (each sized to the memory cap, and both counted against it: by the cgroup, or in the fallback
  by the parent's watch) that vanish with the sandbox;
- no network: its own network namespace holds only a loopback interface;
- no process outlives it: its own PID namespace (setsid'd and double-forked descendants stay inside and die with
  its init), --die-with-parent (a SIGKILLed or SIGTERMed `genbench submit` takes it along), and the parent kills
  what is left;
- no privilege: its own user namespace (uid 65534), every capability dropped, no further user namespaces;
- a scrubbed environment: PATH, HOME=/tmp, Python's and genbench's own settings, and PASSED_ENV as set; tokens and
  keys (HF_TOKEN, AWS_*, ...) are never passed;
- memory: a cgroup v2 memory.max where a writable v2 hierarchy has the memory controller, else a cgroup v1 memory
  limit where that hierarchy is writable (the kernel then ends whichever of the sandbox's processes goes over it),
  else the documented fallback: RLIMIT_AS on the worker (and, inherited, on what it starts), plus the parent's
  watch of the resident memory of every process of the sandbox, which ends the whole run above the cap.

What it does not guarantee:
- the measure runs in the worker's process, so it can write anything to the result channel: the parent checks
  every message's form and order and ends the run at the first one out of place, but a well-formed forgery is
  only a choice of the measure's own values, which it could have returned anyway;
- the training sets of all the models of a zoo are in one folder: on a zoo whose models train on different subsets
  of the pool (mnist1d-fragility's learning curves), a measure can see examples one model did not train on that
  another did;
- values memorised in measure.py (a table of gaps by checkpoint hash), or a task's generator written into it, look
  like any other values: read the source (`genbench leaderboard add` reviews it, review.py, and refuses what it
  flags unless --reviewed);
- no limit on CPU time beyond the clocks, on the number of processes beyond the memory limit, nor on what a kernel
  exploit could do; the fallback memory watch polls, so a burst can overshoot it briefly;
- with `--unsandboxed`, none of the above: the code runs as you, sees what you see (the scrubbed environment and an
  empty GENBENCH_HOME aside), and its records say `provenance.sandbox: none (--unsandboxed)`."""
from __future__ import annotations

import functools
import glob
import os
import shutil
import signal
import site
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ...paths import PACKAGE

BWRAP = "bwrap"
JOB_DIR = "/job"  # where the exported job folder appears inside the sandbox
SUBMISSIONS_DIR = "/submissions"  # the submission folder appears as /submissions/NAME, read-only
SANDBOX_UID = 65534  # nobody, inside the sandbox's own user namespace
# the environment a sandboxed worker inherits from genbench's own, when set (thread counts, CPU dispatch, GPU
# selection); everything else (tokens, keys, proxies, HOME, GENBENCH_HOME, ...) is dropped
PASSED_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "MKL_CBWR",
              "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "GENBENCH_NATIVE_NUMERICS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_VISIBLE_DEVICES",
              "LD_LIBRARY_PATH", "TZ", "OMP_WAIT_POLICY", "GENBENCH_OMP_WAIT_POLICY")
# the few files of /etc that a Python program needs (the dynamic loader's cache, time zone, users and groups)
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf",
             "alternatives", "mime.types")
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What the sandbox hides of the folders it binds, so that nothing in it can rebuild a zoo's data: the packages that
# generate a task's data (in the environment's site-packages), the datasets bundled with packages, and genbench's own
# dataset builders, recipes and importers (the worker imports none of them; genbench.zoo.data stays, for TrainingSet
# and the augmentations, and its generators fail without the packages hidden here).
HIDDEN_PACKAGES = ("mnist1d",)
HIDDEN_PACKAGE_DATA = ("sklearn/datasets/data", "sklearn/datasets/descr", "sklearn/datasets/images",
                       "sklearn/datasets/tests")
HIDDEN_GENBENCH = ("zoo/build.py", "zoo/train.py", "zoo/hub.py", "zoo/card.py", "zoo/hf_images.py", "zoo/importers",
                   "zoo/recipes")
SUBMISSION_MAX_BYTES = 1 << 20  # a submission folder carries code, not data
SUBMISSION_MAX_FILES = 200


def _bwrap_path() -> str | None:
    return shutil.which(BWRAP)


def scrubbed_env(home: str) -> dict[str, str]:
    """The worker's environment: what Python, torch and genbench need, with `home` as HOME, TMPDIR and an empty
    GENBENCH_HOME (so no zoo, cache or result is found by name), the Hub offline, and PASSED_ENV as set here."""
    venv_bin = str(Path(sys.executable).parent)
    env = {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
           "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           "PYTHONPATH": str(PACKAGE.parent),
           "GENBENCH_HOME": f"{home}/genbench", "MPLCONFIGDIR": f"{home}/matplotlib",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    return env


def _python_dirs() -> list[str]:
    """The folders Python and its packages are read from: the interpreter's prefixes, the environment's own
    site-packages (never the user's ~/.local one), and genbench's own package folder (never the checkout around it,
    which holds result records). `hidden_paths()` says what of them the sandbox hides."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
            str(Path(os.path.realpath(sys.executable)).parent.parent)}
    dirs.update(p for p in site.getsitepackages() if os.path.isdir(p))
    dirs.add(str(PACKAGE))  # the genbench package (an editable install's source)
    out: list[str] = []
    for d in sorted({os.path.realpath(d) for d in dirs} | dirs):
        if not d or not os.path.isdir(d) or any(d == f"/{s}" or d.startswith(f"/{s}/") for s in SYSTEM_DIRS):
            continue  # the system is bound as a whole
        if not any(d.startswith(parent.rstrip("/") + "/") for parent in out):  # sorted: parents come first
            out.append(d)
    return out


def _system_binds() -> list[str]:
    """The read-only system: /usr and the top-level links into it (or folders, where they are not links)."""
    args = []
    for name in SYSTEM_DIRS:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _gpu_binds() -> list[str]:
    """The NVIDIA device files and /sys (the driver reads both), for a worker that runs on CUDA."""
    args = []
    for dev in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", dev, dev]
    if os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]
    return args


def _env_site_packages() -> list[str]:
    """The environment's own site-packages folders (what the venv, or the interpreter without one, imports from)."""
    return [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]


def hidden_paths() -> tuple[list[str], list[str]]:
    """The folders and files of the bound Python folders that the sandbox hides (an empty read-only tmpfs over a
    folder, /dev/null, which cannot be read there, over a file): HIDDEN_PACKAGES, HIDDEN_PACKAGE_DATA and
    HIDDEN_GENBENCH (with their compiled .pyc), and every site-packages folder of the interpreter's prefixes other
    than the environment's own (a venv's base interpreter may carry any package)."""
    own = _env_site_packages()
    dirs: list[str] = []
    files: list[str] = []
    for sp in own:
        dirs += [f"{sp}/{name}" for name in (*HIDDEN_PACKAGES, *HIDDEN_PACKAGE_DATA)]
    for prefix in {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}:
        for sp in glob.glob(f"{prefix}/lib*/python3*/site-packages") + glob.glob(f"{prefix}/lib*/python3*/dist-*"):
            if os.path.realpath(sp) not in own:
                dirs.append(sp)
    for rel in HIDDEN_GENBENCH:
        path = PACKAGE / rel
        if path.suffix == ".py":
            files += [str(path), *map(str, path.parent.glob(f"__pycache__/{path.stem}.*.pyc"))]
        else:
            dirs.append(str(path))
    return ([d for d in dict.fromkeys(dirs) if os.path.isdir(d) and not os.path.islink(d)],
            [f for f in dict.fromkeys(files) if os.path.isfile(f) and not os.path.islink(f)])


def _hide() -> list[str]:
    """The bwrap arguments that hide `hidden_paths()`."""
    dirs, files = hidden_paths()
    args: list[str] = []
    for d in dirs:
        args += ["--size", "4096", "--tmpfs", d, "--remount-ro", d]
    for f in files:
        args += ["--ro-bind", "/dev/null", f]
    return args


def bwrap_argv(*, job_dir: Path, submission: Path, tmp_bytes: int, cuda: bool = False) -> list[str]:
    """The bwrap command line (up to and including `--`) that runs a worker on `job_dir` (seen as /job) and
    `submission` (seen as /submissions/NAME), both read-only. The only writable places are two private tmpfs of
    `tmp_bytes` each, /tmp and /dev/shm (the parent counts both against the memory cap); the root and /dev are
    read-only. The sandbox inherits bwrap's environment: start it with `scrubbed_env()` only."""
    bwrap = _bwrap_path() or BWRAP
    size = str(int(tmp_bytes))
    args = [bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
            "--size", size, "--tmpfs", "/tmp", *_system_binds()]
    for d in _python_dirs():
        args += ["--ro-bind", d, d]
    args += _hide()
    args += ["--ro-bind", str(job_dir), JOB_DIR, "--ro-bind", str(submission), f"{SUBMISSIONS_DIR}/{submission.name}",
             "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", *(_gpu_binds() if cuda else []),
             "--remount-ro", "/dev", "--proc", "/proc", "--remount-ro", "/", "--chdir", "/tmp"]
    return [*args, "--"]


def check_submission_size(folder: Path) -> None:
    """Refuse a submission folder that holds more than SUBMISSION_MAX_BYTES or SUBMISSION_MAX_FILES (links are not
    followed): a submission carries code, not data."""
    from ...errors import GenbenchError
    total, count, largest = 0, 0, (0, "")
    for root, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            try:
                size = os.lstat(path).st_size
            except OSError:
                continue
            total, count = total + size, count + 1
            largest = max(largest, (size, os.path.relpath(path, folder)))
        if total > SUBMISSION_MAX_BYTES or count > SUBMISSION_MAX_FILES:
            break
    if total > SUBMISSION_MAX_BYTES or count > SUBMISSION_MAX_FILES:
        # the walk stops at the first limit passed: what it counted is a lower bound ("more than 201" had 201)
        raise GenbenchError(f"the submission folder {folder} holds at least {count} files of {total / 2**20:.1f} MB "
                            f"(the largest: {largest[1]}, {largest[0] / 2**20:.1f} MB); a submission carries code, "
                            f"not data: at most {SUBMISSION_MAX_BYTES >> 20} MB in {SUBMISSION_MAX_FILES} files. "
                            "Remove the data files (and caches such as __pycache__)")


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why bubblewrap cannot run a sandbox here (not installed, or no user namespaces allowed); None when it can.
    Checked once per process by running `true` in the same sandbox the worker gets."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})"
    if _bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed: `sudo apt-get install bubblewrap` (Debian, Ubuntu)"
    here = Path(__file__).resolve().parent
    argv = bwrap_argv(job_dir=here, submission=here, tmp_bytes=1 << 20)
    try:
        out = subprocess.run([*argv, sys.executable, "-I", "-c", "pass"], capture_output=True, text=True, timeout=60,
                             env=scrubbed_env("/tmp"))
    except (OSError, subprocess.SubprocessError) as e:
        return f"bubblewrap could not start: {e}"
    if out.returncode != 0:
        why = " ".join(out.stderr.split())[-300:] or f"exit status {out.returncode}"
        return f"bubblewrap cannot make a sandbox here ({why}); it needs unprivileged user namespaces or root"
    return None


def bwrap_version() -> str:
    """'bubblewrap X.Y.Z', as the tool says."""
    try:
        out = subprocess.run([_bwrap_path() or BWRAP, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "bubblewrap"
    except (OSError, subprocess.SubprocessError):
        return "bubblewrap"


# ---------------------------------------------------------------- scratch folders


def scratch_dir(kind: str) -> Path:
    """A new private folder in the temp dir, named after this process (genbench-KIND-PID-XXXX); the folders that
    killed runs left behind (their process is gone) are removed first."""
    import tempfile
    root = Path(tempfile.gettempdir())
    for old in root.glob(f"genbench-{kind}-*-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"genbench-{kind}-{os.getpid()}-"))


# ---------------------------------------------------------------- the memory limit


def _mounts(fstype: str, option: str | None = None) -> list[str]:
    """Mount points of filesystems of `fstype` (with `option` among its super options), from mountinfo."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) >= 5 and len(rparts) >= 3 and rparts[0] == fstype:
            if option is None or option in rparts[2].split(","):
                out.append(parts[4])
    return out


def _own_cgroup(controller: str | None) -> str:
    """This process's cgroup path in the hierarchy of `controller` (None: the unified cgroup v2 one)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (controller is None and controllers == "") or (controller and controller in controllers.split(",")):
                return path
    except (OSError, ValueError):
        pass
    return "/"


def _remove_stale(parent: Path) -> None:
    """Remove the empty cgroups that earlier runs left behind when their genbench was killed."""
    try:
        stale = [p for p in parent.glob("genbench-*-*") if not Path(f"/proc/{p.name.split('-')[1]}").exists()]
    except OSError:
        return
    for p in stale:
        try:
            p.rmdir()
        except OSError:
            pass


def _make_cgroup(parents: list[Path], files: dict[str, str]) -> Path | None:
    """A new cgroup under the first parent where one can be made and every file in `files` written."""
    for parent in parents:
        _remove_stale(parent)
        path = parent / f"genbench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
        except OSError:
            continue
        try:
            for name, value in files.items():
                (path / name).write_text(value)
            return path
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass
    return None


@dataclass
class MemoryLimit:
    """How the sandbox's memory is capped: 'cgroup2' (memory.max over every process of the sandbox), 'cgroup1'
    (memory.limit_in_bytes, likewise) or 'rlimit' (RLIMIT_AS on each process, set by the worker once its
    libraries are loaded, plus the parent's watch of the resident memory of all the sandbox's processes)."""

    kind: str
    limit_bytes: int
    path: Path | None = None
    _oom_before: int = field(default=0, repr=False)

    def describe(self) -> str:
        gb = f"{self.limit_bytes / 2**30:g} GB"
        return {"cgroup2": f"cgroup v2 memory.max {gb} over all the worker's processes",
                "cgroup1": f"cgroup v1 memory.limit_in_bytes {gb} over all the worker's processes",
                }.get(self.kind, f"{gb}: RLIMIT_AS per process, and the sandbox's total resident memory watched "
                                 "(no writable memory cgroup here)")

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside the cgroup (a shell puts itself there, then execs it: nothing runs outside)."""
        if self.path is None:
            return argv
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def _count(self, name: str, key: str) -> int:
        try:
            for line in (self.path / name).read_text().splitlines():  # type: ignore[operator]
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError, TypeError):
            pass
        return 0

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the cgroup's limit (0 without a cgroup)."""
        if self.kind == "cgroup2":
            return self._count("memory.events", "oom_kill")
        if self.kind == "cgroup1":
            return self._count("memory.oom_control", "oom_kill")
        return 0

    def kill_all(self) -> None:
        """SIGKILL every process left in the cgroup."""
        if self.path is None:
            return
        if (self.path / "cgroup.kill").exists():
            try:
                (self.path / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for _ in range(20):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def close(self) -> None:
        """Kill what is left and remove the cgroup."""
        if self.path is None:
            return
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                import time
                time.sleep(0.05)


def memory_limit(limit_bytes: int) -> MemoryLimit:
    """The strongest memory limit this machine allows over all of a sandbox's processes: a cgroup v2 child with
    memory.max (and no swap), else a cgroup v1 memory child, else RLIMIT_AS per process plus the parent's watch."""
    limit = str(int(limit_bytes))
    for mount in _mounts("cgroup2"):
        own = Path(mount) / _own_cgroup(None).lstrip("/")
        parents = [p for p in (own, own.parent) if p.is_dir()]
        if not any("memory" in _read(p / "cgroup.subtree_control").split() for p in parents):
            continue
        path = _make_cgroup(parents, {"memory.max": limit})
        if path is not None:
            try:
                (path / "memory.swap.max").write_text("0")
            except OSError:
                pass
            return MemoryLimit("cgroup2", int(limit_bytes), path)
    for mount in _mounts("cgroup", "memory"):
        own = Path(mount) / _own_cgroup("memory").lstrip("/")
        parents = [p for p in dict.fromkeys((own, Path(mount))) if p.is_dir()]
        path = _make_cgroup(parents, {"memory.limit_in_bytes": limit})
        if path is not None:
            try:
                (path / "memory.memsw.limit_in_bytes").write_text(limit)
            except OSError:
                pass
            return MemoryLimit("cgroup1", int(limit_bytes), path)
    return MemoryLimit("rlimit", int(limit_bytes))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
