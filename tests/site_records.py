"""Fabricated leaderboard result records (the schema of leaderboard/results/<zoo>/<name>.json) for the site test."""
from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd

XSS_TITLE = '<script>window.__pwned = 1; document.title = "pwned"</script><img src=x onerror="window.__pwned = 2">'
FAIL_REASON = "timed out: model m17 ran past the per-model budget of 30 s (killed after 31.2 s)"
SCR_THRESHOLD = "> 0.5"


def _zoo(name: str) -> dict[str, Any]:
    """The zoo block of a record."""
    return {"name": name, "version": 1, "table_sha256": hashlib.sha256(name.encode()).hexdigest(), "revision": None}


def _audit(verdict: str, scr: float, p_flip: float) -> dict[str, Any]:
    """An audit block whose checks agree with `verdict`."""
    checks = [
        {"part": "value", "label": "fragile-value", "statistic": "spurious-change rate", "value": scr,
         "threshold": SCR_THRESHOLD, "failed": scr > 0.5, "detail": "7 of 12 admissible twins moved the measure"},
        {"part": "trend", "label": "fragile-trend", "statistic": "P(slope sign flips)", "value": p_flip,
         "threshold": "> 0.5", "failed": p_flip > 0.5, "detail": "bootstrap over seeds, 1000 draws"},
        {"part": "scale", "label": "fragile-scale", "statistic": "exponent ratio", "value": None,
         "threshold": "> 2.0", "failed": None, "detail": "too few train sizes to fit a curve"},
    ]
    return {"zoo": "mnist1d-fragility", "verdict": verdict, "checks": checks,
            "notes": ["thresholds are proposals, not the paper's"]}


def _record(name: str, zoo: str, *, kind: str, citation: str, r2: float, seed: int, n: int = 48,
            rank: int | None = None, group: int | None = None, audit: dict[str, Any] | None = None,
            submission: dict[str, Any] | None = None, tau: float | None = 0.5) -> dict[str, Any]:
    """One successful record whose k-fold R^2 is computed from its own fabricated predictions."""
    rng = np.random.default_rng(seed)
    gap = rng.uniform(0.02, 0.30, n)
    noise = rng.normal(0.0, 1.0, n)
    noise = noise / noise.std() * gap.std() * math.sqrt(max(1e-6, 1.0 - r2))
    pred = gap + noise
    kfold = float(1.0 - ((gap - pred) ** 2).sum() / ((gap - gap.mean()) ** 2).sum())
    adj = min(0.99, kfold + 0.04)
    values = {"adj_r2": adj, "kfold_r2": kfold, "mse": float(((gap - pred) ** 2).mean()), "tau": tau,
              "psi": None if tau is None else tau * 0.8, "cmi": 0.21, "cmi_pgdl": 0.12,
              "sign_error_worst": 0.41, "sign_error_p90": 0.3, "sign_error_mean": 0.2}
    intervals = {k: [v - 0.05, v + 0.04] for k, v in values.items() if v is not None and k != "mse"}
    intervals["mse"] = [values["mse"] * 0.8, values["mse"] * 1.25]
    rec: dict[str, Any] = {
        "schema": 1, "name": name, "measure": submission["entry"] if submission else name, "kind": kind,
        "citation": citation, "builtin": submission is None, "submission": submission, "zoo": _zoo(zoo),
        "status": "ok", "failure": None,
        "scores": {"n": n, "dropped": 0, "target": "gap", "transform": "log", "values": values,
                   "intervals": intervals, "notes": [f"{name}: fitted on {n} models"], "coef": [0.12, -0.03],
                   "intercept": 0.05},
        "audit": audit,
        "values": {"model_id": [f"m{i}" for i in range(n)], "gap": gap.tolist(), "prediction": pred.tolist(),
                   "value": None if kind == "signature" else rng.uniform(1, 5, n).tolist()},
        "provenance": {"genbench_version": "0.1.0", "git_commit": "e091832" + "0" * 33,
                       "measure_version": "1", "measure_source_hash": "9f" * 32, "device": "cpu",
                       "seconds": 12.5, "date": "2025-01-02T03:04:05Z",
                       "command": f"genbench submit submissions/{name} --zoo {zoo}" if submission else
                       f"genbench evaluate {name} --zoo {zoo} --record"},
    }
    if rank is not None:
        rec["rank"], rec["rank_group"] = rank, group
    return rec


