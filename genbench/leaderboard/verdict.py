"""The verdict a zoo's table opens with, in one sentence: the best measure, whether it beats the recipe
(baseline.hparams, compared pairwise on the zoo's resamples), what it and the others add to the recipe (delta_r2
with its paired interval), how many run against their own claim, on how many trainings of the grid each verdict
holds (settled or not), and the private training's scores beside the public ones. numpy only, like the ranking."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GenbenchError
from ..record import Record, private_block, private_score
from ..scoring.resample import percentile_interval
from ..scoring.spec import is_flat
from .format import DIGITS, interval, number, rank_text
from .standings import _heldout_array, _check_pairable, by_zoo, paired_draws

RECIPE = "baseline.hparams"
LISTED = 3  # entries named in the sentence before "and N more"


@dataclass
class Verdict:
    """What one zoo says: its best measure and its k-fold R^2, the recipe's, their paired difference, the entries
    that add to the recipe, and those running against their claim."""

    zoo: str
    best: Record | None = None
    recipe: Record | None = None
    difference: tuple[float, float, float] | None = None  # best - recipe: point, 95% interval
    adds: list[Record] = field(default_factory=list)
    against: list[Record] = field(default_factory=list)
    private: list[tuple[Record, dict[str, Any]]] = field(default_factory=list)  # entries with a private score

    @property
    def beats_recipe(self) -> bool | None:
        """Whether the best measure beats the recipe (its paired interval above 0); None when it cannot be said."""
        return None if self.difference is None else self.difference[1] > 0

    def sentence(self) -> str:
        """The verdict in words, e.g. "No measure beats the recipe (baseline.hparams 0.947); the best measure, X,
        reaches 0.893 (difference -0.054 [-0.07, -0.04]) and adds 0.003 [0.000, 0.007]; ..."."""
        if self.best is None:
            return "No measure is ranked on this zoo."
        best = self.best.measure or self.best.name
        if self.best.against_claim:
            best += f" (against its claim{over(self.best, 'against_claim', '; ')})"
        beats = over(self.best, "beats_recipe", "; beating it ")
        k = number(self.best.score("kfold_r2"), digits=DIGITS)
        adds = _adds(self.best)
        if self.recipe is None:
            head = (f"The best measure, {best}, reaches k-fold R\u00b2 {k} and {adds}; no {RECIPE} record on this "
                    "zoo to compare it with")
        elif self.difference is None:
            r = number(self.recipe.score("kfold_r2"), digits=DIGITS)
            head = (f"The best measure, {best}, reaches k-fold R\u00b2 {k} against {RECIPE} {r} (no paired interval "
                    f"holds their difference) and {adds}")
        else:
            r = number(self.recipe.score("kfold_r2"), digits=DIGITS)
            d = f"difference {_iv(*self.difference)}"
            if self.difference[1] > 0:
                head = (f"{best} beats the recipe{over(self.best, 'beats_recipe', ' (', ')')}: k-fold R\u00b2 {k} "
                        f"against {RECIPE} {r} ({d}), and {adds}")
            elif self.difference[2] < 0:
                head = f"No measure beats the recipe ({RECIPE} {r}); the best measure, {best}, reaches {k} ({d}" \
                       f"{beats}) and {adds}"
            else:
                head = f"No measure is told apart from the recipe ({RECIPE} {r}): the best, {best}, reaches {k} " \
                       f"({d}{beats}) and {adds}"
        others = [r for r in self.adds if r.name != self.best.name]
        if others:
            named = ", ".join(f"{r.measure or r.name} {_iv(*_delta(r))}{over(r, 'adds_to_recipe', ' (', ')')}"
                              + (" (against its claim)" if r.against_claim else "") for r in others[:LISTED])
            more = f" and {len(others) - LISTED} more" if len(others) > LISTED else ""
            tail = f"; also adding to the recipe: {named}{more}"
        else:
            tail = "; no other measure adds to the recipe"
        n = len(self.against)
        against = (f"; {n} measure runs against its own claim" if n == 1 else
                   f"; {n} measures run against their own claim" if n else "")
        return head + tail + against + self._private() + "."

    def _private(self) -> str:
        """The private training's word (issue 43): the entries with a private score, flagged ones first."""
        if not self.private:
            return ""
        order = sorted(self.private, key=lambda rs: (not rs[1]["flagged"], rs[0].name))
        told = ", ".join(f"{r.measure or r.name} {private_text(st)}" for r, st in order[:LISTED])
        more = f" and {len(order) - LISTED} more" if len(order) > LISTED else ""
        return f"; on the private training: {told}{more}"


