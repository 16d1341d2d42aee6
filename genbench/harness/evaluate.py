"""evaluate(measures, zoo): every measure on every model, streamed one model at a time, cached by
content, each failure recorded for its model while the run goes on."""
from __future__ import annotations

import copy
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import remote
from ..defaults import BUDGET_S, SEED
from ..device import resolve_device
from ..errors import GenbenchError, check_seconds, check_seed
from ..measures.batched import shape_key
from ..measures.context import BudgetExceeded, MeasureContext
from ..measures.registry import Measure, resolve_measures
from ..numerics import pinned_threads
from ..paths import values_cache_dir
from ..text import excerpt
from ..zoo.data import TrainingSet
from ..zoo.storage import Zoo, load_zoo, open_zoo_ref
from .cache import ValueCache



def validate_value(m: Measure, out: Any) -> tuple[Any, str | None]:
    """The value as a float (scalar) or list (signature), or the reason it is not acceptable."""
    if out is None:
        return None, "returned None (a `return` forgotten?); a measure must return a finite number or array"
    if isinstance(out, (str, bytes)):  # np.asarray would read "1.5" as the number
        return None, f"returned a string ({excerpt(out)}); a measure must return a finite number or array"
    if isinstance(out, (bool, np.bool_)) or getattr(out, "dtype", None) in (bool, np.bool_, torch.bool):
        return None, "returned a boolean (True/False); a measure must return a finite number or array"
    try:
        raw = np.asarray(out.detach().cpu() if isinstance(out, torch.Tensor) else out)
        items = np.asarray(out, dtype=object).ravel() if isinstance(out, (list, tuple)) else ()  # [True, 2.0]: float64
        if raw.dtype.kind in "USb" or any(v is None or isinstance(v, (str, bytes, bool, np.bool_)) for v in items) \
                or (raw.dtype.kind == "O" and any(v is None or isinstance(v, (str, bytes, bool)) for v in raw.ravel())):
            return None, (f"returned a {type(out).__name__} holding strings, booleans or None; a measure must return "
                          "a finite number or array")  # float64 would read "1.5" as 1.5, True as 1 and None as nan
        if raw.dtype.kind == "c":  # float64 would drop the imaginary part with only numpy's warning
            return None, "returned complex numbers; a measure must return a finite real number or array"
        arr = raw.astype(np.float64)
    except OverflowError as e:  # 10 ** 400: a number no float holds
        return None, f"OverflowError: {e}"
    except (TypeError, ValueError):
        return None, f"returned a non-numeric value of type {type(out).__name__}"
    if m.kind == "scalar" and arr.size != 1:
        return None, f"wrong shape: a scalar measure returned shape {tuple(arr.shape)}"
    if m.kind == "signature" and (arr.ndim != 1 or arr.size == 0):
        return None, f"wrong shape: a signature must be a non-empty 1-D vector, got shape {tuple(arr.shape)}"
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr.ravel()))
        return None, f"non-finite value ({arr.ravel()[bad[0]]}) at component(s) {bad.tolist()[:5]}"
    return (float(arr.ravel()[0]) if m.kind == "scalar" else arr.tolist()), None


def run_measure(m: Measure, ctx: MeasureContext, shared_s: float = 0.0) -> dict[str, Any]:
    """Call one measure on one model; return {"value", "error", "seconds", "cache"} with any failure named.
    `shared_s`: this model's share of the measure's batched work (already done), charged to its seconds."""
    start = time.perf_counter() - shared_s
    value, error, cacheable = None, None, True
    try:
        value, error = validate_value(m, m(ctx))
    except BudgetExceeded as e:
        error, cacheable = f"over budget: {e}", False
    except Exception as e:  # a measure's bug must not stop the run: it becomes this model's failure
        error = f"{type(e).__name__}: {e}"
    seconds = time.perf_counter() - start
    if error is None and ctx.budget_s is not None and seconds > ctx.budget_s:
        value, error, cacheable = None, f"over budget: took {seconds:.1f} s, budget {ctx.budget_s:g} s", False
    return {"value": value, "error": error, "seconds": seconds, "cache": cacheable}


def _load(zoo: Zoo, model_id: str, *, device: str = "cpu", alpha: float | None = None
          ) -> tuple[torch.nn.Module | None, TrainingSet | None, str | None]:
    """The model (rescaled by `alpha` around a ReLU when given) and its training set, or why they cannot be had."""
    from ..measures.weights import rescale_relu_pair
    what = f"load model {model_id!r}"
    try:
        model = zoo.load_model(model_id, device=device)
        train = zoo.training_set(model_id) if zoo.has_training_data else None
        if alpha is not None:
            what = f"rescale model {model_id!r} by {alpha:g} around a ReLU"
            model = rescale_relu_pair(model, alpha)
    except Exception as e:
        return None, None, f"could not {what}: {e}"
    return model, train, None


