"""Which scores the views show, as the one list of scores (scoring/spec.py) says: the leaderboard's columns, those
shown with their interval, a submission's headline and the exported columns (the shown ones and the MSE)."""
from __future__ import annotations

from ..errors import did_you_mean
from ..scoring.spec import SCORE_NAMES, SCORES, Score

SHOWN = tuple(s.name for s in SCORES if s.shown)  # the leaderboard's score columns
WITH_INTERVAL = tuple(s.name for s in SCORES if s.interval)  # shown with their 95% interval beside them
HEADLINE = tuple(s.name for s in SCORES if s.headline)  # a submission's summary (`genbench submit`)
EXPORTED = tuple(n for n in SCORE_NAMES if n in SHOWN or n in ("mse", "kfold_r2_free"))  # csv/json, with intervals
_BY_NAME = {s.name: s for s in SCORES}
BASELINE_NOTE = ("a baseline row is a reference predictor, not a measure: it takes part in the rank groups but gets "
                 "no rank number (across zoos, its mean is its place among the measures, not a rank); a measure "
                 "below baseline.hparams predicts the gap worse than the training recipe alone, and what it adds to "
                 "the recipe is its delta R^2")


def score_spec(name: str) -> Score:
    """The score called `name` (its labels and direction); a did-you-mean error for an unknown one."""
    if name not in _BY_NAME:
        raise did_you_mean(name, SCORE_NAMES, what="score to sort by")
    return _BY_NAME[name]


def score_family(name: str) -> str:
    """The family a score's notes start with: 'robust sign-error' for the sign-errors, else its label."""
    spec = _BY_NAME.get(name)
    if spec is None:
        return name
    return spec.help.split(":")[0] if ":" in spec.help else spec.label
FRAGILITY_LEGEND = ("fragility (the audit): robust = every part ran on enough evidence and passed; fragile-value = "
                    "its value moves when training changes slightly while the test error does not, or when the "
                    "weights are rescaled around a ReLU without changing the network's function; fragile-trend = "
                    "its trend with the train size flips; fragile-scale = its scaling exponent changes; data-blind "
                    "= it does not follow the data's difficulty (label noise) closely: it tracks at most half of "
                    "the noise levels the test error tells apart, or its change is under 0.1 of the test error's "
                    "(elasticity); inconclusive = a part could not run or rests on too little; `genbench audit "
                    "MEASURE` shows the evidence (for a built-in measure; a submission's is in its record)")

