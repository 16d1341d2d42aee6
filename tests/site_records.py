"""Fabricated leaderboard result records (the current schema: leaderboard/results/<zoo>/<name>.json) for the
leaderboard and site tests: `scored_record` makes one whose k-fold scores, spread and intervals are computed from
its own held-out predictions on the zoo's paired resamples, as the scorer computes them."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd

from genbench.defaults import OFFICIAL_ZOOS
from genbench.scoring.resample import percentile_interval, pooled_scores, resample_weights

XSS_TITLE = '<script>window.__pwned = 1; document.title = "pwned"</script><img src=x onerror="window.__pwned = 2">'
FAIL_REASON = "timed out: model m17 ran past the per-model budget of 30 s (killed after 31.2 s)"
SCR_THRESHOLD = "> 0.5"
SIGN_ERROR_NOTE = ("robust sign-error: none of the 96 environments reaches the effective sample size "
                   "(2 seeds per grid point)")
ADJ_REFUSAL = "too few models: 48 < 10 (p + 1) = 210 for p = 20 feature(s)"
BASELINE_CITATION = "the gap predicted from the zoo's hyperparameters alone (one-hot, pairwise interactions)"
N_BOOT, SEED, REPEATS = 200, 0, 10
ZOO1, ZOO2 = OFFICIAL_ZOOS  # both enter the aggregate


def zoo_block(name: str, version: int = 1) -> dict[str, Any]:
    """The zoo block of a record."""
    return {"name": name, "version": version, "table_sha256": hashlib.sha256(name.encode()).hexdigest(),
            "revision": None}


def model_ids(n: int) -> list[str]:
    """Model ids, sorted as records keep them."""
    return [f"m{i:03d}" for i in range(n)]


def gaps(n: int, seed: int = 0) -> np.ndarray:
    """A skewed spread of generalization gaps, like a zoo's."""
    return np.random.default_rng(seed).lognormal(-2.5, 0.6, n)


def heldout_of(gap: np.ndarray, noise: np.ndarray, seed: int = 0, repeats: int = REPEATS) -> np.ndarray:
    """Held-out predictions [R, n] of the gap with a given error, a little different in each shuffle."""
    jitter = np.random.default_rng(seed).normal(0.0, 1e-3 * gap.std(), (repeats, len(gap)))
    return gap + noise + jitter


def _audit(verdict: str, scr: float, p_flip: float, missing: list[list[str]] | None = None) -> dict[str, Any]:
    """An audit block whose checks agree with `verdict`."""
    checks = [
        {"part": "value", "label": "fragile-value", "statistic": "spurious-change rate", "value": scr,
         "threshold": SCR_THRESHOLD, "failed": scr > 0.5, "detail": "7 of 12 admissible twins moved the measure"},
        {"part": "trend", "label": "fragile-trend", "statistic": "P(slope sign flips)", "value": p_flip,
         "threshold": "> 0.5", "failed": p_flip > 0.5, "detail": "bootstrap over seeds, 1000 draws"},
        {"part": "scale", "label": "fragile-scale", "statistic": "exponent ratio", "value": None,
         "threshold": "> 2.0", "failed": None, "detail": "too few train sizes to fit a curve"},
    ]
    audit = {"zoo": "mnist1d-fragility", "verdict": verdict, "checks": checks,
             "notes": ["thresholds are proposals, not the paper's"]}
    if missing is not None:
        audit["missing"] = missing
    return audit


