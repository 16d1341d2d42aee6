"""The leaderboard's one ranking: per zoo, best first by one score, with rank groups; and the mean rank across
zoos. Records made on a partial zoo are listed apart, unranked. The terminal, the text exports and the web page
all show this order."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..scoring.spec import DEFAULT_SORT
from .schema import Record, score_spec



def rank_records(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT) -> list[Record]:
    """Rank the ok records of each zoo by `sort` (best first, ties by name), zoos in name order, and give rank
    groups: walking down the ranking, an entry joins the current group while its 95% interval overlaps the interval
    of the group's first entry, else it starts the next. Unranked after them, by name: the records made on a
    partial zoo (their scores describe other models: `partial_note` says why), then failed and unscored ones."""
    sign = 1.0 if score_spec(sort).lower_is_better else -1.0
    recs = [Record.of(r) for r in records]
    out: list[Record] = []
    for zoo in sorted({r.zoo_name for r in recs}):
        mine = [r for r in recs if r.zoo_name == zoo]
        scored = sorted((r for r in mine if r.ok and r.zoo_complete and r.score(sort) is not None),
                        key=lambda r: (sign * r.score(sort), r.name))  # type: ignore[operator]
        group, lead = 0, (None, None)
        for i, r in enumerate(scored, 1):
            iv = r.interval(sort)
            if group == 0 or not _overlaps(iv, lead):
                group, lead = group + 1, iv
            out.append(r.with_rank(i, group))
        ranked = {id(r) for r in scored}
        out += [r.with_rank(None, None) for r in sorted((r for r in mine if id(r) not in ranked),
                                                        key=lambda r: (not (r.ok and not r.zoo_complete), r.name))]
    return out


def partial_note(record: Mapping[str, Any]) -> str:
    """Why a record made on a partial zoo is not ranked ('' for a record on a complete zoo): its scores describe
    some of the zoo's models, so they are not comparable with scores on all of them."""
    r = Record.of(record)
    if r.zoo_complete:
        return ""
    n, expected = r.zoo_models, r.zoo_expected_models
    counts = f"{n} of {expected} models" if n is not None and expected is not None else "not every model"
    return f"unranked: partial zoo ({counts})"


def _overlaps(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    if None in a or None in b:
        return False
    return a[0] <= b[1] and b[0] <= a[1]  # type: ignore[operator]


def by_zoo(ranked: Iterable[Record]) -> dict[str, list[Record]]:
    """Ranked records per zoo, in the ranking's order."""
    zoos: dict[str, list[Record]] = {}
    for r in ranked:
        zoos.setdefault(r.zoo_name, []).append(r)
    return zoos


@dataclass
class MeanRank:
    """One entry across zoos: its rank on each zoo where it is ranked, and their mean."""

    entry: str
    kind: str | None
    ranks: dict[str, int] = field(default_factory=dict)
    local: bool = False  # whether any of its ranks comes from a local (the user's own, unverified) record

    @property
    def zoos(self) -> int:
        """On how many zoos the entry is ranked."""
        return len(self.ranks)

    @property
    def mean_rank(self) -> float:
        """The mean of its per-zoo ranks."""
        return sum(self.ranks.values()) / len(self.ranks)


def mean_ranks(ranked: Sequence[Record]) -> list[MeanRank]:
    """Across zoos: each entry's mean rank over the zoos where it is ranked (lower is better), best first, ties
    by name; failed and missing entries are left out of a zoo rather than penalised."""
    rows: dict[str, MeanRank] = {}
    for r in ranked:
        if r.rank is not None:
            row = rows.setdefault(r.name, MeanRank(r.name, r.kind))
            row.ranks[r.zoo_name], row.local = int(r.rank), row.local or r.local
    return sorted(rows.values(), key=lambda m: (m.mean_rank, m.entry))


def aggregate_table(records: Iterable[Mapping[str, Any]], sort: str = DEFAULT_SORT) -> pd.DataFrame:
    """The mean ranks across zoos as a table: entry, mean_rank, zoos, local."""
    rows = [{"entry": m.entry, "mean_rank": m.mean_rank, "zoos": m.zoos, "local": m.local}
            for m in mean_ranks(rank_records(records, sort))]
    return pd.DataFrame(rows, columns=["entry", "mean_rank", "zoos", "local"])
