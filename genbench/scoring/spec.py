"""What a score is: the one list of scores (name, labels, which way is better) and one measure's block of
scores as records store it. Plain Python, so that records and the leaderboard read it without numpy, torch or
scikit-learn; scores.py computes the numbers."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Score:
    """One score a measure gets: its key in records, the statistic that computes it, its names for people, which
    way is better, and how the views show it. Adding a score is one entry of SCORES (and its statistic)."""

    name: str
    label: str                    # full name (the entry page)
    header: str                   # column header (the web page)
    ascii: str                    # column header (the terminal)
    help: str                     # what it measures (tooltips)
    lower_is_better: bool = False
    statistic: str = ""           # what computes it (scoring/regression.py or scoring/rank.py)
    shown: bool = False           # a column of the leaderboard (terminal, page, exports)
    interval: bool = False        # shown with its 95% interval beside it
    headline: bool = False        # in a submission's summary (`genbench submit`)
    digits: int = 2               # decimals in the terminal's tables (a difference of R^2 needs three, an MSE five)
    only_on: str = ""             # the zoos it is computed on, when not every zoo (its empty column is not noted)


# THE list of scores, in display order; records, rankings, tables and the page all read it.
SCORES: tuple[Score, ...] = (
    Score("adj_r2", "adjusted R\u00b2", "adj. R\u00b2", "adj R2",
          "adjusted R\u00b2 of the linear fit of the gap, with its 95% bootstrap interval",
          statistic="regression.adjusted_r2", shown=True, interval=True, headline=True),
    Score("kfold_r2", "k-fold R\u00b2", "k-fold R\u00b2", "k-fold R2",
          "R\u00b2 of the k-fold held-out predictions of the gap (the ranking score; a scalar's slope held to its "
          "declared direction in every training fold), with its 95% bootstrap interval",
          statistic="regression.cross_validate", shown=True, interval=True, headline=True),
    Score("delta_r2", "adds to the recipe (\u0394 k-fold R\u00b2)", "adds to recipe", "adds",
          "k-fold R\u00b2 of the hyperparameters plus the measure minus that of the hyperparameters alone (same "
          "folds), with its paired 95% bootstrap interval", statistic="recipe.RecipePlus", shown=True,
          interval=True, headline=True, digits=3),
    Score("kfold_r2_free", "k-fold R\u00b2 (free slope)", "k-fold R\u00b2 (free)", "free R2",
          "k-fold R\u00b2 with the slope free to take either sign (DEMOGEN's protocol), with its 95% bootstrap "
          "interval", statistic="regression.cross_validate"),
    Score("mse", "MSE", "MSE", "MSE", "mean squared error of the k-fold held-out predictions of the gap",
          lower_is_better=True, statistic="regression.cross_validate", digits=5),  # squared gaps: about 1e-3
    Score("tau", "Kendall \u03c4", "Kendall \u03c4", "tau",
          "Kendall rank correlation of the measure with the gap (tau-a, as Jiang et al. 2020: ties count 0)",
          statistic="rank.kendall_tau", shown=True, headline=True),
    Score("psi", "\u03a8 (granulated \u03c4)", "\u03a8", "Psi",
          "granulated Kendall \u03c4 averaged over hyperparameter axes", statistic="rank.granulated_psi", shown=True),
    Score("cmi", "CMI", "CMI", "CMI",
          "conditional mutual information with the gap, minimised over hyperparameter sets",
          statistic="rank.conditional_mi", shown=True),
    Score("cmi_pgdl", "CMI (PGDL)", "CMI (PGDL)", "CMI (PGDL)",
          "conditional mutual information as the PGDL competition computed it", statistic="rank.pgdl_cmi"),
    Score("pgdl_score", "PGDL score (100 x CMI (PGDL), the competition's units)", "PGDL score", "PGDL score",
          "the PGDL competition's score as its organisers printed it: 100 x the conditional mutual information its "
          "scorer computed (CMI (PGDL)); on imported PGDL tasks only", statistic="rank.pgdl_cmi", shown=True,
          only_on="PGDL tasks"),
    Score("sign_error_worst", "sign-error (worst)", "sign-error (worst)", "sign-err worst",
          "robust sign-error: worst case over environments (lower is better)", lower_is_better=True,
          statistic="rank.robust_sign_error", shown=True),
    Score("sign_error_p90", "sign-error (90th percentile)", "sign-error (p90)", "sign-err p90",
          "robust sign-error: 90th percentile over environments (lower is better)", lower_is_better=True,
          statistic="rank.robust_sign_error"),
    Score("sign_error_mean", "sign-error (mean)", "sign-error (mean)", "sign-err mean",
          "robust sign-error: mean over environments (lower is better)", lower_is_better=True,
          statistic="rank.robust_sign_error"),
)
DEFAULT_SORT = "kfold_r2"  # the ranking score
SCORE_NAMES = tuple(s.name for s in SCORES)
REGRESSION = ("adj_r2", "kfold_r2", "kfold_r2_free", "mse")  # the scores of a regression onto the gap
_LABELS = {s.name: s.label for s in SCORES}


def score_label(name: str) -> str:
    """A score's full label; the name itself for a score the list does not know."""
    return _LABELS.get(name, name)