def _delta(r: Record) -> tuple[float, float | None, float | None]:
    lo, hi = r.interval("delta_r2")
    return float(r.score("delta_r2")), lo, hi  # type: ignore[arg-type]


def adds_to_recipe(r: Record) -> bool:
    """Whether an entry adds to the recipe: the paired 95% interval of its delta_r2 lies above 0."""
    lo, _ = r.interval("delta_r2")
    return r.score("delta_r2") is not None and lo is not None and lo > 0


def _adds(r: Record, to: str = "it") -> str:
    """What an entry adds to the recipe in words ("adds 0.010 [0.005, 0.016] to it", "adds nothing to it (...)")."""
    if r.score("delta_r2") is None:
        why = r.refusal("delta_r2")
        return "has no delta to the recipe" + (f" ({why})" if why else "")
    delta = _delta(r)
    if adds_to_recipe(r):
        return f"adds {_iv(*delta)} to {to}{over(r, 'adds_to_recipe', ' (', ')')}"
    if None in delta[1:]:
        return f"may or may not add to {to} ({_iv(*delta)}: no interval, too few resamples or every one alike)"
    return f"adds nothing to {to} ({_iv(*delta)}{over(r, 'adds_to_recipe', '; ')})"


def over(r: Record, key: str, before: str = "", after: str = "") -> str:
    """How a verdict of an entry scored on several trainings holds over them, for the views: 'on 3 of 3 trainings,
    settled', 'on 2 of 3 trainings, unsettled', 'on 0 of 3 trainings, unsettled: its interval contains 0 on 2' (not
    shown either way there) or 'on 3 of 3 trainings, unsettled: a new training's interval is predicted within [-0.002,
    0.041], which contains 0' (the next training may not show it) between `before` and `after`; '' for an entry scored on one
    training (or a record that does not state the verdict)."""
    v = r.verdict_over(key)
    if v is None or v["trainings"][1] < 2:
        return ""
    held, of = v["trainings"]
    why = ""
    if v["open"]:
        why = f": its interval contains 0 on {v['open']}"
    elif not v["settled"] and held in (0, of) and v["predicted"]:  # every training shows it; the next may not
        why = f": a new training's interval is predicted within {interval(*v['predicted'], digits=DIGITS)}, " \
              "which contains 0"
    state = "settled" if v["settled"] else "unsettled" + why
    return f"{before}on {held} of {of} trainings, {state}{after}"


def _iv(v: float, lo: float | None, hi: float | None) -> str:
    return number(v, lo, hi, digits=DIGITS)


def zoo_verdicts(ranked: Sequence[Record]) -> dict[str, Verdict]:
    """The verdict of each zoo of `ranked` (rank_records' output, by any sort: the best measure is the one with
    the highest k-fold R^2, the ranking score)."""
    return {zoo: zoo_verdict(zoo, recs) for zoo, recs in by_zoo(ranked).items()}


def zoo_verdict(zoo: str, recs: Sequence[Record]) -> Verdict:
    """One zoo's verdict from its ranked records."""
    ok = [r for r in recs if r.ok and r.zoo_complete]
    measures = [r for r in ok if not r.baseline and r.score("kfold_r2") is not None]
    v = Verdict(zoo)
    if not measures:
        return v
    v.best = max(measures, key=lambda r: r.score("kfold_r2"))  # type: ignore[arg-type, return-value]
    v.recipe = next((r for r in ok if r.baseline and r.name == RECIPE and r.score("kfold_r2") is not None), None)
    v.adds = sorted((r for r in measures if adds_to_recipe(r)),  # settled additions first, then the largest
                    key=lambda r: (not (r.verdict_over("adds_to_recipe") or {}).get("settled"), -_delta(r)[0]))
    v.against = [r for r in measures if r.against_claim]
    if v.recipe is not None:
        v.difference = paired_difference(zoo, v.best, v.recipe)
    noise = training_noise(ok)
    v.private = [(r, st) for r in measures if (st := private_standing(r, noise)) is not None]
    return v


