#!/usr/bin/env bash
# The batched trainer on a GPU, as one prepared run: batched / one-by-one for the convolutional families (NiN on
# CIFAR-shaped inputs at DEMOGEN's width and at half of it, the 1-D CNN on MNIST-1D). Run it from the repository
# root on the device machine (`DEVICE=cuda`, the default), or on the CPU at a tiny size with `DEVICE=cpu TINY=1`
# (what the tests do); the CPU's own figures come from `python benchmarks/train_zoo.py --family ...` here.
set -euo pipefail
cd "$(dirname "$0")"
DEVICE="${DEVICE:-cuda}"
PY="${PYTHON:-python3}"
if [ -n "${TINY:-}" ]; then
    "$PY" train_zoo.py --family nin --base-channels 4 --epochs 1 --models 2 --rounds 1 --device "$DEVICE"
    exit 0
fi
"$PY" -c "import torch; assert torch.cuda.is_available() or '$DEVICE' == 'cpu', 'no GPU: run with DEVICE=cpu'"
"$PY" train_zoo.py --family nin --base-channels 192 --epochs 3 --models 16 --rounds 3 --device "$DEVICE"
"$PY" train_zoo.py --family nin --base-channels 96 --epochs 3 --models 16 --rounds 3 --device "$DEVICE"
"$PY" train_zoo.py --family cnn1d --epochs 5 --models 16 --rounds 3 --device "$DEVICE"