def make_records() -> list[dict[str, Any]]:
    """Six records over two zoos: ranked and unranked zoos, a failure, a hostile title, a signature entry."""
    sub = {"title": XSS_TITLE, "authors": ["A. Author", "<b>B. Bold</b>"], "contact": "a@example.org",
           "paper_url": "javascript:alert(1)", "licence": "MIT", "entry": "spectral_gap.value"}
    return [
        _record("norm.path", "mnist1d-demogen", kind="scalar", citation="Neyshabur et al. 2015", r2=0.35,
                seed=1, rank=3, group=2, audit=_audit("fragile-value", 0.6, 0.2), tau=0.3),
        _record("margin.qrt_log", "mnist1d-demogen", kind="signature", citation="Jiang et al. 2019", r2=0.85,
                seed=2, rank=1, group=1, audit=_audit("robust", 0.1, 0.05), tau=0.7),
        _record("spectral_gap", "mnist1d-demogen", kind="scalar", citation="Author and Bold 2025", r2=0.6,
                seed=3, rank=2, group=1, audit=None, submission=sub, tau=None),
        {"schema": 1, "name": "hangs", "measure": "hangs.value", "kind": "scalar", "citation": "example",
         "builtin": False, "submission": {"title": "A measure that hangs", "authors": ["C"], "contact": "c@x",
                                          "paper_url": "https://example.org/paper", "licence": "MIT",
                                          "entry": "hangs.value"},
         "zoo": _zoo("mnist1d-demogen"), "status": "failed", "failure": FAIL_REASON, "scores": None,
         "audit": None, "values": None,
         "provenance": {"genbench_version": "0.1.0", "git_commit": None, "measure_version": "1",
                        "measure_source_hash": "ab" * 32, "device": "cpu", "seconds": 31.2,
                        "date": "2025-01-02T03:04:05Z", "command": "genbench submit submissions/hangs"}},
        _record("margin.qrt_log", "cifar10-small", kind="signature", citation="Jiang et al. 2019", r2=0.5,
                seed=4, audit=_audit("robust", 0.1, 0.05)),
        _record("norm.path", "cifar10-small", kind="scalar", citation="Neyshabur et al. 2015", r2=0.7, seed=5,
                audit=_audit("fragile-value, fragile-trend", 0.7, 0.8)),
    ]


def make_ablation() -> dict[str, pd.DataFrame]:
    """Two small DEMOGEN ablation tables in the layout of genbench.scoring.demogen.demogen_table."""
    def row(setting: str, measure: str, adj: float, kf: float, mse: float, paper: tuple) -> dict[str, Any]:
        return {"setting": setting, "measure": measure, "adj_r2": adj, "adj_r2_lo": adj - 0.05,
                "adj_r2_hi": adj + 0.03, "kfold_r2": kf, "kfold_r2_lo": kf - 0.06, "kfold_r2_hi": kf + 0.04,
                "mse": mse, "mse_lo": mse * 0.8, "mse_hi": mse * 1.2, "paper_adj_r2": paper[0],
                "paper_kfold_r2": paper[1], "paper_mse": paper[2]}
    t1 = pd.DataFrame([row("qrt+log", "margin.qrt_log", 0.88, 0.83, 1.2, (0.94, 0.90, 1.5)),
                       row("Jacobian+log", "margin.jacobian_log", 0.30, float("nan"), 5.1, (0.42, None, 5.0))])
    t4 = pd.DataFrame([row("input", "margin.input", 0.7, 0.66, 3.0, (0.77, 0.73, 3.1))])
    return {"Table 1": t1, "Table 4": t4}
