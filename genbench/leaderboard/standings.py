"""The leaderboard's one ranking: per zoo, best first by one score, with paired rank groups recomputed from the
records' held-out predictions (the same bootstrap resamples for every entry); equivalent entries shown once, with
their aliases; baseline rows ranked among the measures but given no rank number; and the mean rank across zoos.
Records made on a partial zoo are listed apart, unranked. The terminal, the text exports and the web page all show
this order. numpy only (no torch, no scikit-learn): the leaderboard command stays fast."""
from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..defaults import CHECK_ZOO, EXTERNAL_PREFIX, OFFICIAL_ZOOS
from ..errors import GenbenchError
from ..record import Record, regenerate_command
from ..scoring.resample import paired_groups, pooled_scores, resample_weights
from ..scoring.spec import DEFAULT_SORT, SCORE_NAMES, score_label
from ..scoring.trainings import combine_draws, training_picks
from .columns import score_family, score_spec

PAIRED = {"kfold_r2": 0, "mse": 1}  # sort keys with rank groups: their index in pooled_scores' pair
SAME_PREDICTIONS = 1e-12  # two entries whose held-out predictions agree this closely ...
SAME_SCORES = 1e-9        # ... and whose point scores agree this closely are the same entry


def group_rule(sort: str = DEFAULT_SORT) -> str:
    """The rank-group rule, as every view that shows groups states it; for a sort key without groups, why none."""
    if sort not in PAIRED:
        return (f"group: none when ranked by {sort}; rank groups come from the paired bootstrap of the k-fold R^2 "
                "or the held-out MSE (--sort kfold_r2 or --sort mse)")
    what = "k-fold R^2" if sort == "kfold_r2" else "held-out MSE"
    return f"group: entries whose paired 95% bootstrap interval of the {what} difference with the group's leader " \
           "contains 0"


def rank_records(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT) -> list[Record]:
    """Rank the ok records of each zoo by `sort` (best first, ties by name), zoos in `zoo_order`. Equivalent entries
    (the same held-out predictions and scores) are shown once, a built-in before a submission (`merge_equivalent`),
    with `aliases`; baseline rows are ranked among the measures with no rank number (measures are numbered 1, 2,
    ...); rank groups (kfold_r2 and mse only) come from paired bootstrap differences with the group's leader
    (`group_rule`). Unranked after them, by name: the records made on a partial zoo (`partial_note` says why), then
    failed and unscored ones."""
    zoos: dict[str, list[Record]] = {}
    for r in map(Record.of, records):
        zoos.setdefault(r.zoo_name, []).append(r)
    return [r for zoo in sorted(zoos, key=zoo_order) for r in _rank_zoo(zoo, zoos[zoo], sort)]


def zoo_order(zoo: str) -> tuple[int, int, str]:
    """Where a zoo's table goes in every view: the official zoos first (in OFFICIAL_ZOOS' order), then other zoos
    by name, then value tables from elsewhere, the test zoo (CHECK_ZOO) last."""
    if zoo in OFFICIAL_ZOOS:
        return 0, OFFICIAL_ZOOS.index(zoo), zoo
    return (3 if zoo == CHECK_ZOO else 2 if zoo.startswith(EXTERNAL_PREFIX) else 1), 0, zoo


EXTERNAL_LABEL = "external values: computed elsewhere, never verified, never ranked officially"


def zoo_label(zoo: str) -> str:
    """How every view labels a zoo that is not official ('' for an official one)."""
    if zoo in OFFICIAL_ZOOS:
        return ""
    if zoo.startswith(EXTERNAL_PREFIX):
        return EXTERNAL_LABEL
    return "test zoo" if zoo == CHECK_ZOO else "not an official zoo"


def zoo_title(zoo: str) -> str:
    """A zoo's name with its label, e.g. 'digits-mlp (test zoo)'."""
    label = zoo_label(zoo)
    return f"{zoo} ({label})" if label else zoo


