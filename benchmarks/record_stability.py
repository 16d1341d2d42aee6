"""How much of a zoo's scores is training noise: two record sets of the same recipe, trained twice, side by side.

Two builds of one recipe that differ only in float rounding (a new version of a zoo whose trainer changed, say)
train every model along another path: the same grid and seeds, independent training noise. Each score of one
set is checked against the other set's 95% interval (does the interval hold a re-trained zoo's value?), and the
difference is put in units of the two intervals' combined standard error (half-width / 1.96, added in quadrature):
two independent draws of one score differ by more than 1.96 of those units about 5% of the time. It also lists the
entries whose "adds to the recipe" verdict (the lower end of the delta R^2 interval above 0) flips.
Usage: python benchmarks/record_stability.py DIR_A DIR_B     (two folders of result records of the same zoo)
       python benchmarks/record_stability.py --git REV_A REV_B --zoo NAME   (the records shipped at two commits)
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import statistics
from pathlib import Path

SCORES = ("kfold_r2", "delta_r2", "adj_r2", "tau", "psi", "cmi", "mse")


def from_dir(folder: str) -> dict[str, dict]:
    """The records of a folder, by entry name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))}


def from_git(rev: str, zoo: str) -> dict[str, dict]:
    """The records of `zoo` shipped at commit `rev` of this repository."""
    folder = f"leaderboard/results/{zoo}/"
    names = subprocess.run(["git", "ls-tree", "--name-only", rev, folder], capture_output=True, text=True,
                           check=True).stdout.split()
    return {Path(n).stem: json.loads(subprocess.run(["git", "show", f"{rev}:{n}"], capture_output=True, text=True,
                                                    check=True).stdout) for n in names if n.endswith(".json")}


def _score(rec: dict, key: str) -> tuple[float, tuple[float, float]] | None:
    s = rec.get("scores") or {}
    v, iv = (s.get("values") or {}).get(key), (s.get("intervals") or {}).get(key)
    return None if v is None or not iv or None in iv else (float(v), (float(iv[0]), float(iv[1])))


def compare(a: dict[str, dict], b: dict[str, dict]) -> None:
    """Print, per score, how often each set's value lies in the other's interval, and the verdict flips."""
    common = sorted(set(a) & set(b))
    print(f"{len(common)} entries in both sets")
    print(f"{'score':9s} {'n':>3s}  A in B's interval  B in A's  |A - B| / combined s.e.: median, > 1.96")
    for key in SCORES:
        pairs = [(_score(a[n], key), _score(b[n], key)) for n in common]
        pairs = [(x, y) for x, y in pairs if x and y]
        if not pairs:
            continue
        in_b = sum(ib[0] <= va <= ib[1] for (va, _), (_, ib) in pairs)
        in_a = sum(ia[0] <= vb <= ia[1] for (_, ia), (vb, _) in pairs)
        z = [abs(va - vb) / math.hypot((ia[1] - ia[0]) / 3.92, (ib[1] - ib[0]) / 3.92)
             for (va, ia), (vb, ib) in pairs if ia[1] > ia[0] or ib[1] > ib[0]]
        print(f"{key:9s} {len(pairs):3d}  {in_b:17d}  {in_a:8d}  {statistics.median(z):6.2f}, {sum(v > 1.96 for v in z)}")
    deltas = {n: (_score(a[n], "delta_r2"), _score(b[n], "delta_r2")) for n in common}
    adds = {n: (da[1][0] > 0, db[1][0] > 0) for n, (da, db) in deltas.items() if da and db}
    flips = sorted(n for n, (x, y) in adds.items() if x != y)
    print(f"adds to the recipe: {sum(x for x, _ in adds.values())} in A, {sum(y for _, y in adds.values())} in B, "
          f"{sum(x and y for x, y in adds.values())} in both; flipped ({len(flips)}): {', '.join(flips) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--git", action="store_true", help="A and B are commits; read the records of --zoo shipped there")
    ap.add_argument("--zoo", help="the zoo whose records to compare (with --git)")
    args = ap.parse_args()
    if args.git and not args.zoo:
        ap.error("--git needs --zoo NAME")
    load = (lambda rev: from_git(rev, args.zoo)) if args.git else from_dir
    compare(load(args.a), load(args.b))


if __name__ == "__main__":
    main()