def groups_over_trainings(recs: Sequence[Record]) -> str:
    """How many rank groups a zoo's entries form and how many keep their group on each training alone ('' when
    the entries were not scored over trainings)."""
    over = [r.group_trainings for r in recs if r.group_trainings is not None]
    if not over:
        return ""
    same = sum(h == of for h, of in over)
    levels = len({r.rank_group for r in recs if r.rank_group is not None})
    return (f"rank groups over {over[0][1]} trainings: {levels} group{'s' * (levels != 1)}; {same} of {len(over)} "
            "entries are in the same group on each training on its own (settled), the others' group changes with "
            "the training (unsettled)")


def training_noise(recs: Sequence[Record]) -> float:
    """The training noise of the k-fold R^2 on a zoo: twice the median, over its built-in entries and baselines
    scored on several trainings, of the standard deviation of their per-training k-fold R^2 (a submission's own
    spread is never what it is held to: one that looks answers up spreads widely); TRAINING_NOISE_R2 when none is."""
    sds = []
    for r in recs:
        if r.builtin is not True and not r.baseline:
            continue
        per = r.training_scores("kfold_r2")
        if r.n_trainings > 1 and None not in per:
            sds.append(float(np.std(per, ddof=1)))
    return 2.0 * float(np.median(sds)) if sds else TRAINING_NOISE_R2


def private_text(st: Mapping[str, Any]) -> str:
    """'0.120 against public 0.912 (-0.792: does not hold on the private training)' / '0.88 against public 0.90'."""
    d = f"{st['difference']:+.3f}"
    flag = f": does not hold on the private training, more than the training noise {st['noise']:.3f} below" \
        if st["flagged"] else ""
    return (f"{number(st['private'], digits=DIGITS)} against public {number(st['public'], digits=DIGITS)} "
            f"({d}{flag})")


def paired_difference(zoo: str, a: Record, b: Record) -> tuple[float, float, float] | None:
    """k-fold R^2 of `a` minus that of `b` with the 95% interval of the difference on the zoo's paired resamples;
    None when the two records cannot be paired (other models, resamples or no held-out predictions) or the interval
    does not hold the estimate."""
    pair = [a, b]
    held = {r.name: _heldout_array(r) for r in pair}
    try:
        _check_pairable(zoo, pair, held)
    except GenbenchError:
        return None
    draws = paired_draws(pair, held, "kfold_r2")
    iv = percentile_interval(draws[0] - draws[1])
    point = float(a.score("kfold_r2") - b.score("kfold_r2"))  # type: ignore[operator]
    if iv is None or not iv[0] - 1e-12 <= point <= iv[1] + 1e-12:
        return None  # no interval, or one that does not hold its own estimate: no difference is reported
    return point, *iv