def reads_data(m: Measure) -> bool:
    """Whether a measure reads its model's training data (directly or augmented)."""
    return "train_data" in m.needs or "augment" in m.needs


def no_training_data(m: Measure, zoo: Zoo) -> str | None:
    """Why measure `m` cannot run on `zoo` (one line): it reads training data the zoo does not have; else None.
    Every executor asks this before a call."""
    if zoo.has_training_data or not reads_data(m):
        return None
    return f"{m.name} needs the training data, which zoo {zoo.name!r} does not have ({zoo.no_data_reason})"


def load_for_call(zoo: Zoo, model_id: str, *, alpha: float | None = None) -> str | None:
    """Why a call on this model would fail before the measure runs (as evaluate_one says it), or None."""
    return _load(zoo, model_id, alpha=alpha)[2]


def evaluate_one(zoo: Zoo, model_id: str, measures: list[Measure], *, device: str = "cpu", seed: int = SEED,
                 budget_s: float | None = BUDGET_S, alpha: float | None = None) -> dict[str, dict[str, Any]]:
    """All `measures` on one model, sharing one memo (e.g. one margin pass) between them; with `alpha`, on the
    model rescaled by alpha and 1/alpha around a ReLU (the same function)."""
    model, train, problem = _load(zoo, model_id, device=device, alpha=alpha)
    if problem is not None:
        return {m.name: {"value": None, "error": problem, "seconds": 0.0, "cache": False} for m in measures}
    return Loaded(zoo, model_id, model, train, device).run(measures, seed=seed, budget_s=budget_s)


