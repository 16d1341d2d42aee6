"""What regenerating a zoo's records over trainings and with an audit in the zoo's regime changed (issue 39, item 4).

Given the records before (one training, audited on another zoo) and after (scored over the trainings, audited on the
zoo `audit_zoo_for` picks), it prints: how many of each verdict are settled (every training agrees) and how many
hold; the paired rank groups (how many, and how many entries keep their group on each training alone); and which
audit verdicts moved, part by part (value, trend, scaling, data-blind, robust), between the two audit zoos.
Usage: python benchmarks/what_changed.py BEFORE_FOLDER AFTER_FOLDER  (e.g. a copy of leaderboard/results/ZOO taken
before the regeneration, and leaderboard/results/ZOO)
"""
from __future__ import annotations

import argparse
from collections import Counter

from genbench.leaderboard.standings import rank_records
from genbench.leaderboard.verdict import groups_over_trainings
from genbench.record import Record

from settled_verdicts import KEYS, records

LABELS = ("fragile-value", "fragile-trend", "fragile-scale", "data-blind", "robust")


def labels(rec: dict) -> set[str] | None:
    """The audit verdict's labels, None when the record was not audited or the audit was inconclusive."""
    v = (rec.get("audit") or {}).get("verdict")
    if not v or "inconclusive" in v:
        return None
    return {part.strip() for part in v.split(",")}


def settled_counts(after: dict[str, dict]) -> None:
    """How many entries state each verdict over trainings, how many of those are settled, and how many hold."""
    for key in KEYS:
        stated = [Record.of(r).verdict_over(key) for r in after.values() if not r.get("baseline")]
        stated = [v for v in stated if v is not None]
        n_settled = sum(v["settled"] for v in stated)
        holds = sum(v["holds"] for v in stated if v["settled"])
        spread = Counter(tuple(v["trainings"]) for v in stated if not v["settled"])
        print(f"{key}: stated by {len(stated)} entries, settled {n_settled} (holds on all trainings: {holds}, on "
              f"none: {n_settled - holds}), unsettled {len(stated) - n_settled}"
              + (f" ({', '.join(f'{h} of {of}: {c}' for (h, of), c in sorted(spread.items()))})" if spread else ""))


def audit_moves(before: dict[str, dict], after: dict[str, dict]) -> None:
    """Per audit label: built-ins with it before and after, and those that gained or lost it (the example
    submissions are left out: the docs count the built-ins)."""
    both = [n for n in sorted(set(before) & set(after)) if after[n].get("builtin") and not after[n].get("baseline")]
    zoos_before = Counter((before[n].get("audit") or {}).get("zoo") for n in both)
    zoos_after = Counter((after[n].get("audit") or {}).get("zoo") for n in both)
    pairs = [(n, labels(before[n]), labels(after[n])) for n in both]
    judged = [(n, a, b) for n, a, b in pairs if a is not None and b is not None]
    print(f"audits: {len(both)} built-ins in both; audit zoos before {dict(zoos_before)}, after {dict(zoos_after)}; "
          f"conclusive on both: {len(judged)}; the same verdict: {sum(a == b for _, a, b in judged)}")
    for n, a, b in pairs:
        if (a is None) != (b is None):
            print(f"  {n}: {'inconclusive/none' if a is None else ', '.join(sorted(a))} -> "
                  f"{'inconclusive/none' if b is None else ', '.join(sorted(b))}")
    for lab in LABELS:
        gained = [n for n, a, b in judged if lab in b and lab not in a]
        lost = [n for n, a, b in judged if lab in a and lab not in b]
        print(f"{lab}: {sum(lab in a for _, a, _ in judged)} before, {sum(lab in b for _, _, b in judged)} after; "
              f"gained by {len(gained)}{': ' + ', '.join(gained) if gained else ''}; lost by {len(lost)}"
              f"{': ' + ', '.join(lost) if lost else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="folder of the records before the regeneration")
    ap.add_argument("after", help="folder of the regenerated records")
    args = ap.parse_args()
    before, after = records(args.before, baselines=True), records(args.after, baselines=True)
    print(f"{len(before)} records before, {len(after)} after")
    settled_counts(after)
    ranked = rank_records(after.values())
    print(groups_over_trainings(ranked) or "rank groups: the records after are not scored over trainings")
    print(f"rank groups before: {len({r.rank_group for r in rank_records(before.values()) if r.rank_group})}")
    audit_moves(before, after)


if __name__ == "__main__":
    main()