@dataclass
class MeasureScores:
    """All scores of one measure on one zoo, with intervals and what could not be computed (and why)."""

    measure: str
    kind: str
    transform: str | None
    target: str
    n: int
    dropped: int
    features: int
    unconverged: int | None = None      # scored models that did not converge (None: the zoo does not record it)
    values: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)     # score -> why it has no number
    spread: dict[str, list[float]] = field(default_factory=dict)  # kfold_r2 / mse of each shuffle
    fold_mean_r2: float = float("nan")  # the DEMOGEN paper's per-fold mean of k-fold R^2 (comparison only)
    transform_used: dict[str, Any] = field(default_factory=dict)  # phi on all models, and per fold under "select"
    kfold: dict[str, Any] = field(default_factory=dict)       # k, repeats, seeds
    bootstrap: dict[str, Any] = field(default_factory=dict)   # seed, n_boot, table_sha256 of the paired resamples
    coef: list[float] = field(default_factory=list)
    intercept: float = float("nan")
    psi_axes: dict[str, float] = field(default_factory=dict)
    cmi_sign: float = float("nan")
    direction: dict[str, Any] = field(default_factory=dict)   # a scalar's claim checked: slope and tau signs, against
    vs_recipe: list[float] = field(default_factory=list)  # k-fold R^2 minus the recipe's (same folds): point, 95% iv
    notes: list[str] = field(default_factory=list)
    predictions: pd.Series | None = None   # held-out predictions of shuffle 0 (not stored in the scores block)
    heldout: Any = None                    # [R, n] held-out predictions of every shuffle (stored with the values)
    samples: dict[str, Any] = field(default_factory=dict)     # score -> its values on the resamples (not stored)

    def __getattr__(self, name: str) -> float:
        if name in SCORE_NAMES:
            return self.values.get(name, float("nan"))
        raise AttributeError(name)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MeasureScores":
        """The inverse of to_dict (as stored in a result record; JSON nulls back to NaN)."""
        nan = float("nan")
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d and k not in _NOT_STORED}
        kw["values"] = {k: nan if v is None else v for k, v in d.get("values", {}).items()}
        kw["intervals"] = {k: tuple(nan if x is None else x for x in v) for k, v in d.get("intervals", {}).items()}
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (without the per-model predictions and the resampled values)."""
        d = {k: v for k, v in self.__dict__.items() if k not in _NOT_STORED}
        d["intervals"] = {k: list(v) for k, v in self.intervals.items()}
        return d


_NOT_STORED = ("predictions", "heldout", "samples")  # the record keeps predictions in its values block


def is_flat(direction: Any) -> bool:
    """Whether a direction check (scores.direction) found no direction at all: free slope and Kendall tau both 0,
    a measure that does not order the models, neither as claimed nor against its claim."""
    return isinstance(direction, Mapping) and direction.get("slope") == 0 and direction.get("tau") == 0


def phi_text(used: Any, declared: str = "") -> str:
    """The phi a fit used (scores.transform_used), short: the one on all models, then the training folds' choices
    where they differ from it ('log (folds: linear 100)': the k-fold R^2 beside it rests on the folds)."""
    used = used if isinstance(used, Mapping) else {}
    whole = str(used.get("all") or declared or "")
    folds = used.get("folds")
    if isinstance(folds, Mapping) and folds and set(folds) != {whole}:
        return f"{whole} (folds: " + ", ".join(f"{k} {v}" for k, v in folds.items()) + ")"
    return whole