class Loaded:
    """One model in memory with its training set, its lazily loaded init model and the memo its measures share."""

    def __init__(self, zoo: Zoo, model_id: str, model: torch.nn.Module, train: TrainingSet | None, device: str):
        self.zoo, self.model_id, self.model, self.train, self.device = zoo, model_id, model, train, device
        self.memo: dict[Any, Any] = {}
        self._init: list[torch.nn.Module] = []

    def init_model(self) -> torch.nn.Module:
        if not self._init:
            self._init.append(self.zoo.load_model(self.model_id, init=True, device=self.device))
        return copy.deepcopy(self._init[0])

    def context(self, m: Measure, *, seed: int, budget_s: float | None) -> MeasureContext:
        return make_context(m, model=self.model, train=self.train, init_model=self.init_model, memo=self.memo,
                            device=self.device, seed=seed, budget_s=budget_s)

    def run(self, measures: list[Measure], *, seed: int, budget_s: float | None,
            shared_s: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
        """The entries of `measures` on this model (`shared_s`: its share of batched work, by measure name)."""
        out = {}
        for m in measures:
            if (why := no_training_data(m, self.zoo)) is not None:
                out[m.name] = {"value": None, "error": why, "seconds": 0.0, "cache": False}
                continue
            out[m.name] = run_measure(m, self.context(m, seed=seed, budget_s=budget_s),
                                      (shared_s or {}).get(m.name, 0.0))
        return out


def evaluate_group(zoo: Zoo, todo: dict[str, list[Measure]], *, device: str = "cpu", seed: int = SEED,
                   budget_s: float | None = BUDGET_S) -> dict[str, dict[str, dict[str, Any]]]:
    """The entries of todo[model id] on each model, the models loaded together: a measure with a batched
    implementation first runs it once per shape group of the models needing it (its work shared by the group,
    each model charged an equal part), then every measure runs per model as evaluate_one runs it. A batched run
    that raises is ignored (the per-model call then computes, and reports, what it did not)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    loaded: dict[str, Loaded] = {}
    for mid, ms in todo.items():
        model, train, problem = _load(zoo, mid, device=device)
        if problem is not None:
            out[mid] = {m.name: {"value": None, "error": problem, "seconds": 0.0, "cache": False} for m in ms}
        else:
            loaded[mid] = Loaded(zoo, mid, model, train, device)
    groups: dict[tuple[Any, ...], list[str]] = {}
    for mid, one in loaded.items():
        groups.setdefault(shape_key(one.model), []).append(mid)
    shared: dict[str, dict[str, float]] = {mid: {} for mid in loaded}
    batched = list({m.name: m for ms in todo.values() for m in ms if m.batched is not None}.values())
    for m in batched:
        if no_training_data(m, zoo) is not None:
            continue
        for mids in groups.values():
            members = [mid for mid in mids if m in todo[mid]]
            if len(members) < 2:
                continue
            start = time.perf_counter()
            try:
                m.batched([loaded[mid].context(m, seed=seed, budget_s=budget_s) for mid in members])
            except Exception:  # noqa: BLE001 - the per-model calls below compute and report it
                pass
            share = (time.perf_counter() - start) / len(members)
            for mid in members:
                shared[mid][m.name] = share
    for mid in list(loaded):  # each model's memo (margin passes ...) freed once its measures are done
        out[mid] = loaded.pop(mid).run(todo[mid], seed=seed, budget_s=budget_s, shared_s=shared[mid])
    return out


def evaluate_cached(zoo: Zoo, model_id: str, measures: list[Measure], cache: ValueCache, *, device: str = "cpu",
                    seed: int = SEED, budget_s: float | None = BUDGET_S, run: Any = None
                    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The per-model task of every executor: cached entries read, the others computed (by `run`, an executor's,
    default evaluate_one) and cached. Returns the entries by measure name and the names computed now."""
    def compute(todo: dict[str, list[Measure]]) -> dict[str, dict[str, dict[str, Any]]]:
        return {mid: (run or evaluate_one)(zoo, mid, ms, device=device, seed=seed, budget_s=budget_s)
                for mid, ms in todo.items()}

    ((_, entries, fresh),) = evaluate_chunk_cached(zoo, [model_id], measures, cache, compute, seed=seed)
    return entries, fresh


def evaluate_chunk_cached(zoo: Zoo, ids: list[str], measures: list[Measure], cache: ValueCache, compute: Any, *,
                          seed: int = SEED) -> list[tuple[str, dict[str, dict[str, Any]], list[str]]]:
    """(model id, entries, names computed now) per model of `ids`: cached entries read, the others computed
    together by compute({model id: measures}) and cached."""
    hits: dict[str, dict[str, dict[str, Any]]] = {}
    todo: dict[str, list[Measure]] = {}
    shas = {mid: str(zoo.row(mid)["checkpoint_sha256"]) for mid in ids}
    for mid in ids:
        hits[mid] = {}
        for m in measures:
            hit = cache.get(m, shas[mid], seed)
            if hit is None:
                todo.setdefault(mid, []).append(m)
            else:
                hits[mid][m.name] = hit
    computed = compute(todo) if todo else {}
    out = []
    for mid in ids:
        entries = dict(hits[mid])
        for m in todo.get(mid, []):
            entry = computed[mid][m.name]
            if entry.pop("cache"):
                cache.put(m, shas[mid], seed, entry)
            entries[m.name] = entry
        out.append((mid, {m.name: entries[m.name] for m in measures}, [m.name for m in todo.get(mid, [])]))
    return out


def make_context(m: Measure, *, model: torch.nn.Module, train: TrainingSet, init_model: Any, memo: dict[Any, Any],
                 device: str = "cpu", seed: int = SEED, budget_s: float | None = BUDGET_S) -> MeasureContext:
    """The context of measure `m` on one model: its own copy of the model (made when it first reads it), and only
    what `m` declared."""
    return MeasureContext(model=lambda: copy.deepcopy(model), probe_layers=model.probe_layers(), device=device,
                          measure=m.name, needs=m.needs, seed=seed, budget_s=budget_s,
                          train=train if reads_data(m) else None,
                          init_model=init_model if "init_weights" in m.needs else None, memo=memo)


def assemble(measures: list[Measure], ids: list[str], results: dict[tuple[str, str], dict[str, Any]]) -> pd.DataFrame:
    """One row per model: a column per scalar or signature component, and `NAME:error` per measure."""
    cols: dict[str, list[Any]] = {"model_id": list(ids)}
    for m in measures:
        entries = [results[(mid, m.name)] for mid in ids]
        errors = [e["error"] for e in entries]
        if m.kind == "scalar":
            cols[m.name] = [np.nan if e["value"] is None else e["value"] for e in entries]
        else:
            lengths = Counter(len(e["value"]) for e in entries if e["value"] is not None)
            width = lengths.most_common(1)[0][0] if lengths else 0
            rows = []
            for k, e in enumerate(entries):
                v = e["value"]
                if v is not None and len(v) != width:
                    errors[k] = f"wrong shape: {len(v)} components where the other models gave {width}"
                    v = None
                rows.append([np.nan] * width if v is None else v)
            for i in range(width):
                cols[f"{m.name}[{i}]"] = [r[i] for r in rows]
        cols[f"{m.name}:error"] = errors
    return pd.DataFrame(cols)


@contextmanager
def measures_by_value(measures: Sequence[Measure]) -> Iterator[None]:
    """Ship measures defined outside genbench (a test file, a notebook, a submission) by value: Ray's
    cloudpickle would otherwise name their module, which the workers may not be able to import."""
    ray = remote.import_ray()
    modules = {m.fn.__module__ for m in measures} - {"__main__"}
    already = set(ray.cloudpickle.list_registry_pickle_by_value())
    modules = {name for name in modules if not name.startswith("genbench.") and name in sys.modules} - already
    for name in modules:
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])
    try:
        yield
    finally:
        for name in modules:
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[name])


