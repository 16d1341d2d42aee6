"""The DEMOGEN Tables 1 and 4 drawn from the records' stored scores (no torch: the page never re-scores)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..defaults import DEMOGEN_ZOO
from ..record import Record
from ..scoring.demogen import demogen_tables

if TYPE_CHECKING:
    import pandas as pd


def ablation_tables(records: Iterable[Mapping[str, Any]], zoo: str = DEMOGEN_ZOO
                    ) -> dict[str, pd.DataFrame] | None:
    """The DEMOGEN Tables 1 and 4 from the built-in records of `zoo`, when they hold every margin entry."""
    ok = [r for r in map(Record.of, records) if r.zoo_name == zoo and r.ok and r.builtin]
    return demogen_tables({r.measure: r.measure_scores() for r in ok})
