"""Do settled verdicts hold on a training no record used? (issue 39's check.)

The official records of a grid state each verdict over its trainings (scores.verdicts: beats_recipe, adds_to_recipe,
against_claim, each {holds, trainings: [held, of], open, settled}). A fourth training, scored on its own
(`genbench leaderboard run '*' --zoo GRID-t3 --audit-zoo ''`, baselines included), says each verdict once more. This
prints, per verdict, how many are settled and how many settled ones the new training contradicts (flips), and lists
the flips; the done-when asks for no settled "beats the recipe" flip and at most 1 settled "adds to the recipe" one.

A verdict on the held-out training is read from its record by the rule each training's part of a verdict is
(scoring.trainings.said): it holds when its interval lies above 0 (beats the recipe: the paired interval of k-fold
R^2 minus the recipe's, scores.vs_recipe; adds to it: delta_r2's), fails when it lies below 0, and is open when it
contains 0; against its claim by the direction check. A settled verdict flips when the held-out training's "holds"
differs from it; a settled one that is open there is counted beside.
Usage: python benchmarks/settled_verdicts.py leaderboard/results/GRID RESULTS/GRID-t3
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from genbench.scoring.trainings import said

KEYS = ("beats_recipe", "adds_to_recipe", "against_claim")


def records(folder: str, *, baselines: bool = False) -> dict[str, dict]:
    """The ok records of a folder, by entry name (the baseline rows only with `baselines`)."""
    out = {}
    for p in sorted(Path(folder).glob("*.json")):
        r = json.loads(p.read_text())
        if r.get("status") == "ok" and (baselines or not r.get("baseline")):
            out[r["name"]] = r
    return out


def says(rec: dict, key: str) -> str | None:
    """What a record scored on one training says of a verdict ("holds", "fails", "open" or None), by the rule the
    trainings' verdicts use (scoring.trainings.said)."""
    s = rec.get("scores") or {}
    return said(key, vs_recipe=s.get("vs_recipe") or [], intervals=s.get("intervals") or {},
                refused=s.get("refused") or {}, direction=s.get("direction"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("official", help="folder of the grid's records scored over its trainings")
    ap.add_argument("held_out", help="folder of the records of a training no record used (GRID-tK)")
    args = ap.parse_args()
    a, b = records(args.official), records(args.held_out)
    common = sorted(set(a) & set(b))
    print(f"{len(common)} entries in both ({len(a)} official, {len(b)} on the held-out training)")
    for key in KEYS:
        settled = flips = unsettled = still_open = 0
        named = []
        for n in common:
            v = ((a[n].get("scores") or {}).get("verdicts") or {}).get(key)
            now = says(b[n], key)
            if not v or now is None:
                continue
            if not v.get("settled"):
                unsettled += 1
                continue
            settled += 1
            still_open += now == "open"
            if (now == "holds") != v["holds"]:
                flips += 1
                named.append(f"{n} (settled: {'holds' if v['holds'] else 'does not hold'} on all "
                             f"{v['trainings'][1]} trainings; {now} on the held-out one)")
        print(f"{key}: {settled} settled, {unsettled} unsettled; settled ones that flip on the held-out training: "
              f"{flips}" + (": " + "; ".join(named) if named else "") +
              f"; settled ones whose interval contains 0 there: {still_open}")


if __name__ == "__main__":
    main()
