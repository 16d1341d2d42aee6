"""gb.score(values, zoo): regression and rank scores of every measure in a value table, each with a 95%
bootstrap interval over models, and the reasons for anything that could not be computed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..defaults import N_BOOT, SEED
from ..errors import GenbenchError, did_you_mean
from ..measures import get_measure
from ..zoo.storage import Zoo, load_zoo
from . import rank
from .regression import K_FOLDS, RegressionResult, bootstrap, fit
from .spec import SCORE_NAMES, MeasureScores

TARGETS = ("gap", "test_acc")
LEVEL = 0.95


class Scores:
    """Scores of several measures on one zoo: `scores[name]` and `scores.table` (one row per measure)."""

    def __init__(self, zoo: str, target: str, items: dict[str, MeasureScores]):
        self.zoo, self.target, self.items = zoo, target, items

    def __getitem__(self, name: str) -> MeasureScores:
        if name not in self.items:
            raise did_you_mean(name, self.items, what="scored measure")
        return self.items[name]

    def __iter__(self):
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    @property
    def table(self) -> pd.DataFrame:
        rows = []
        for s in self.items.values():
            row = {"measure": s.measure, "kind": s.kind, "phi": s.transform or "", "n": s.n, "dropped": s.dropped}
            for k in SCORE_NAMES:
                row[k] = s.values.get(k, np.nan)
                lo, hi = s.intervals.get(k, (np.nan, np.nan))
                row[k + "_lo"], row[k + "_hi"] = lo, hi
            row["notes"] = "; ".join(s.notes)
            rows.append(row)
        return pd.DataFrame(rows)


def measure_matrix(values: pd.DataFrame, name: str) -> np.ndarray:
    """The columns of one measure in a value table: [n, 1] for a scalar, [n, p] for a signature."""
    cols = [c for c in values.columns if c == name or (c.startswith(name + "[") and c.endswith("]"))]
    if not cols:
        raise GenbenchError(f"the value table has no column for measure {name!r}; "
                            f"run `genbench evaluate {name} --zoo ZOO` first")
    return values[cols].to_numpy(dtype=float)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    s = samples[np.isfinite(samples)]
    if len(s) < 10:
        return (float("nan"), float("nan"))
    a = (1 - LEVEL) / 2
    return (float(np.quantile(s, a)), float(np.quantile(s, 1 - a)))


def grid_table(zoo: Zoo, ids: list[str]) -> pd.DataFrame:
    """The grid axes of the given models (hp.* columns, renamed to the axis names)."""
    t = zoo.table.set_index("model_id").loc[ids]
    axes = [a for a in zoo.hparams if f"hp.{a}" in t.columns]
    return t[[f"hp.{a}" for a in axes]].rename(columns=lambda c: c[3:]).reset_index(drop=True)


def score_measure(name: str, x: np.ndarray, y: np.ndarray, hp: pd.DataFrame, ids: list[str], *, kind: str,
                  transform: str | None, target: str, n_test: int, dropped: int = 0, k: int = K_FOLDS,
                  seed: int = SEED, n_boot: int = N_BOOT) -> MeasureScores:
    """Every score of one measure on complete rows; what cannot be computed gets NaN and a note."""
    s = MeasureScores(measure=name, kind=kind, transform=transform, target=target, n=len(y), dropped=dropped,
                      features=x.shape[1])
    if dropped:
        s.notes.append(f"{dropped} model(s) without a value (failed) were dropped, not imputed")
    if len(y) < 3:
        s.notes.append(f"only {len(y)} models have values: nothing can be scored")
        return s
    if np.ptp(y) == 0:
        s.notes.append(f"the target {target!r} is constant over these models: no score is defined")
        return s
    weights = rank.bootstrap_weights(len(y), B=n_boot, seed=seed)
    features = x
    if transform == "log":
        bad = int((x <= 0).any(axis=1).sum())
        if bad:
            s.notes.append(f"{bad} model(s) have a non-positive value under the log transform: "
                           "no regression score (rank scores use the raw values)")
            features = None
        else:
            features = np.log(x)
    ranked = None
    if features is not None:
        if len(y) < max(k, features.shape[1] + 2):
            s.notes.append(f"{len(y)} models are too few for {k}-fold cross-validation with {features.shape[1]} "
                           f"features: regression scores skipped")
        else:
            reg = fit(features, y, k=k, seed=seed)
            _add_regression(s, reg, bootstrap(features, y, weights, reg.folds, reg.heldout), ids)
            ranked = reg.heldout if kind == "signature" else None
    if kind == "scalar":
        ranked = x[:, 0]
    if ranked is None:
        s.notes.append("rank scores need a scalar or the k-fold predictions of a signature: skipped")
        return s
    _add_rank(s, ranked, y, hp, weights, n_test)
    return s


def _add_regression(s: MeasureScores, reg: RegressionResult, boot: dict[str, np.ndarray], ids: list[str]) -> None:
    s.values.update(adj_r2=reg.adj_r2, kfold_r2=reg.kfold_r2, mse=reg.mse)
    s.coef, s.intercept = reg.coef.tolist(), reg.intercept
    s.predictions = pd.Series(reg.heldout, index=ids, name="heldout_prediction")
    for key, samples in boot.items():
        s.intervals[key] = _interval(samples)


def _add_rank(s: MeasureScores, mu: np.ndarray, y: np.ndarray, hp: pd.DataFrame, weights: np.ndarray,
              n_test: int) -> None:
    s.values["tau"] = float(rank.kendall_tau(mu, y))
    s.intervals["tau"] = _interval(np.asarray(rank.kendall_tau(mu, y, weights=weights)))
    try:
        psi, axes = rank.granulated_psi(mu, y, hp)
        s.values["psi"], s.psi_axes = float(psi), {a: float(v) for a, v in axes.items()}
        s.intervals["psi"] = _interval(np.asarray(rank.granulated_psi(mu, y, hp, weights=weights)[0]))
        cmi, _, sign = rank.conditional_mi(mu, y, hp)
        s.values["cmi"], s.cmi_sign = float(cmi), float(sign)
        s.intervals["cmi"] = _interval(np.asarray(rank.conditional_mi(mu, y, hp, weights=weights)[0]))
        s.values["cmi_pgdl"] = float(rank.pgdl_cmi(mu, y, hp))
    except ValueError as e:
        s.notes.append(f"grid scores (Psi, CMI) skipped: {e}")
    try:
        se = rank.robust_sign_error(mu, y, hp, n_test=n_test)
        for key in ("worst", "p90", "mean"):
            s.values[f"sign_error_{key}"] = float(se[key])
        if se.get("reason"):
            s.notes.append(f"robust sign-error: {se['reason']}")
    except ValueError as e:
        s.notes.append(f"robust sign-error skipped: {e}")


def score(values: pd.DataFrame, zoo: str | Zoo, target: str = "gap", transform: str | None = "auto", *,
          measures: list[str] | None = None, k: int = K_FOLDS, seed: int = SEED, n_boot: int = N_BOOT,
          allow_partial: bool = False) -> Scores:
    """Score every measure of a value table (from `gb.evaluate`) against the zoo's `target`.

    transform "auto" uses each measure's own phi (log for "_log" measures); "log" / "linear" force one.
    A partial zoo (not every model of its recipe built or downloaded) is refused unless `allow_partial`."""
    if target not in TARGETS:
        raise GenbenchError(f"target must be one of {TARGETS}, got {target!r}")
    if transform not in ("auto", "log", "linear", None):
        raise GenbenchError(f"transform must be 'auto', 'log', 'linear' or None, got {transform!r}")
    zoo = zoo if isinstance(zoo, Zoo) else load_zoo(zoo)
    zoo.require_complete(allow_partial=allow_partial, flag="allow_partial=True")
    info = values.attrs.get("measures", {})
    # folds and bootstrap resamples are assigned by position: fix the order so a score does not depend on it
    values = values.sort_values("model_id", kind="stable").reset_index(drop=True)
    names = measures or list(info) or sorted({c.split("[")[0].split(":")[0] for c in values.columns} - {"model_id"})
    table = zoo.table.set_index("model_id")
    missing = [m for m in values["model_id"] if m not in table.index]
    if missing:
        raise GenbenchError(f"{len(missing)} model id(s) of the value table are not in zoo {zoo.name!r} "
                            f"(e.g. {missing[0]!r}): were the values computed on another zoo?")
    n_test = int(zoo.manifest.get("test_size", 10_000))
    items = {}
    for name in names:
        meta = info.get(name) or _meta(get_measure(name))
        phi = meta["transform"] if transform == "auto" else (None if transform == "linear" else transform)
        x = measure_matrix(values, name)
        ok = np.isfinite(x).all(axis=1)
        ids = list(values["model_id"][ok])
        y = table.loc[ids, target].to_numpy(dtype=float)
        items[name] = score_measure(name, x[ok], y, grid_table(zoo, ids), ids, kind=meta["kind"], transform=phi,
                                    target=target, n_test=n_test, dropped=int((~ok).sum()), k=k, seed=seed,
                                    n_boot=n_boot)
    return Scores(zoo.name, target, items)


def _meta(m: Any) -> dict[str, Any]:
    return {"kind": m.kind, "transform": m.transform}


@dataclass
class Transfer:
    """A regression fitted on one zoo and judged on another: R^2, MSE and Kendall tau of its predictions."""

    measure: str
    source: str
    target_zoo: str
    target: str
    transform: str | None
    n_fit: int
    n_eval: int
    r2: float
    mse: float
    tau: float
    source_kfold_r2: float
    notes: list[str] = field(default_factory=list)


def _complete(values: pd.DataFrame, zoo: Zoo, name: str, target: str, phi: str | None) -> tuple[np.ndarray, np.ndarray, int]:
    """phi(features) and target of the models with a usable value, and how many were dropped."""
    x = measure_matrix(values, name)
    ok = np.isfinite(x).all(axis=1) & ((x > 0).all(axis=1) if phi == "log" else True)
    y = zoo.table.set_index("model_id").loc[list(values["model_id"][ok]), target].to_numpy(dtype=float)
    return (np.log(x[ok]) if phi == "log" else x[ok]), y, int((~ok).sum())


def transfer(measure: str, source: tuple[pd.DataFrame, str | Zoo], to: tuple[pd.DataFrame, str | Zoo], *,
             target: str = "gap", transform: str | None = "auto") -> Transfer:
    """Fit target ~ phi(measure) on the source zoo's models, predict the other zoo's: does the fit carry over?"""
    (va, za), (vb, zb) = source, to
    meta = va.attrs.get("measures", {}).get(measure) or _meta(get_measure(measure))
    phi = meta["transform"] if transform == "auto" else (None if transform == "linear" else transform)
    za, zb = (z if isinstance(z, Zoo) else load_zoo(z) for z in (za, zb))
    xa, ya, da = _complete(va, za, measure, target, phi)
    xb, yb, db = _complete(vb, zb, measure, target, phi)
    if xa.shape[1] != xb.shape[1]:
        raise GenbenchError(f"{measure} has {xa.shape[1]} features on {za.name} but {xb.shape[1]} on {zb.name}: "
                            "a fit only transfers between zoos whose signatures have the same length")
    if len(ya) < xa.shape[1] + 2 or len(yb) < 3:
        raise GenbenchError(f"too few models with values to transfer ({len(ya)} on {za.name}, {len(yb)} on "
                            f"{zb.name}; the fit needs more than {xa.shape[1] + 1})")
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import mean_squared_error, r2_score
    pred = LinearRegression().fit(xa, ya).predict(xb)
    notes = [f"{d} model(s) of {z.name} without a usable value were dropped" for d, z in ((da, za), (db, zb)) if d]
    if np.ptp(yb) == 0:
        notes.append(f"the target is constant on {zb.name}: R^2 is undefined")
    k = min(K_FOLDS, len(ya))
    return Transfer(measure=measure, source=za.name, target_zoo=zb.name, target=target, transform=phi,
                    n_fit=len(ya), n_eval=len(yb), r2=float(r2_score(yb, pred)) if np.ptp(yb) else float("nan"),
                    mse=float(mean_squared_error(yb, pred)), tau=float(rank.kendall_tau(pred, yb)),
                    source_kfold_r2=fit(xa, ya, k=k).kfold_r2, notes=notes)