def _rank_zoo(zoo: str, mine: list[Record], sort: str) -> list[Record]:
    """The records of one zoo, ranked (rank_records)."""
    sign = 1.0 if score_spec(sort).lower_is_better else -1.0
    comparable = [r for r in mine if r.ok and r.zoo_complete]
    _check_same_zoo(zoo, comparable)
    heldout = {r.name: _heldout_array(r) for r in comparable}
    shown, aliases = merge_equivalent(comparable, heldout)
    scored = sorted((r for r in shown if r.score(sort) is not None),
                    key=lambda r: (sign * r.score(sort), r.name))  # type: ignore[operator]
    counts = Counter(r.n_trainings for r in scored)
    full = max(counts, key=lambda t: (counts[t], t)) if counts else 1  # what most entries are scored on
    pairable = [r for r in scored if r.n_trainings == full]  # the others (e.g. provisional): ranked, no group
    combined = paired_rank_groups(zoo, pairable, heldout, sort) if sort in PAIRED else [None] * len(pairable)
    per = training_groups(pairable, heldout, sort) if sort in PAIRED and full > 1 else {}
    groups = iter(combined)
    groups = [next(groups) if r.n_trainings == full else None for r in scored]  # type: ignore[assignment]
    out, number, last = [], 0, None
    ties = tied(scored, sort)
    for r, g in zip(scored, groups):
        number += not r.baseline  # measures are numbered among themselves
        if not r.baseline and (last is None or r.name not in ties or ties[r.name] != ties.get(last.name)):
            last, shared = r, number  # a tie shares the rank of its first member (=22), never an alphabetical one
        ranked = r.with_rank(None if r.baseline else shared, g, aliases.get(r.name, []))
        if r.name in per and g is not None:  # the paired group as a verdict: is it the same on each training?
            held = sum(x == g for x in per[r.name])
            ranked = Record({**ranked.data, "group_trainings": [held, len(per[r.name])]})
        out.append(Record({**ranked.data, "rank_tied": True}) if r.name in ties and not r.baseline else ranked)
    placed = {r.name for r in scored} | {a for names in aliases.values() for a in names}
    rest = sorted((r for r in mine if not (r.ok and r.zoo_complete and r.name in placed)),
                  key=lambda r: (not (r.ok and not r.zoo_complete), r.name))
    return out + [r.with_rank(None, None, aliases.get(r.name)) for r in rest]


TIED = 1e-12  # measures whose ranking scores differ by no more than this share a rank


def tied(scored: Sequence[Record], sort: str) -> dict[str, int]:
    """The measures among `scored` (sorted by `sort`) whose ranking score equals another measure's (within TIED),
    each with the index of its tie in order: they share one rank, shown as '=N' (e.g. measures held to their claim
    that all predict the training mean). Baselines are never part of a tie: they have no rank."""
    out: dict[str, int] = {}
    runs: list[list[Record]] = []
    for r in (r for r in scored if not r.baseline):
        if runs and abs(r.score(sort) - runs[-1][0].score(sort)) <= TIED:  # type: ignore[operator]
            runs[-1].append(r)
        else:
            runs.append([r])
    for i, run in enumerate(r for r in runs if len(r) > 1):
        out.update({r.name: i for r in run})
    return out


# ---------------------------------------------------------------- equivalent entries


def _heldout_array(r: Record) -> np.ndarray | None:
    """A record's held-out predictions as a float array [R, n] (NaN where a model has no value); None when absent
    or not a rectangle of one value per model."""
    h, ids = r.heldout, r.model_ids
    if h is None or ids is None:
        return None
    try:
        a = np.array(h, dtype=float)
    except (TypeError, ValueError):
        return None
    return a if a.ndim == 2 and a.shape[1] == len(ids) else None


def _same_scores(a: Record, b: Record) -> bool:
    """Whether two records report the same point scores (within SAME_SCORES) and refuse the same ones."""
    ka, kb = set(a.score_keys()), set(b.score_keys())
    if set(a.refused) != set(b.refused) or (ka ^ kb) - set(SCORE_NAMES):  # a score only one genbench version knows
        return False
    keys = ka | kb
    for k in keys:
        x, y = a.score(k), b.score(k)
        if (x is None) != (y is None) or (x is not None and abs(x - y) > SAME_SCORES):  # type: ignore[operator]
            return False
    return True


def equivalent(a: Record, b: Record, ha: np.ndarray | None, hb: np.ndarray | None) -> bool:
    """Whether two records of one zoo are the same entry: both measures or both baselines, on the same models, with
    held-out predictions that agree within SAME_PREDICTIONS and point scores within SAME_SCORES."""
    if ha is None or hb is None or ha.shape != hb.shape or a.baseline != b.baseline:
        return False
    ka, kb = a.score("kfold_r2"), b.score("kfold_r2")  # the cheap test first: most pairs differ here
    if (ka is None) != (kb is None) or (ka is not None and abs(ka - kb) > SAME_SCORES):  # type: ignore[operator]
        return False
    return (bool(np.allclose(ha, hb, rtol=0.0, atol=SAME_PREDICTIONS, equal_nan=True)) and a.model_ids == b.model_ids
            and _same_scores(a, b))


