"""The sandboxed child of `genbench submit`: it imports the submitted measure.py and, for each call the parent's
harness requests, makes one measure call and sends its raw outcome (the value as returned, or the exception raised,
and the seconds taken) on the result channel; a value the harness's validate_value refuses is sent as its reason,
since only here is the value as returned (a string, a boolean, None, an int too large for a float). It scores nothing
and writes no file: the parent checks the numbers again and does the conformance suite, the scoring, the audit and the
records itself.
Usage: python -m genbench.entries.submit.worker JOB_DIR/job.json REQUEST_FD CHANNEL_FD (the parent writes the job
folder as it goes; see job.py)."""
from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ...numerics import pinned_threads
from .events import IMPORTING, MAX_COMPONENTS, MAX_TEXT, send
from .guard import cap_memory, memory_note


def _own_module(e: BaseException, measure_file: Path) -> str:
    """The fix when measure.py imports a module of its own folder, which is not importable there."""
    name = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    top = str(name).split(".")[0] if name else ""
    folder = measure_file.parent
    if top and ((folder / f"{top}.py").is_file() or (folder / top).is_dir()):
        return (f"; {top} is in the submission's folder, which is not on the import path: put its code in "
                "measure.py")
    return ""


def _where(exc: BaseException, path: Path) -> str:
    """' (measure.py line N)' for the deepest frame of the exception inside measure.py."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" ({path.name} line {frames[-1].lineno})" if frames else ""


def _text(x: Any) -> str:
    """str(x), cut to what the channel carries; a text even when str() itself fails."""
    try:
        s = str(x)
    except Exception:
        s = f"<{type(x).__name__} that cannot be shown>"
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT - 3] + "..."


class JobModel:
    """One exported model of the job folder: its checkpoints and its training set, as the parent described them."""

    def __init__(self, root: Path, spec: dict[str, Any]):
        self.root, self.spec = root / spec["folder"], spec

    def load_model(self, *, init: bool = False, device: str = "cpu") -> Any:
        """The model at its final (or initial) weights, built from the family and architecture the parent gave (the
        exported checkpoint holds tensors only)."""
        from safetensors.torch import load_file

        from ...models import build_model
        name = self.spec.get("init" if init else "checkpoint")
        if name is None:
            raise FileNotFoundError(f"this zoo has no {'initial' if init else 'final'} checkpoint of the model")
        model = build_model(self.spec["family"], self.spec["arch"])
        model.load_state_dict(load_file(str(self.root / name)))
        return model.to(device).eval()

    def training_set(self) -> Any:
        """The model's training set, fresh tensors for every call (a measure may change them in place)."""
        from safetensors.torch import load_file

        from ...zoo.data import TrainingSet
        t = self.spec.get("train")
        if t is None:
            return None
        tensors = load_file(str(self.root / t["file"]))
        return TrainingSet(x=tensors["x"], y=tensors["y"], num_classes=t["num_classes"], data_kind=t["data_kind"],
                           augmentation=t["augmentation"])


def _raised(e: Exception) -> dict[str, Any]:
    """The outcome of a call that raised `e`: its type's name and its message, as the harness words them."""
    name = type(e).__name__
    return {"raised": [name if name.isidentifier() else "Exception", _text(e)]}


def call(m: Any, where: JobModel, task: dict[str, Any], device: str) -> dict[str, Any]:
    """One measure call on one model, as the harness's run_measure makes it; its raw outcome."""
    from ...harness.evaluate import make_context, validate_value
    from ...measures.context import BudgetExceeded
    from ...measures.weights import rescale_relu_pair
    try:
        model = where.load_model(device=device)
        if task["alpha"] is not None:
            model = rescale_relu_pair(model, task["alpha"])
        train = where.training_set()
    except Exception as e:
        return {"raised": ["SandboxError", _text(f"the sandbox could not load the model: {type(e).__name__}: {e}")],
                "seconds": 0.0}
    init: list[Any] = []

    def init_model() -> Any:
        if not init:
            init.append(where.load_model(init=True, device=device))
        return copy.deepcopy(init[0])

    ctx = make_context(m, model=model, train=train, init_model=init_model, memo={}, device=device,
                       seed=task["seed"], budget_s=task["budget_s"])
    start = time.perf_counter()
    try:
        out = m(ctx)
    except BudgetExceeded as e:
        return {"budget": _text(e), "seconds": time.perf_counter() - start}
    except Exception as e:  # a measure's bug is this model's failure, as in the harness
        return {**_raised(e), "seconds": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    try:  # the harness's own check of a returned value (run_measure's): a string, a boolean or None is refused
        value, error = validate_value(m, out)
    except Exception as e:  # as run_measure: e.g. OverflowError for an int too large for a float
        return {**_raised(e), "seconds": seconds}
    if error is not None:
        return {"invalid": _text(error), "seconds": seconds}
    shape = [len(value)] if isinstance(value, list) else []  # a signature's vector, else a scalar's float
    if shape and shape[0] > MAX_COMPONENTS:
        return {"raised": ["ValueError", f"returned {shape[0]} numbers; a value may have at most {MAX_COMPONENTS} "
                                         "numbers"], "seconds": seconds}
    return {"value": value if shape else [value], "shape": shape, "seconds": seconds}


def run(job_file: Path, requests: int, fd: int) -> int:
    """Do the job: import measure.py, then one call per request read from `requests`, every outcome sent on
    channel `fd`, until the parent ends the run."""
    job = json.loads(job_file.read_text())
    import threadpoolctl  # noqa: F401 - loaded before the memory cap, like everything of genbench's
    import torch  # noqa: F401

    from ...harness.evaluate import make_context  # noqa: F401
    from ...measures import get_measure, import_measure_file, list_measures
    from ...measures.weights import rescale_relu_pair  # noqa: F401
    from ...models import build_model  # noqa: F401
    from ...zoo.data import TrainingSet  # noqa: F401
    device, entry, limit = job["device"], job["entry"], int(job["memory_bytes"])
    if not device.startswith("cuda"):  # CUDA reserves huge address ranges: there the sandbox's limit is the cap
        cap_memory(limit)
    builtins = set(list_measures())
    measure_file = Path(job["measure_file"])
    send(fd, stage=IMPORTING)
    try:
        import_measure_file(measure_file)
    except BaseException as e:  # SystemExit and KeyboardInterrupt at import are failures of the submission too
        msg = memory_note(f"{type(e).__name__}: {_text(e)}", limit) + _own_module(e, measure_file)
        send(fd, failed=_text(f"measure.py raised at import{_where(e, measure_file)}: {msg}"))
        return 0
    registered = sorted(n for n in list_measures() if n not in builtins)
    if entry not in registered:
        send(fd, failed=_text(f"measure.py does not register {entry!r} (the entry named in submission.yaml); "
                              f"it registers {registered}"))
        return 0
    m = get_measure(entry)
    send(fd, ready={"kind": m.kind, "needs": list(m.needs), "invariances": list(m.invariances),
                    "transform": m.transform, "higher_means": m.higher_means, "version": m.version,
                    "citation": _text(m.citation), "doc": _text(m.doc), "registered": registered[:1000]})
    with pinned_threads(), os.fdopen(requests, "rb") as asked:  # pinned: the thread count of every record's values
        for line in asked:
            task = json.loads(line)
            if task.get("end"):
                send(fd, done=True)
                return 0
            send(fd, task=task["task"], **call(m, JobModel(job_file.parent, task["model"]), task, device))
    return 0  # the parent went away without ending the run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run(Path(argv[0]), int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    sys.exit(main())
