#!/bin/bash
# lab/ch02_measure_h200.sh - chapter 1-2 measurements beyond the notebooks: the topic kernels of chapter 2
# (chapters/ch02_tma/topics.py) and ncu's shared-memory wavefront counters (chapters/ch01_cp_async/wavefronts.py).
# Run on an H200 from the repository root: bash lab/ch02_measure_h200.sh OUT_DIR
set -u
OUT_DIR=${1:-/tmp/ch02_measure}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "
from chapters.ch01_cp_async import sgemm
bad = [c.message for c in sgemm.check('sgemm_tuned.cu', [(128, 128, 32), (256, 384, 544)], seeds=(0, 1), defines={'A_PAD': 0}) if not c.ok]
print('sgemm_tuned A_PAD=0 correct:', not bad, bad[:2])"
python3 -m chapters.ch02_tma.topics "$OUT_DIR" 2>&1 | tee "$OUT_DIR/topics.log"
python3 -m chapters.ch01_cp_async.wavefronts ncu "$OUT_DIR" 2>&1 | tee "$OUT_DIR/wavefronts.log"