def entry_verdict(rec: Record, ranked: Sequence[Record]) -> list[str]:
    """What `genbench submit` (and an entry page) says of one record: its rank and group among the zoo's ranked
    records (`ranked`: rank_records' output, by kfold_r2), its difference to the recipe, what it adds to it, and the
    direction check (the audit's verdict, or why it did not run, is said beside it)."""
    mine = next((r for r in ranked if r.zoo_name == rec.zoo_name and r.name == rec.name), None)
    zoo = [r for r in ranked if r.zoo_name == rec.zoo_name]
    measures = sum(r.rank is not None for r in zoo)
    lines = []
    twin = next((r for r in ranked if r.zoo_name == rec.zoo_name and rec.name in r.aliases), None)
    if mine is None and twin is not None:
        lines.append(f"the same entry as {twin.measure or twin.name} (identical held-out predictions and scores): "
                     f"shown once, as its alias, at rank {rank_text(twin.rank)}")
    elif mine is None or mine.rank is None:
        why = ("its zoo is partial" if not rec.zoo_complete else "it has no k-fold R\u00b2"
               if rec.score("kfold_r2") is None else "the records could not be ranked together")
        lines.append(f"not ranked: {why}")
    else:
        tie = " (tied)" if mine.data.get("rank_tied") is True else ""
        others = {r.n_trainings for r in zoo if r.rank_group is not None}
        group = (f"group {rank_text(mine.rank_group)}" if mine.rank_group is not None else
                 f"no group (scored on {rec.n_trainings} training(s), the grouped entries on "
                 f"{', '.join(map(str, sorted(others))) or 'other numbers'})")
        if mine.group_trainings is not None and mine.rank_group is not None:
            held, of = mine.group_trainings
            group += f" (the same on {held} of {of} trainings, {'settled' if held == of else 'unsettled'})"
        lines.append(f"rank {rank_text(mine.rank)}{tie} of {measures} measures, {group} "
                     f"(k-fold R\u00b2 {_iv(rec.score('kfold_r2'), *rec.interval('kfold_r2'))}{trainings_text(rec)})")
    late = next((str(n) for n in rec.notes if str(n).startswith("provisional:")), None)
    if rec.provisional:
        lines.append(late or f"provisional: scored on {rec.n_trainings} training(s) of {rec.zoo_name}, fewer than the "
                     "official records")
    recipe = next((r for r in zoo if r.baseline and r.name == RECIPE and r.ok), None)
    if recipe is None:
        lines.append(f"no {RECIPE} record on {rec.zoo_name} to compare with: `genbench leaderboard baselines --zoo "
                     f"{rec.zoo_name}` makes it")
    elif rec.score("kfold_r2") is not None and recipe.score("kfold_r2") is not None:
        d = paired_difference(rec.zoo_name, rec, recipe)
        r = number(recipe.score("kfold_r2"), digits=DIGITS)
        if d is None:
            lines.append(f"{RECIPE} reaches {r}; no paired interval holds the difference (the records cannot be paired, "
                         "or the resamples do not support it)")
        else:
            word = "above" if d[1] > 0 else "below" if d[2] < 0 else "not told apart from"
            lines.append(f"{word} the recipe: {RECIPE} {r}, difference {_iv(*d)}")
    lines.append(_adds(rec, to="the recipe"))
    lines.append(direction_text(rec))
    st = private_standing(rec, training_noise(zoo))
    if st is not None:
        lines.append(f"private training ({st['zoo']}): k-fold R\u00b2 {private_text(st)}")
    return lines


# How far below its public k-fold R^2 an entry's private one may fall before it is flagged "does not hold on the
# private training", when no measured training noise is passed in.
TRAINING_NOISE_R2 = 0.1


def private_standing(record: Mapping[str, Any], noise: float = TRAINING_NOISE_R2) -> dict[str, Any] | None:
    """A record's public and private k-fold R^2, their difference (private - public) and `flagged`: the private one
    lies more than `noise` (the training noise of the k-fold R^2) below the public one, so the entry does not hold on
    the private training. None when the record has no private score."""
    private = private_score(record)
    public = Record.of(record).score("kfold_r2")
    if private is None or public is None:
        return None
    return {"zoo": str(private_block(record).get("zoo")), "public": public, "private": private,  # type: ignore[union-attr]
            "difference": private - public, "flagged": public - private > noise, "noise": noise}


def trainings_text(rec: Record) -> str:
    """'; mean over 3 trainings: 0.801, 0.809, 0.767' for an entry scored on several trainings of its grid (each
    training's k-fold R^2), else ''."""
    if rec.n_trainings < 2:
        return ""
    each = rec.training_scores("kfold_r2")
    return f"; mean over {rec.n_trainings} trainings: " + ", ".join(number(v, digits=DIGITS) for v in each)


def direction_text(rec: Record) -> str:
    """The direction check in words."""
    d = rec.direction
    if not d:
        return ("direction: not checked (the record holds no direction check)" if rec.kind == "scalar" and
                not rec.baseline else "direction: not checked (a signature's fit or a baseline predicts the gap "
                "itself)")
    if d.get("claim") is None:
        return "direction: none declared (register_measure(higher_means=...)), so none checked"
    tau = rec.score("tau")
    if d.get("against"):
        free = number(rec.score("kfold_r2_free"), digits=DIGITS)
        slope = {1.0: "positive", -1.0: "negative", 0.0: "zero"}.get(d.get("slope"), "none (no regression score)")
        return (f"AGAINST ITS CLAIM: it declares {d['claim']}, but its free slope is {slope} and its Kendall \u03c4 "
                f"{number(tau, digits=DIGITS)}; its ranking k-fold R\u00b2 holds the slope to the claim (free fit: "
                f"{free})")
    if is_flat(d):
        return (f"direction: none observed: its free slope and Kendall \u03c4 are 0 (its values do not order the "
                f"models), so its claim ({d['claim']}) is not borne out")
    return f"direction: as claimed ({d['claim']}; Kendall \u03c4 {number(tau, digits=DIGITS)})"