def _shown_first(r: Record) -> tuple[bool, bool, str]:
    """The order in which equivalent records claim the row: built-ins, then verified records, then by name."""
    return r.builtin is not True or r.submission is not None, r.local, r.name


def merge_equivalent(recs: Sequence[Record], heldout: Mapping[str, np.ndarray | None]
                     ) -> tuple[list[Record], dict[str, list[str]]]:
    """The records to show (of each set of equivalent ones: a built-in first, then a verified record before a local one,
    then the first by name) and, per shown name, the names of the records it stands for (its aliases). A submission
    equal to a built-in is shown as the built-in's alias, never in its place, whatever its name."""
    shown: list[Record] = []
    aliases: dict[str, list[str]] = {}
    for r in sorted(recs, key=_shown_first):
        same = next((s for s in shown if equivalent(s, r, heldout.get(s.name), heldout.get(r.name))), None)
        if same is None:
            shown.append(r)
        else:
            aliases.setdefault(same.name, []).append(r.name)
    return shown, aliases


# ---------------------------------------------------------------- paired rank groups


def _names(recs: Iterable[Record]) -> str:
    return ", ".join(sorted(r.name for r in recs))


def _split(recs: Sequence[Record], key: Callable[[Record], Hashable]) -> dict[Hashable, list[Record]]:
    """The records by the value of `key`, the most common value first."""
    parts: dict[Hashable, list[Record]] = {}
    for r in recs:
        parts.setdefault(key(r), []).append(r)
    return dict(sorted(parts.items(), key=lambda kv: -len(kv[1])))


def _odd(parts: Mapping[Hashable, list[Record]]) -> list[Record]:
    """The records outside the most common part of a `_split`."""
    return [r for rs in list(parts.values())[1:] for r in rs]


SHOWN_COMMANDS = 3  # a message names the commands of this many records, then counts the others


def _commands(recs: Sequence[Record], extra: str = "") -> str:
    """The commands that make `recs` again (record.regenerate_command, each followed by `extra` options), quoted."""
    cmds = list(dict.fromkeys(f"`{_without(regenerate_command(r), extra)}{extra}`" for r in recs))
    more = len(cmds) - SHOWN_COMMANDS
    return ", ".join(cmds[:SHOWN_COMMANDS]) + (f" and {more} more like them" if more > 0 else "")


def _without(command: str, extra: str) -> str:
    """`command` without the options `extra` sets again (its `--n-boot 200` before the fix's `--n-boot 1000`)."""
    for flag in re.findall(r"(--[\w-]+)", extra):
        command = re.sub(rf" {re.escape(flag)}(?:=| )\S+", "", command)
    return command


def _check_same_zoo(zoo: str, recs: Sequence[Record]) -> None:
    """Records of one zoo name must come from one version of its table: else they score different models."""
    parts = _split(recs, lambda r: (r.zoo.get("version"), r.table_sha256))
    if len(parts) > 1:
        what = "; ".join(f"version {v}, table {str(h)[:12]}: {_names(rs)}" for (v, h), rs in parts.items())
        raise GenbenchError(f"the records of zoo {zoo!r} come from different versions of it ({what}); records made on "
                            "different zoo tables are not comparable: regenerate the odd ones on the current zoo "
                            f"with {_commands(_odd(parts))}, or rank them from separate --results folders")


def _gap(r: Record) -> np.ndarray | None:
    """The record's target per model (values.gap) as floats; None when it is not one number per model."""
    gap, ids = (r.values or {}).get("gap"), r.model_ids
    try:
        a = np.array(gap, dtype=float)
    except (TypeError, ValueError):
        return None
    return a if ids is not None and a.shape == (len(ids),) else None


