"""How much of a zoo's scores is training noise: two record sets of the same recipe, trained twice, side by side.

Two builds of one recipe that differ only in float rounding (a new version of a zoo whose trainer changed, say)
train every model along another path: the same grid and seeds, independent training noise. Each score of one
set is checked against the other set's 95% interval (does the interval hold a re-trained zoo's value?), and the
difference is put in units of the two intervals' combined standard error (half-width / 1.96, added in quadrature):
two independent draws of one score differ by more than 1.96 of those units about 5% of the time. It also lists the
entries whose "adds to the recipe" verdict (the lower end of the delta R^2 interval above 0) flips, and for each
score whether the entries keep their order (Kendall tau between the two sets' values) and how far the set moved
as a whole (the mean of B - A): a score that moves every entry together keeps the ranking but not a threshold.
`--rules` also tries stricter "adds" verdicts (a minimum delta R^2; the interval above 0 on each seed half of the
zoo, re-fitted there with its own resamples: needs the zoo built here, --zoo NAME, for the models' grid levels, while
each set's own gaps and values are used, so two versions of one recipe share it; some minutes) and prints how many
entries each set says add, how many flip, and the overlap (shared / either).
Usage: python benchmarks/record_stability.py DIR_A DIR_B [--rules --zoo NAME]  (two folders of records of one zoo)
       python benchmarks/record_stability.py --git REV_A REV_B --zoo NAME [--rules]  (the records shipped at two commits)
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import statistics
from pathlib import Path

from scipy.stats import kendalltau

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
    print(f"{'score':9s} {'n':>3s}  A in B's interval  B in A's  |A - B| / combined s.e.: median, > 1.96  "
          "order kept (tau)  mean B - A")
    for key in SCORES:
        pairs = [(_score(a[n], key), _score(b[n], key)) for n in common]
        pairs = [(x, y) for x, y in pairs if x and y]
        if not pairs:
            continue
        in_b = sum(ib[0] <= va <= ib[1] for (va, _), (_, ib) in pairs)
        in_a = sum(ia[0] <= vb <= ia[1] for (_, ia), (vb, _) in pairs)
        z = [abs(va - vb) / math.hypot((ia[1] - ia[0]) / 3.92, (ib[1] - ib[0]) / 3.92)
             for (va, ia), (vb, ib) in pairs if ia[1] > ia[0] or ib[1] > ib[0]]
        tau = kendalltau([va for (va, _), _ in pairs], [vb for _, (vb, _) in pairs]).statistic
        shift = statistics.mean(vb - va for (va, _), (vb, _) in pairs)
        print(f"{key:9s} {len(pairs):3d}  {in_b:17d}  {in_a:8d}  {statistics.median(z):6.2f}, "
              f"{sum(v > 1.96 for v in z):<25d} {tau:16.2f}  {shift:+10.4f}")
    deltas = {n: (_score(a[n], "delta_r2"), _score(b[n], "delta_r2")) for n in common}
    adds = {n: (da[1][0] > 0, db[1][0] > 0) for n, (da, db) in deltas.items() if da and db}
    flips = sorted(n for n, (x, y) in adds.items() if x != y)
    print(f"adds to the recipe: {sum(x for x, _ in adds.values())} in A, {sum(y for _, y in adds.values())} in B, "
          f"{sum(x and y for x, y in adds.values())} in both; flipped ({len(flips)}): {', '.join(flips) or 'none'}")


def _half_deltas(rec: dict, zoo, fits: dict) -> dict[str, float]:
    """delta R^2 and the lower end of its interval on each seed half (replicate axis) of the zoo, re-fitted there."""
    import numpy as np

    from genbench.defaults import N_BOOT
    from genbench.scoring.recipe import REPLICATE
    from genbench.scoring.regression import K_FOLDS, REPEATS
    from genbench.scoring.resample import percentile_interval, resample_weights
    from genbench.scoring.scores import _add_delta, _offered_phi, recipe_fit
    from genbench.scoring.spec import MeasureScores

    vals = rec["values"]
    ids, y = np.array(vals["model_id"]), np.array(vals["gap"], float)
    x = np.array(vals["value"], float).reshape(len(ids), -1)
    ok = np.isfinite(x).all(1)
    phi = _offered_phi(rec["scores"]["transform"], x[ok])
    copy = zoo.table.set_index("model_id")[f"hp.{REPLICATE}"].loc[ids].to_numpy()
    out = {}
    for h in sorted(set(copy)):
        m = ok & (copy == h)
        key = (h, tuple(ids[m]), tuple(y[m]))
        w = resample_weights(int(m.sum()), table_sha256=f"{zoo.table_sha256}:half{h}", seed=0, n_boot=N_BOOT)
        if key not in fits:
            fits[key] = recipe_fit(zoo, list(ids[m]), y[m], w)
        s = MeasureScores(measure=rec["measure"], kind=rec["kind"], transform=phi, target="gap", n=int(m.sum()),
                          dropped=0, features=x.shape[1])
        _add_delta(s, x[m], y[m], w, fits[key], k=K_FOLDS, repeats=REPEATS, regressed=True, phi=phi)  # the scorer's
        iv = percentile_interval(s.samples["delta_r2"])
        out[f"d{h}"], out[f"lo{h}"] = s.values["delta_r2"], (iv[0] if iv else math.nan)
    return out


def rules(a: dict[str, dict], b: dict[str, dict], zoo_name: str) -> None:
    """How stricter "adds to the recipe" verdicts fare between the two sets (entries other than the baselines)."""
    import genbench as gb

    zoo = gb.load_zoo(zoo_name)
    names = sorted(n for n in set(a) & set(b) if not n.startswith("baseline.")
                   and _score(a[n], "delta_r2") and _score(b[n], "delta_r2"))
    rows: dict[str, list[dict]] = {}
    for recs in (a, b):
        fits: dict = {}
        for n in names:
            v, iv = _score(recs[n], "delta_r2")
            rows.setdefault(n, []).append({"d": v, "lo": iv[0], **_half_deltas(recs[n], zoo, fits)})
    halves = lambda r, key: [r[k] for k in r if k.startswith(key) and k[len(key):].isdigit()]  # noqa: E731
    tests = {"interval above 0 (the leaderboard's)": lambda r: r["lo"] > 0,
             "... and delta R^2 >= 0.01": lambda r: r["lo"] > 0 and r["d"] >= 0.01,
             "... and delta R^2 >= 0.02": lambda r: r["lo"] > 0 and r["d"] >= 0.02,
             "interval above 0 on each seed half": lambda r: min(halves(r, "lo")) > 0,
             "interval above 0, delta R^2 > 0 on each half": lambda r: r["lo"] > 0 and min(halves(r, "d")) > 0}
    print(f"\n{len(names)} entries (baselines left out); verdict 'adds to the recipe':")
    print(f"{'verdict':46s} {'A':>3s} {'B':>3s} {'both':>4s} {'flips':>5s} overlap")
    for label, test in tests.items():
        sa = {n for n in names if test(rows[n][0])}
        sb = {n for n in names if test(rows[n][1])}
        print(f"{label:46s} {len(sa):3d} {len(sb):3d} {len(sa & sb):4d} {len(sa ^ sb):5d} "
              f"{len(sa & sb) / max(1, len(sa | sb)):7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--git", action="store_true", help="A and B are commits; read the records of --zoo shipped there")
    ap.add_argument("--zoo", help="the zoo whose records to compare (with --git), or whose halves --rules re-fits")
    ap.add_argument("--rules", action="store_true", help="also try stricter 'adds to the recipe' verdicts")
    args = ap.parse_args()
    if (args.git or args.rules) and not args.zoo:
        ap.error("--git and --rules need --zoo NAME")
    load = (lambda rev: from_git(rev, args.zoo)) if args.git else from_dir
    a, b = load(args.a), load(args.b)
    compare(a, b)
    if args.rules:
        rules(a, b, args.zoo)


if __name__ == "__main__":
    main()
