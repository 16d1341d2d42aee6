"""Cost of the leaderboard's web page: the learning curves of one audit drawn by matplotlib (what `genbench audit
--plot` writes) and by the page's own SVG (curves.page_svg), back to back in each round (the ratio is the median of
the per-round ratios), then the whole site of the records once, with its size.
Usage: python benchmarks/site.py [--results FOLDER] [--rounds 5]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from timeit import timeit

from genbench.defaults import SHIPPED_RESULTS
from genbench.leaderboard.curves import means_frame, page_svg, write_curve_plot
from genbench.leaderboard.site import write_site
from genbench.record import Record, load_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=SHIPPED_RESULTS)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    records = [Record.of(r) for r in load_records(args.results)]
    audited = [r for r in records if r.audit and r.audit.get("means")]
    if not audited:
        raise SystemExit(f"no record in {args.results} holds an audit's seed means")
    means = means_frame(audited[0].audit)
    with tempfile.TemporaryDirectory() as tmp:
        ratios = []
        for _ in range(args.rounds):
            slow = timeit(lambda: write_curve_plot(means, Path(tmp) / "c.svg", measure=audited[0].measure), number=1)
            fast = timeit(lambda: page_svg(means, measure=audited[0].measure), number=1)
            ratios.append(slow / fast)
        print(f"learning curves of one audit ({audited[0].measure}): matplotlib / page SVG = "
              f"{statistics.median(ratios):.1f}x (median of {args.rounds} rounds)")
        took = timeit(lambda: write_site(records, Path(tmp) / "site"), number=1)
        size = sum(p.stat().st_size for p in (Path(tmp) / "site").rglob("*") if p.is_file())
        print(f"site of {len(records)} records ({len(audited)} with learning curves): {took:.1f} s, "
              f"{size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
