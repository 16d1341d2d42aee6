"""The shipped records cite the measure sources this checkout has, so `genbench verify` can re-run every one of them:
a change to a measure's module (its source hash) that the records do not follow would turn each into "cannot
verify" without a test failing. Every zoo with shipped records counts, the official ones and the MLP zoos."""
from __future__ import annotations

from pathlib import Path

import pytest

from genbench.defaults import OFFICIAL_ZOOS
from genbench.entries.run import baselines_source_hash
from genbench.entries.verify import is_submission
from genbench.measures.registry import get_measure, list_measures
from genbench.record import Record

RESULTS = Path(__file__).resolve().parents[1] / "leaderboard" / "results"


def shipped_records() -> list[Path]:
    return sorted(RESULTS.glob("*/*.json"))


def test_every_shipped_record_cites_the_source_it_would_be_verified_against():
    records = shipped_records()
    zoos = {p.parent.name for p in records}
    assert set(OFFICIAL_ZOOS) <= zoos and len(zoos) >= 4  # the official zoos and the two MLP zoos
    measures, stale = set(list_measures()), []
    checked = {"measure": 0, "baseline": 0}
    for path in records:
        rec = Record.read(path)
        if is_submission(rec):
            continue
        if rec.measure in measures:
            want, kind = get_measure(rec.measure).source_hash, "measure"
        else:
            want, kind = baselines_source_hash(), "baseline"
        checked[kind] += 1
        if rec.source_hash != want:
            stale.append(f"{path.parent.name}/{path.name}")
    assert checked["measure"] >= 4 * 47 and checked["baseline"] >= 4 * 6  # every built-in on each zoo, baselines
    assert not stale, (f"{len(stale)} shipped records cite another source than this checkout's (verify says "
                       f"'cannot verify'): {stale[:6]}; re-make them (genbench leaderboard run) or keep the "
                       "measure's module as it was")


@pytest.mark.parametrize("module", ["genbench.measures.pacbayes", "genbench.measures.norm"])
def test_a_changed_measure_module_is_caught(module, monkeypatch):
    """Planted: the source hash of one measure module moves (an edit), and the check above names its records."""
    import dataclasses
    import sys

    real = get_measure

    def edited(name):
        m = real(name)
        return dataclasses.replace(m, source_hash="0" * 64) if m.fn.__module__ == module else m

    monkeypatch.setattr(sys.modules[__name__], "get_measure", edited)
    with pytest.raises(AssertionError, match="shipped records cite another source"):
        test_every_shipped_record_cites_the_source_it_would_be_verified_against()
