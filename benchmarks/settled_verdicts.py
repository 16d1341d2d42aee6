"""Do settled verdicts hold on a training no record used? (issue 39's check.)

The official records of a grid state each verdict over its trainings (scores.verdicts: beats_recipe, adds_to_recipe,
against_claim, each {holds, trainings: [held, of], settled}). A fourth training, scored on its own
(`genbench leaderboard run '*' --zoo GRID-t3 --audit-zoo ''`, baselines included), says each verdict once more. This
prints, per verdict, how many are settled and how many settled ones the new training contradicts (flips), and lists
the flips; the done-when asks for no settled "beats the recipe" flip and at most 1 settled "adds to the recipe" one.

A verdict on the held-out training is computed from its record as the trainings' verdicts are
(entries/trainings.py): beats the recipe when the paired interval of k-fold R^2 minus the recipe's lies above 0
(scores.vs_recipe), adds to it when delta_r2's interval lies above 0, against its claim by the direction check.
Usage: python benchmarks/settled_verdicts.py leaderboard/results/GRID RESULTS/GRID-t3
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

KEYS = ("beats_recipe", "adds_to_recipe", "against_claim")


def records(folder: str, *, baselines: bool = False) -> dict[str, dict]:
    """The ok records of a folder, by entry name (the baseline rows only with `baselines`)."""
    out = {}
    for p in sorted(Path(folder).glob("*.json")):
        r = json.loads(p.read_text())
        if r.get("status") == "ok" and (baselines or not r.get("baseline")):
            out[r["name"]] = r
    return out


def held(rec: dict, key: str) -> bool | None:
    """Whether a verdict holds on a record scored on one training (None: it cannot say)."""
    s = rec.get("scores") or {}
    if key == "beats_recipe":
        vs = s.get("vs_recipe") or []
        return None if len(vs) != 3 else vs[1] > 0
    if key == "adds_to_recipe":
        iv = (s.get("intervals") or {}).get("delta_r2")
        return None if "delta_r2" in (s.get("refused") or {}) or iv is None else iv[0] > 0
    d = s.get("direction") or {}
    return None if d.get("claim") is None else d.get("against") is True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("official", help="folder of the grid's records scored over its trainings")
    ap.add_argument("held_out", help="folder of the records of a training no record used (GRID-tK)")
    args = ap.parse_args()
    a, b = records(args.official), records(args.held_out)
    common = sorted(set(a) & set(b))
    print(f"{len(common)} entries in both ({len(a)} official, {len(b)} on the held-out training)")
    for key in KEYS:
        settled = flips = unsettled = 0
        named = []
        for n in common:
            v = ((a[n].get("scores") or {}).get("verdicts") or {}).get(key)
            now = held(b[n], key)
            if not v or now is None:
                continue
            if not v.get("settled"):
                unsettled += 1
                continue
            settled += 1
            if now != v["holds"]:
                flips += 1
                named.append(f"{n} (held on {'all' if v['holds'] else 'none'} of {v['trainings'][1]} trainings; "
                             f"{'holds' if now else 'does not hold'} on the held-out one)")
        print(f"{key}: {settled} settled, {unsettled} unsettled; settled ones that flip on the held-out training: "
              f"{flips}" + (": " + "; ".join(named) if named else ""))


if __name__ == "__main__":
    main()
