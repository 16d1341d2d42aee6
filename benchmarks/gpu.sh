#!/usr/bin/env bash
# The device machine's one prepared run: a slice of demogen-nin-cifar10 built, trained batched and one by one, and
# evaluated with the whole catalogue, on the GPU and then on the same machine's CPU (all its cores), each figure beside
# the other (benchmarks/gpu.py). Run it from anywhere; `SIZE=tiny DEVICES=cpu` is the small CPU form the tests run.
# Any Python with torch and genbench's dependencies will do (the device image has them; genbench is read from here).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export GENBENCH_BUILD_THREADS="${GENBENCH_BUILD_THREADS:-$(nproc)}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
"$PY" -c "import torch; print('torch', torch.__version__, '| cuda:', torch.cuda.is_available())"
args=(--size "${SIZE:-slice}")
[ -n "${DEVICES:-}" ] && args+=(--devices "$DEVICES")
[ -n "${JSON:-}" ] && args+=(--json "$JSON")
exec "$PY" "$root/benchmarks/gpu.py" "${args[@]}"