def _evaluate_task(measures: list[Measure], ref: tuple[str, str | None, str | None, str | None], model_id: str,
                   cache_root: str | None, device: str, seed: int,
                   budget_s: float | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """One model on a Ray worker: exactly the local executor's per-model task."""
    zoo = open_zoo_ref(*ref)
    return evaluate_cached(zoo, model_id, measures, ValueCache(cache_root), device=remote.worker_device(device),
                           seed=seed, budget_s=budget_s)


def evaluate_on_ray(zoo: Zoo, ids: list[str], measures: list[Measure], cache: ValueCache, *, device: str, seed: int,
                    budget_s: float | None, address: str | None = None,
                    progress: bool = True) -> Iterator[tuple[str, dict[str, dict[str, Any]], list[str]]]:
    """(model id, entries, names computed now) per model, as the Ray tasks finish; a failed task gives
    each of its measures an error entry for that model."""
    cache_root = None if cache.root is None else str(Path(cache.root).resolve())
    calls = [(zoo.ref, mid, cache_root, device, seed, budget_s) for mid in ids]
    with measures_by_value(measures):
        pending = remote.submit(_evaluate_task, calls, device=device, address=address, shared=[measures])
    for i, result in remote.as_completed(pending, desc=f"evaluate {zoo.name} (ray)", unit="model", progress=progress):
        if isinstance(result, BaseException):
            error = remote.task_error(result)
            yield ids[i], {m.name: {"value": None, "error": error, "seconds": 0.0} for m in measures}, []
        else:
            yield ids[i], *result


@pinned_threads()  # values computed with the thread count records are made and verified with (genbench/numerics.py)
def evaluate(measures: Any, zoo: str | Path | Zoo, device: str | None = None, executor: Any = "local",
             models: str | Iterable[str] | None = None, *, seed: int = SEED,
             budget_s: float | None = BUDGET_S, cache: bool | str | Path = True,
             progress: bool = True, address: str | None = None) -> pd.DataFrame:
    """Run `measures` (names, glob patterns or registered functions) on the models of `zoo`.

    Returns one row per model with one column per scalar (or `name[i]` per signature component) and
    a `name:error` column holding each failure's reason (None when the value is good). `executor="ray"`
    runs the per-model tasks on the Ray cluster at `address` (default: a running one, else a local one); an
    Executor object (harness/executor.py) runs them where it says."""
    from .executor import resolve_executor
    check_seconds("budget_s", budget_s)
    check_seed("seed", seed)
    ms = resolve_measures(measures)
    if not ms:
        raise GenbenchError("evaluate needs at least one measure: names, glob patterns or registered functions")
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    device = resolve_device(device)
    runner = resolve_executor(executor, address)
    ids = zoo.select_models(models)
    vc = ValueCache(values_cache_dir() if cache is True else (cache or None))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    seconds: Counter[str] = Counter()
    cached: Counter[str] = Counter()
    done = runner.evaluate(zoo, ids, ms, vc, device=device, seed=seed, budget_s=budget_s, progress=progress)
    for mid, entries, fresh in done:
        for name, entry in entries.items():
            results[(mid, name)] = entry
        for name in fresh:
            seconds[name] += entries[name]["seconds"]
        cached.update(name for name in entries if name not in fresh)
    df = assemble(ms, ids, results)
    df.attrs.update(zoo=zoo.name, zoo_version=zoo.version, table_sha256=zoo.table_sha256,
                    zoo_repo=zoo.repo_id, zoo_revision=zoo.revision, executor=runner.name,
                    device=device, seed=seed, seconds=dict(seconds), cached={m.name: cached[m.name] for m in ms},
                    measures={m.name: {"kind": m.kind, "version": m.version, "source_hash": m.source_hash,
                                       "transform": m.transform, "higher_means": m.higher_means} for m in ms})
    return df
