"""Is a zoo build bit-identical under other CPU settings? Builds the same models of a recipe once per setting, each
in a fresh process, and compares every checkpoint byte for byte and the table's content hash (Zoo.table_sha256,
which records and verify cite).

The reference is genbench's pinned settings (genbench/numerics.py: AVX2 kernels in ATen, MKL and oneDNN; builds train
with GENBENCH_BUILD_THREADS=2 torch threads). Against it: the pinned settings with OMP/MKL_NUM_THREADS=1 (as on a
1-core machine), as on a CPU without AVX-512 (MKL_ENABLE_INSTRUCTIONS / ONEDNN_MAX_CPU_ISA
cap what MKL and oneDNN may use, as an AVX2-only CPU would); then the machine's native settings
(GENBENCH_NATIVE_NUMERICS=1), alone and as on an AVX2-only CPU: the differences pinning removes. The line with
GENBENCH_BUILD_THREADS=1 shows why builds fix their thread count. Prints, per setting: seconds, checkpoints identical (of n),
the largest gap difference, and whether the table hash matches.
Usage: python benchmarks/reproducibility.py [--recipe mnist1d-demogen] [--limit 24] [--epochs 6]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NATIVE = {"ATEN_CPU_CAPABILITY": "", "MKL_CBWR": "", "ONEDNN_MAX_CPU_ISA": "", "GENBENCH_NATIVE_NUMERICS": "1"}
AVX2_CPU = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}  # MKL and oneDNN as on an AVX2-only CPU
SETTINGS = {
    "pinned (genbench's default; reference)": {},
    "pinned, OMP/MKL_NUM_THREADS=1": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "pinned, as on an AVX2-only CPU": AVX2_CPU,
    "pinned, GENBENCH_BUILD_THREADS=1": {"GENBENCH_BUILD_THREADS": "1"},
    "native (this CPU's kernels: AVX-512)": NATIVE,
    "native, as on an AVX2-only CPU": NATIVE | AVX2_CPU | {"ATEN_CPU_CAPABILITY": "avx2"},
}
PINNED = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA",
          "MKL_ENABLE_INSTRUCTIONS", "GENBENCH_NATIVE_NUMERICS", "GENBENCH_BUILD_THREADS")


def build(recipe: str, out: Path, env: dict[str, str], limit: int, epochs: int) -> float:
    """Build the first `limit` models of `recipe` into `out` in a fresh process under `env`; the seconds taken."""
    full = {k: v for k, v in os.environ.items() if k not in PINNED} | {k: v for k, v in env.items() if v}
    cmd = [sys.executable, "-m", "genbench", "zoo", "build", recipe, "--out", str(out), "--limit", str(limit),
           "--device", "cpu", "--set", f"train.epochs={epochs}", "--set", "train.lr_milestones=[]"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"build under {env} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="mnist1d-demogen")
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=6)
    args = ap.parse_args()
    from genbench.zoo.storage import Zoo
    with tempfile.TemporaryDirectory() as tmp:
        zoos = {}
        for k, (name, env) in enumerate(SETTINGS.items()):
            seconds = build(args.recipe, Path(tmp) / f"s{k}", env, args.limit, args.epochs)
            zoos[name] = (Zoo(Path(tmp) / f"s{k}"), seconds)
        first, native = list(SETTINGS)[0], list(SETTINGS)[4]
        print(f"{args.recipe}: first {args.limit} models, {args.epochs} epochs; each setting against the first "
              f"of its kind (pinned or native)")
        for name, (zoo, seconds) in zoos.items():
            ref, ref_s = zoos[native if name.startswith("native") else first]
            rt = ref.table.set_index("model_id")
            t = zoo.table.set_index("model_id").loc[rt.index]
            same = int(((t["checkpoint_sha256"] == rt["checkpoint_sha256"])).sum())
            gap = float((t["gap"] - rt["gap"]).abs().max())
            print(f"  {name:44s} {seconds:6.1f} s ({seconds / ref_s:4.2f}x)  checkpoints identical {same:3d}/{len(t)}"
                  f"  max |gap diff| {gap:.4f}  table hash {'same' if zoo.table_sha256 == ref.table_sha256 else 'DIFFERS'}")
        a, b = zoos[first][0].table.set_index("model_id"), zoos[native][0].table.set_index("model_id")
        b = b.loc[a.index]
        print(f"  pinned vs native: checkpoints identical {int((a['checkpoint_sha256'] == b['checkpoint_sha256']).sum())}"
              f"/{len(a)}, max |gap diff| {float((a['gap'] - b['gap']).abs().max()):.4f}")


if __name__ == "__main__":
    main()