def _check_pairable(zoo: str, recs: Sequence[Record], heldout: Mapping[str, np.ndarray | None]) -> None:
    """Paired groups need every entry's held-out predictions on the same models and the same resamples; name the
    records that break this, and say how to fix it."""
    lacking = [r for r in recs if heldout.get(r.name) is None or _gap(r) is None or r.paired_settings is None]
    if lacking:
        raise GenbenchError(f"cannot form paired rank groups on {zoo!r}: {_names(lacking)} lack the held-out "
                            "predictions of every shuffle (values.heldout), the gaps or the bootstrap settings "
                            f"(scores.bootstrap) that pairing needs; regenerate them with {_commands(lacking)}, or "
                            "rank by a score without groups (e.g. --sort tau)")
    parts = _split(recs, lambda r: r.paired_settings[1:])  # type: ignore[index]
    if len(parts) > 1:
        what = "; ".join(f"seed {s}, n_boot {b}: {_names(rs)}" for (s, b), rs in parts.items())
        seed, n_boot = next(iter(parts))  # type: ignore[misc]
        raise GenbenchError(f"cannot pair the records of {zoo!r}: they were made with different bootstrap settings "
                            f"({what}), so their resamples differ; regenerate the odd ones with the same settings "
                            f"({_commands(_odd(parts), f' --n-boot {n_boot}')}, seed {seed})")
    parts = _split(recs, lambda r: r.paired_settings[0])  # type: ignore[index]
    if len(parts) > 1:
        what = "; ".join(f"table {str(h)[:12]}: {_names(rs)}" for h, rs in parts.items())
        raise GenbenchError(f"cannot pair the records of {zoo!r}: their resamples come from different zoo tables "
                            f"({what}); regenerate the odd ones with {_commands(_odd(parts))}")
    parts = _split(recs, lambda r: r.n_trainings)
    if len(parts) > 1:
        what = "; ".join(f"{t} training(s): {_names(rs)}" for t, rs in parts.items())
        raise GenbenchError(f"cannot pair the records of {zoo!r}: they are scored on different numbers of trainings "
                            f"of the grid ({what}); score the odd ones on the same trainings "
                            f"({_commands(_odd(parts), f' --trainings {next(iter(parts))}')})")
    lacking = [r for r in recs if any(_training_arrays(r, t) is None for t in range(1, r.n_trainings))]
    if lacking:
        raise GenbenchError(f"cannot pair the records of {zoo!r}: {_names(lacking)} lack a training's gaps or held-out "
                            f"predictions (trainings.zoos[t]); regenerate them with {_commands(lacking)}")
    parts = _split(recs, lambda r: tuple(r.model_ids or ()))
    if len(parts) > 1:
        what = "; ".join(f"{len(ids)} models ({', '.join(ids[:2])}{', ...' if len(ids) > 2 else ''}): {_names(rs)}"
                         for ids, rs in parts.items())  # type: ignore[arg-type]
        raise GenbenchError(f"cannot pair the records of {zoo!r}: they hold values for different model lists "
                            f"({what}); regenerate the odd ones on the complete zoo with {_commands(_odd(parts))}")


@functools.lru_cache(maxsize=8)
def _weights(n: int, table: str, seed: int, n_boot: int) -> np.ndarray:
    """The zoo's resample matrix, made once per zoo (a site pairs each entry with the recipe on it), read-only."""
    w = resample_weights(n, table_sha256=table, seed=seed, n_boot=n_boot)
    w.flags.writeable = False
    return w