def scored_record(name: str, zoo: str, gap: np.ndarray, heldout: np.ndarray, *, kind: str = "scalar",
                  citation: str = "", baseline: bool = False, extra: dict[str, float | None] | None = None,
                  refused: dict[str, str] | None = None, notes: list[str] | None = None,
                  audit: dict[str, Any] | None = None, submission: dict[str, Any] | None = None,
                  n_boot: int = N_BOOT, seed: int = SEED, zoo_version: int = 1, ids: list[str] | None = None,
                  value: np.ndarray | None = None) -> dict[str, Any]:
    """One successful current-schema record: k-fold R^2 and MSE pooled from `heldout` [R, n] (mean over shuffles),
    their spread, and their 95% intervals on the zoo's paired resamples; `extra` sets other scores (an interval of
    +-0.05 each), `refused` refuses scores with a reason."""
    n = len(gap)
    ids = ids or model_ids(n)
    z = zoo_block(zoo, zoo_version)
    per_shuffle = [pooled_scores(gap, h[None]) for h in heldout]
    spread = {"kfold_r2": [float(r[0][0]) for r in per_shuffle], "mse": [float(r[1][0]) for r in per_shuffle]}
    values: dict[str, float | None] = {"kfold_r2": float(np.mean(spread["kfold_r2"])),
                                       "mse": float(np.mean(spread["mse"]))}
    w = resample_weights(n, table_sha256=z["table_sha256"], seed=seed, n_boot=n_boot)
    r2, mse = pooled_scores(gap, heldout, w)
    intervals = {k: list(iv) for k, iv in (("kfold_r2", percentile_interval(r2)), ("mse", percentile_interval(mse)))
                 if iv is not None}
    for k, v in (extra or {}).items():
        values[k] = v
        if v is not None:
            intervals[k] = [v - 0.05, v + 0.05]
    for k in refused or {}:
        values[k] = None
        intervals.pop(k, None)
    prediction = heldout[0]
    return {
        "schema": 3, "name": name, "measure": submission["entry"] if submission else name,
        "kind": "baseline" if baseline else kind, "citation": citation, "higher_means": None if baseline else
        "larger_gap", "builtin": submission is None, "submission": submission, "baseline": baseline, "zoo": z,
        "status": "ok", "failure": None,
        "scores": {"measure": name, "kind": kind, "transform": "select", "target": "gap", "n": n, "dropped": 0,
                   "features": 1, "values": values, "intervals": intervals, "refused": dict(refused or {}),
                   "spread": spread, "kfold": {"k": 10, "repeats": len(heldout), "seeds": list(range(len(heldout)))},
                   "bootstrap": {"seed": seed, "n_boot": n_boot, "table_sha256": z["table_sha256"]},
                   "transform_used": {"all": "log", "folds": {"log": 97, "linear": 3}}, "unconverged": 2,
                   "notes": list(notes or []), "coef": [0.12], "intercept": 0.05, "cmi_sign": 1.0},
        "audit": audit,
        "values": {"model_id": ids, "gap": gap.tolist(), "prediction": prediction.tolist(),
                   "heldout": heldout.tolist(),
                   "value": None if kind == "signature" or baseline else
                   (value if value is not None else prediction).tolist(), "error": [None] * n},
        "provenance": {"genbench_version": "0.1.0", "git_commit": "e091832" + "0" * 33,
                       "measure_version": "1", "measure_source_hash": "9f" * 32, "device": "cpu",
                       "seconds": 12.5, "date": "2025-01-02T03:04:05Z", "seed": seed, "n_boot": n_boot,
                       "command": f"genbench submit submissions/{name} --zoo {zoo}" if submission else
                       f"genbench leaderboard run {name} --zoo {zoo}"},
    }


def failed_record(name: str, zoo: str, reason: str = FAIL_REASON) -> dict[str, Any]:
    """A record of an entry that could not be scored."""
    return {"schema": 3, "name": name, "measure": f"{name}.value", "kind": "scalar", "citation": "example",
            "builtin": False, "submission": {"title": "A measure that hangs", "authors": ["C"], "contact": "c@x",
                                             "paper_url": "https://example.org/paper", "licence": "MIT",
                                             "entry": f"{name}.value"},
            "zoo": zoo_block(zoo), "status": "failed", "failure": reason, "scores": None, "audit": None,
            "values": None,
            "provenance": {"genbench_version": "0.1.0", "git_commit": None, "measure_version": "1",
                           "measure_source_hash": "ab" * 32, "device": "cpu", "seconds": 31.2,
                           "date": "2025-01-02T03:04:05Z", "command": f"genbench submit submissions/{name}"}}


def _entry(name: str, zoo: str, gap: np.ndarray, sd: float, seed: int, **kw: Any) -> dict[str, Any]:
    """A record whose held-out predictions are the gap with an error of `sd` gap standard deviations."""
    noise = np.random.default_rng(seed).normal(0.0, sd * gap.std(), len(gap))
    return scored_record(name, zoo, gap, heldout_of(gap, noise, seed), **kw)


