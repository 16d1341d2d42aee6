"""Cost of reading the shipped records, which every `genbench leaderboard` does whole: the standard library's
json.loads against record.loads_json (orjson, json where orjson refuses), on the same bytes in alternating rounds
(the ratio is the median of the per-round ratios), with whether both give every record the same object; then
load_records of the whole folder once. Prints the machine's load with the numbers.
Usage: python benchmarks/record_reading.py [--results FOLDER] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from genbench.defaults import SHIPPED_RESULTS
from genbench.record import load_records, loads_json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(SHIPPED_RESULTS))
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    paths = sorted(Path(args.results).glob("*/*.json"))
    datas = [p.read_bytes() for p in paths]
    print(f"{len(paths)} records, {sum(map(len, datas)) / 2**20:.1f} MiB; load average {os.getloadavg()[0]:.2f}")
    same = [json.loads(d.decode("utf-8")) for d in datas] == [loads_json(d) for d in datas]
    old, new = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for d in datas:
            json.loads(d.decode("utf-8"))
        t1 = time.perf_counter()
        for d in datas:
            loads_json(d)
        t2 = time.perf_counter()
        old.append(t1 - t0)
        new.append(t2 - t1)
    ratio = statistics.median(o / n for o, n in zip(old, new))
    print(f"parsing: json.loads {statistics.median(old):.3f} s, loads_json {statistics.median(new):.3f} s "
          f"(x{ratio:.2f}, median of {args.rounds} rounds), same objects: {same}")
    t0 = time.perf_counter()
    recs = load_records(args.results)
    print(f"load_records: {len(recs)} records in {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