def _training_arrays(r: Record, t: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Training t's (gap [n], held-out predictions [R, n]) of a record: training 0's from its values block, a later
    one's from its trainings block; None when absent or not one value per model."""
    if t == 0:
        y, h = _gap(r), _heldout_array(r)
        return None if y is None or h is None else (y, h)
    part, n = r.training_part(t), len(r.model_ids or ())
    try:
        y, h = np.array(part.get("gap"), dtype=float), np.array(part.get("heldout"), dtype=float)
    except (TypeError, ValueError):
        return None
    return (y, h) if y.shape == (n,) and h.ndim == 2 and h.shape[1] == n else None


def _one_training_draws(parts: Sequence[tuple[np.ndarray, np.ndarray]], w: np.ndarray, sort: str) -> np.ndarray:
    """[E, B] pooled k-fold R^2 or MSE draws of one training's (gap, held-out) per entry on the resamples w
    (resample.pooled_scores; entries with the same target, models and number of shuffles in one product)."""
    out = np.empty((len(parts), len(w)))
    batches: dict[tuple[bytes, bytes, int], list[int]] = {}
    for i, (y, h) in enumerate(parts):
        ok = np.isfinite(y) & np.isfinite(h).all(0)
        batches.setdefault((y.tobytes(), ok.tobytes(), len(h)), []).append(i)
    for idx in batches.values():
        out[idx] = pooled_scores(parts[idx[0]][0], np.stack([parts[i][1] for i in idx]), w)[PAIRED[sort]]
    return out


def paired_draws(recs: Sequence[Record], heldout: Mapping[str, np.ndarray | None], sort: str) -> np.ndarray:
    """[E, B] bootstrap draws of the ranking score of each entry, all on the zoo's one resample matrix (a function
    of its table hash and the seed): the pooled repeated k-fold R^2 or MSE of the record's held-out predictions.
    Entries scored on T > 1 trainings of the grid (all of them on the same T): on each training, on the same
    resamples, combined by the two-stage bootstrap (scoring/trainings.py) on the same training draws."""
    table, seed, n_boot = recs[0].paired_settings  # type: ignore[misc]
    w = _weights(len(recs[0].model_ids or ()), table, seed, n_boot)
    t_of = recs[0].n_trainings
    per = []
    for t in range(t_of):
        parts = [_training_arrays(r, t) for r in recs]
        if t == 0:
            parts = [(_gap(r), heldout[r.name]) for r in recs]  # type: ignore[misc]
        per.append(_one_training_draws(parts, w, sort))  # type: ignore[arg-type]
    if t_of == 1:
        return per[0]
    return combine_draws(np.stack(per, 1), training_picks(t_of, n_boot, table_sha256=table, seed=seed))


def training_groups(recs: Sequence[Record], heldout: Mapping[str, np.ndarray | None], sort: str
                    ) -> dict[str, list[int]]:
    """Each entry's rank group on each training of the grid on its own: the entries (all on the same T trainings,
    already checked pairable) ranked by that training's score and grouped on that training's draws (the same
    resamples), by `group_rule`. {} when a training's score is missing for some entry."""
    table, seed, n_boot = recs[0].paired_settings  # type: ignore[misc]
    w = _weights(len(recs[0].model_ids or ()), table, seed, n_boot)
    sign = 1.0 if score_spec(sort).lower_is_better else -1.0
    out: dict[str, list[int]] = {r.name: [] for r in recs}
    scores = [r.training_scores(sort) for r in recs]
    for t in range(recs[0].n_trainings):
        points = [per[t] for per in scores]
        if any(p is None for p in points):
            return {}
        parts = [(_gap(r), heldout[r.name]) if t == 0 else _training_arrays(r, t) for r in recs]
        draws = _one_training_draws(parts, w, sort)  # type: ignore[arg-type]
        order = sorted(range(len(recs)), key=lambda i: (sign * points[i], recs[i].name))  # type: ignore[operator]
        groups = paired_groups([points[i] for i in order], draws[order])
        for i, g in zip(order, groups):
            out[recs[i].name].append(g)
    return out


def paired_rank_groups(zoo: str, scored: Sequence[Record], heldout: Mapping[str, np.ndarray | None],
                       sort: str) -> list[int]:
    """Rank groups of the entries of one zoo, sorted best first by `sort` (kfold_r2 or mse): `group_rule`."""
    if not scored:
        return []
    _check_pairable(zoo, scored, heldout)
    draws = paired_draws(scored, heldout, sort)
    return paired_groups([r.score(sort) for r in scored], draws)  # type: ignore[arg-type]


# ---------------------------------------------------------------- what a view says about a zoo


def partial_note(record: Mapping[str, Any]) -> str:
    """Why a record made on a partial zoo is not ranked ('' for a record on a complete zoo): its scores describe
    some of the zoo's models, so they are not comparable with scores on all of them."""
    r = Record.of(record)
    if r.zoo_complete:
        return ""
    n, expected = r.zoo_models, r.zoo_expected_models
    counts = f"{n} of {expected} models" if n is not None and expected is not None else "not every model"
    return f"unranked: partial zoo ({counts})"


def empty_scores(recs: Iterable[Record], keys: Iterable[str]) -> dict[str, str | None]:
    """The scores among `keys` that no ok record of one zoo has a value for (their columns are not shown on it),
    each with why: the records' note on the score's family (e.g. 'robust sign-error: ...') or naming it (e.g. 'grid
    scores (Psi, CMI) skipped: ...'), else a refusal, else '' (the records do not say); None for a score computed on
    some zoos only (`only_on`), whose absence needs no note."""
    ok = [r for r in recs if r.ok]
    out: dict[str, str | None] = {}
    for k in keys:
        if not ok or any(r.score(k) is not None for r in ok):
            continue
        if score_spec(k).only_on:  # a score of some zoos only (the PGDL score): hidden elsewhere, without a note
            out[k] = None
            continue
        note = next((n for r in ok if (n := r.note_on(score_family(k)))), None) or next(
            (str(n) for r in ok for n in r.notes if re.search(rf"\b{re.escape(score_spec(k).ascii)}\b", str(n))), None)
        refused = next((r for r in ok if r.refusal(k)), None)
        out[k] = note or (f"{score_label(k)}: refused (e.g. {refused.name}: {refused.refusal(k)})" if refused else "")
    return out


def hidden_lines(hidden: Mapping[str, str | None], *, shown: bool = True) -> list[str]:
    """One line per reason: which score columns a table does not show (`shown`; else: which are empty, by their
    keys, as in csv and json), and why."""
    by_reason: dict[str, list[str]] = {}
    for k, why in hidden.items():
        if why is not None:
            by_reason.setdefault(why, []).append(score_label(k) if shown else k)
    what = "not shown" if shown else "empty"
    return [f"{what} ({', '.join(cols)}): no entry has a value on this zoo" + (f"; {why}" if why else "")
            for why, cols in by_reason.items()]


def by_zoo(ranked: Iterable[Record]) -> dict[str, list[Record]]:
    """Ranked records per zoo, in the ranking's order."""
    zoos: dict[str, list[Record]] = {}
    for r in ranked:
        zoos.setdefault(r.zoo_name, []).append(r)
    return zoos


# ---------------------------------------------------------------- across zoos


@dataclass
class MeanRank:
    """One entry across zoos: its rank on each zoo where it is ranked, and their mean. A baseline row's "rank" is its
    place among the measures (how many are ranked above it, plus 0.5): a reference, not a rank."""

    entry: str
    kind: str | None
    ranks: dict[str, float] = field(default_factory=dict)
    local: bool = False  # whether any of its ranks comes from a local (the user's own, unverified) record
    baseline: bool = False
    provisional: bool = False  # whether any of its ranks comes from a provisional record (fewer trainings)

    @property
    def zoos(self) -> int:
        """On how many zoos the entry is ranked."""
        return len(self.ranks)

    @property
    def mean_rank(self) -> float:
        """The mean of its per-zoo ranks."""
        return sum(self.ranks.values()) / len(self.ranks)


def mean_ranks(ranked: Sequence[Record]) -> list[MeanRank]:
    """Across the official zoos (defaults.OFFICIAL_ZOOS, complete builds only): each entry's mean rank over the zoos
    where it is ranked (lower is better), best first, ties by name; failed and missing entries are left out of a zoo
    rather than penalised. Baseline rows come with them as references: their place on a zoo is the number of
    measures ranked above them plus 0.5. The rule: defaults.AGGREGATE_RULE."""
    rows: dict[str, MeanRank] = {}
    above: dict[str, int] = {}  # per zoo: measures ranked so far, walking down the ranking
    for r in ranked:
        if r.zoo_name not in OFFICIAL_ZOOS or not r.zoo_complete:
            continue
        if r.rank is not None:
            row = rows.setdefault(r.name, MeanRank(r.name, r.kind))
            row.ranks[r.zoo_name], row.local = int(r.rank), row.local or r.local
            row.provisional = row.provisional or r.provisional
            above[r.zoo_name] = above.get(r.zoo_name, 0) + 1  # measures, not ranks: a tie shares one
        elif r.baseline and r.ok and r.score(DEFAULT_SORT) is not None:
            row = rows.setdefault(r.name, MeanRank(r.name, r.kind, baseline=True))
            row.ranks[r.zoo_name] = above.get(r.zoo_name, 0) + 0.5
    return sorted(rows.values(), key=lambda m: (m.mean_rank, m.entry))


def aggregate_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT, *,
                    ranked: Sequence[Record] | None = None) -> pd.DataFrame:
    """The mean ranks across zoos as a table: entry, mean_rank, zoos, local, baseline (a reference row: its mean
    place among the measures) (`ranked`: the records already ranked)."""
    rows = [{"entry": m.entry, "mean_rank": m.mean_rank, "zoos": m.zoos, "local": m.local, "baseline": m.baseline,
             "provisional": m.provisional}
            for m in mean_ranks(ranked if ranked is not None else rank_records(records, sort))]
    return pd.DataFrame(rows, columns=["entry", "mean_rank", "zoos", "local", "baseline", "provisional"])