def make_records() -> list[dict[str, Any]]:
    """Records over two zoos: on the first a baseline row, an entry with an alias, a refused score, a signature
    entry, a submission with a hostile title, an inconclusive audit, no sign-error anywhere, and a failure."""
    sub = {"title": XSS_TITLE, "authors": ["A. Author", "<b>B. Bold</b>"], "contact": "a@example.org",
           "paper_url": "javascript:alert(1)", "licence": "MIT", "entry": "spectral_gap.value"}
    g1, g2 = gaps(48, 1), gaps(40, 2)
    scores = {"adj_r2": 0.5, "tau": 0.5, "psi": 0.4, "cmi": 0.21, "cmi_pgdl": 0.12}
    no_sign = [SIGN_ERROR_NOTE]
    qrt = _entry("margin.qrt_log", ZOO1, g1, 0.3, 2, kind="signature", citation="Jiang et al. 2019",
                 extra={**scores, "tau": 0.7, "cmi": -0.08}, refused={"adj_r2": ADJ_REFUSAL}, notes=no_sign,
                 audit=_audit("robust", 0.1, 0.05))
    fro = _entry("norm.fro_prod", ZOO1, g1, 0.9, 6, citation="Jiang et al. 2020", extra=scores, notes=no_sign,
                 audit=_audit("inconclusive", 0.1, 0.05, [["trend", "no learning curves"],
                                                          ["scaling", "no learning curves"]]))
    alias = {**fro, "name": "norm.fro_sum", "measure": "norm.fro_sum"}
    return [
        _entry("norm.path", ZOO1, g1, 0.8, 1, citation="Neyshabur et al. 2015", extra={**scores, "tau": 0.3},
               notes=no_sign, audit=_audit("fragile-value; inconclusive: trend, scaling", 0.6, 0.2,
                                           [["trend", "no learning curves"], ["scaling", "no learning curves"]])),
        qrt,
        _entry("spectral_gap", ZOO1, g1, 0.6, 3, citation="Author and Bold 2025",
               extra={**scores, "tau": None, "psi": None}, notes=no_sign, submission=sub),
        _entry("baseline.hparams", ZOO1, g1, 0.5, 7, baseline=True, citation=BASELINE_CITATION, extra=scores,
               notes=no_sign),
        fro, alias,
        failed_record("hangs", ZOO1),
        _entry("margin.qrt_log", ZOO2, g2, 0.7, 4, kind="signature", citation="Jiang et al. 2019",
               extra={**scores, "sign_error_worst": 0.41, "sign_error_p90": 0.3, "sign_error_mean": 0.2},
               audit=_audit("robust", 0.1, 0.05)),
        _entry("norm.path", ZOO2, g2, 0.5, 5, citation="Neyshabur et al. 2015",
               extra={**scores, "sign_error_worst": 0.35, "sign_error_p90": 0.3, "sign_error_mean": 0.2},
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


BIG_ZOO = "mnist1d-wide"
LONG_TITLE = ("Spectral gap of the layer-wise Hessian, normalised by the margin of the training set and averaged over "
              "the last three layers")
CITATIONS = ("Jiang, Neyshabur, Mobahi, Krishnan and Bengio 2020, Fantastic generalization measures and where to "
             "find them (ICLR)", "Neyshabur, Tomioka and Srebro 2015, Norm-based capacity control in neural networks",
             "Bartlett, Foster and Telgarsky 2017, Spectrally-normalized margin bounds for neural networks",
             "Keskar et al. 2017", "Dziugaite and Roy 2017, Computing nonvacuous generalization bounds for deep "
             "(stochastic) neural networks with many more parameters than training data")
BIG_NAMES = ("margin.qrt_log", "margin.h1", "margin.h2", "margin.spectral_log", "margin.jacobian_log",
             "margin.input", "norm.fro_prod", "norm.fro_sum", "norm.path", "norm.path_margin", "norm.spec_prod",
             "norm.spec_sum", "norm.spec_orig_margin", "pacbayes.flatness", "pacbayes.mag_flatness", "pacbayes.init",
             "pacbayes.orig", "sharpness.flatness", "init.dist_fro", "init.dist_spec", "output.entropy",
             "layer.utilization_all", "pgdl.dbi_mixup", "gradient_noise_scale")
VERDICTS = ("robust", "fragile-value; inconclusive: trend, scaling", "inconclusive", "fragile-value, fragile-trend")


def make_many_records(n: int = len(BIG_NAMES)) -> list[dict[str, Any]]:
    """A zoo of `n` measures (long citations, a long submission title, every kind of badge), one baseline row and
    one alias: the page's layout at full size."""
    gap = gaps(96, 21)
    scores = {"adj_r2": 0.4, "tau": 0.5, "psi": 0.3, "cmi": 0.12}
    out = []
    for i, name in enumerate(BIG_NAMES[:n]):
        verdict = VERDICTS[i % len(VERDICTS)]
        kw: dict[str, Any] = {"citation": CITATIONS[i % len(CITATIONS)], "extra": {**scores, "tau": 0.7 - i / 50},
                              "notes": [SIGN_ERROR_NOTE], "kind": "signature" if i % 5 == 0 else "scalar",
                              "audit": _audit(verdict, 0.6 if "value" in verdict else 0.1, 0.2,
                                              [["trend", "no learning curves"]] if "inconclusive" in verdict else None)}
        if name == "gradient_noise_scale":  # a submission: its folder, its measure, a long title
            kw["submission"] = {"title": LONG_TITLE, "authors": ["A. Author"], "contact": "a@example.org",
                                "paper_url": "https://arxiv.org/abs/1812.06162", "licence": "MIT",
                                "entry": "gradnoise.noise_scale_log"}
        out.append(_entry(name, BIG_ZOO, gap, 0.25 + 0.04 * i, 100 + i, **kw))
    out.append(_entry("baseline.hparams", BIG_ZOO, gap, 0.6, 99, baseline=True, citation=BASELINE_CITATION,
                      extra=scores, notes=[SIGN_ERROR_NOTE]))
    out.append({**out[6], "name": "norm.fro_sum_copy", "measure": "norm.fro_sum_copy"})  # an alias of norm.fro_prod
    return out
