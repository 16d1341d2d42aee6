"""Result records: one JSON file per (entry, zoo) holding scores with intervals, audit verdicts, per-model
values and provenance, so that a leaderboard can be shown, and re-checked, without recomputing anything."""
from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..errors import GenbenchError
from ..fileio import json_safe, write_json_atomic
from ..measures import Measure, get_measure
from ..zoo.storage import Zoo, load_zoo

SCHEMA = 1
RESULTS = Path("leaderboard") / "results"
AUDIT_ZOO = "mnist1d-fragility"
MAX_FAILED_SHARE = 0.05  # an entry whose measure fails on more of a zoo's models gets a failure record


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The commit of the genbench checkout (None outside a git work tree)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _zoo_info(zoo: Zoo) -> dict[str, Any]:
    return {"name": zoo.name, "version": zoo.version, "table_sha256": zoo.table_sha256,
            "revision": getattr(zoo, "revision", None)}


def _provenance(m: Measure | None, *, device: str, seconds: float, command: str) -> dict[str, Any]:
    import torch
    return {"genbench_version": __version__, "git_commit": git_commit(),
            "measure_version": m.version if m else None, "measure_source_hash": m.source_hash if m else None,
            "device": device, "seconds": round(seconds, 3),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command,
            "python": platform.python_version(), "torch": torch.__version__}


def _base(name: str, m: Measure | None, measure: str, zoo: Zoo, submission: dict | None) -> dict[str, Any]:
    return {"schema": SCHEMA, "name": name, "measure": measure, "kind": m.kind if m else None,
            "citation": m.citation if m else None, "higher_means": m.higher_means if m else None,
            "builtin": submission is None, "submission": submission, "zoo": _zoo_info(zoo)}


def failure_record(name: str, measure: str, zoo: str | Zoo, reason: str, *, submission: dict | None = None,
                   command: str = "", device: str = "cpu", seconds: float = 0.0) -> dict[str, Any]:
    """A record saying that an entry could not be scored on a zoo, and why."""
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    try:
        m: Measure | None = get_measure(measure)
    except GenbenchError:
        m = None
    rec = _base(name, m, measure, zoo, submission)
    rec.update(status="failed", failure=reason, scores=None, audit=None, values=None,
               provenance=_provenance(m, device=device, seconds=seconds, command=command))
    return json_safe(rec)


def _values_block(values: pd.DataFrame, m: Measure, zoo: Zoo, predictions: pd.Series | None) -> dict[str, Any]:
    """Per-model values: the measure (scalar or signature rows), its failure, the gap and the held-out prediction."""
    from ..scoring.scores import measure_matrix
    ids = values["model_id"].astype(str).tolist()
    x = measure_matrix(values, m.name)
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float)
    err = values.get(f"{m.name}:error")
    return {"model_id": ids, "gap": gap.tolist(),
            "value": (x[:, 0] if m.kind == "scalar" else x).tolist(),
            "error": None if err is None else [None if e is None or e != e else str(e) for e in err],
            "prediction": None if predictions is None else [predictions.get(i, float("nan")) for i in ids]}


def run_entry(measure: str, zoo: str | Zoo, *, name: str | None = None, submission: dict | None = None,
              audit_zoo: str | None = AUDIT_ZOO, device: str | None = None, budget_s: float | None = 300,
              n_boot: int = 1000, seed: int = 0, command: str = "", progress: bool = False,
              cache: bool = True) -> dict[str, Any]:
    """Evaluate, score and audit one registered measure on a zoo; return its result record."""
    from ..device import resolve_device
    from ..harness.evaluate import evaluate
    from ..scoring import audit, score
    from ..scoring.scores import measure_matrix
    m = get_measure(measure)
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    device = resolve_device(device)
    name = name or m.name
    command = command or f"genbench leaderboard run {m.name} --zoo {zoo.name}"
    start = time.perf_counter()
    values = evaluate([m], zoo, device=device, seed=seed, budget_s=budget_s, progress=progress, cache=cache)
    s = score(values, zoo, measures=[m.name], n_boot=n_boot, seed=seed)[m.name]
    ok = np.isfinite(measure_matrix(values, m.name)).all(1)
    if (~ok).mean() > MAX_FAILED_SHARE:
        errors = values.get(f"{m.name}:error")
        first = next((e for e in errors if isinstance(e, str)), "no value") if errors is not None else "no value"
        how_many = "every model" if not ok.any() else f"{int((~ok).sum())} of {len(ok)} models"
        return failure_record(name, m.name, zoo, f"the measure failed on {how_many} (scores on the rest would not "
                              f"be comparable; at most {MAX_FAILED_SHARE:.0%} may fail); first error: {first}",
                              submission=submission, command=command, device=device,
                              seconds=time.perf_counter() - start)
    report, audit_note = None, None
    if audit_zoo:
        try:
            report = audit(m, audit_zoo, device=device, seed=seed, n_boot=n_boot, progress=progress,
                           cache=cache).to_dict()
        except GenbenchError as e:
            audit_note = f"no fragility audit on {audit_zoo}: {e}"
    rec = _base(name, m, m.name, zoo, submission)
    scores = s.to_dict()
    scores.pop("predictions", None)
    if audit_note:
        scores["notes"] = scores.get("notes", []) + [audit_note]
    rec.update(status="ok", failure=None, scores=scores, audit=report,
               values=_values_block(values, m, zoo, s.predictions),
               provenance=_provenance(m, device=device, seconds=time.perf_counter() - start, command=command))
    rec["provenance"]["seed"], rec["provenance"]["n_boot"] = seed, n_boot
    rec["provenance"]["audit_zoo"] = audit_zoo  # as requested, so verify repeats the same attempt
    return json_safe(rec)


def record_path(record: dict[str, Any], root: str | Path = RESULTS) -> Path:
    """Where a record lives: ROOT/<zoo>/<name>.json."""
    return Path(root) / record["zoo"]["name"] / f"{record['name']}.json"


def write_record(record: dict[str, Any], root: str | Path = RESULTS) -> Path:
    """Write a record atomically to ROOT/<zoo>/<name>.json."""
    return write_json_atomic(record_path(record, root), json_safe(record))


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and check one record (JSON only: nothing is unpickled)."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise GenbenchError(f"cannot read result record {path}: {e}") from None
    missing = [k for k in ("schema", "name", "measure", "zoo", "status") if k not in rec]
    if missing:
        raise GenbenchError(f"{path} is not a genbench result record: missing {missing}")
    if rec["schema"] != SCHEMA:
        raise GenbenchError(f"{path} has record schema {rec['schema']}; this genbench reads schema {SCHEMA}")
    return rec


def load_records(root: str | Path = RESULTS, zoo: str | None = None) -> list[dict[str, Any]]:
    """Every record under ROOT (or ROOT/<zoo>), sorted by zoo and name."""
    root = Path(root)
    if not root.is_dir():
        raise GenbenchError(f"no result records at {root}: run `genbench submit` or `genbench leaderboard run` first, "
                            "or pass --results DIR")
    pattern = f"{zoo}/*.json" if zoo else "*/*.json"
    recs = [read_record(p) for p in sorted(root.glob(pattern))]
    if zoo and not recs:
        zoos = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise GenbenchError(f"no records for zoo {zoo!r} under {root}; zoos with records: {zoos}")
    return recs


# ---------------------------------------------------------------- ranking


def _score(rec: dict[str, Any], key: str) -> float:
    v = ((rec.get("scores") or {}).get("values") or {}).get(key)
    return float("nan") if v is None else float(v)


def _interval(rec: dict[str, Any], key: str) -> tuple[float, float]:
    iv = ((rec.get("scores") or {}).get("intervals") or {}).get(key) or [None, None]
    return tuple(float("nan") if v is None else float(v) for v in iv)  # type: ignore[return-value]


LOWER_IS_BETTER = {"mse", "sign_error_worst", "sign_error_p90", "sign_error_mean"}


def rank_records(records: list[dict[str, Any]], sort: str = "kfold_r2") -> list[dict[str, Any]]:
    """Rank the ok records of each zoo by `sort` (best first; failed and unscored last, unranked) and give
    rank groups: walking down the ranking, an entry joins the current group while its 95% interval overlaps
    the interval of the group's first entry, else it starts the next group."""
    out = []
    for zoo in sorted({r["zoo"]["name"] for r in records}):
        recs = [dict(r) for r in records if r["zoo"]["name"] == zoo]
        sign = 1.0 if sort in LOWER_IS_BETTER else -1.0
        scored = sorted([r for r in recs if r["status"] == "ok" and math.isfinite(_score(r, sort))],
                        key=lambda r: (sign * _score(r, sort), r["name"]))
        group, lead = 0, None
        for i, r in enumerate(scored, 1):
            lo, hi = _interval(r, sort)
            if lead is None or not _overlaps((lo, hi), lead):
                group, lead = group + 1, (lo, hi)
            r["rank"], r["rank_group"] = i, group
        rest = [r for r in recs if r not in scored]
        for r in rest:
            r["rank"], r["rank_group"] = None, None
        out += scored + sorted(rest, key=lambda r: r["name"])
    return out


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    if not all(math.isfinite(v) for v in (*a, *b)):
        return False
    return a[0] <= b[1] and b[0] <= a[1]


COLUMNS = ("adj_r2", "kfold_r2", "mse", "tau", "psi", "cmi", "sign_error_worst")


def leaderboard_table(records: list[dict[str, Any]], sort: str = "kfold_r2") -> pd.DataFrame:
    """One row per record: zoo, rank, rank group, entry, kind, scores with intervals, verdict, citation."""
    rows = []
    for r in rank_records(records, sort):
        row = {"zoo": r["zoo"]["name"], "rank": r["rank"], "group": r["rank_group"], "entry": r["name"],
               "kind": r.get("kind"), "status": r["status"]}
        for k in COLUMNS:
            row[k] = _score(r, k)
            row[k + "_lo"], row[k + "_hi"] = _interval(r, k)
        row["fragility"] = (r.get("audit") or {}).get("verdict") or ("failed" if r["status"] != "ok" else "not audited")
        row["citation"] = r.get("citation") or ""
        row["failure"] = r.get("failure") or ""
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate_table(records: list[dict[str, Any]], sort: str = "kfold_r2") -> pd.DataFrame:
    """Across zoos: each entry's mean rank over the zoos where it has a ranked record (lower is better)."""
    t = leaderboard_table(records, sort)
    t = t[t["rank"].notna()]
    if t.empty:
        return pd.DataFrame(columns=["entry", "mean_rank", "zoos"])
    g = t.groupby("entry")["rank"].agg(["mean", "count"]).reset_index()
    g.columns = ["entry", "mean_rank", "zoos"]
    return g.sort_values(["mean_rank", "entry"]).reset_index(drop=True)
