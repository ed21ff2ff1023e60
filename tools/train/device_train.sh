#!/usr/bin/env bash
# The device run that trained models/argen-scenes-v1 (one H200, one call of at most 10 minutes).
# Run from the repository root on the device; $OUT receives: the log, the model as a split tar
# (15 MiB parts, written right after export) and a results tar (eval.json, loss history, sample and VQ PNGs).
#   usage: tools/train/device_train.sh [extra pipeline args...]
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT=${OUT:-/tmp/argen-out}
WORK=${WORK:-/tmp/argen-train}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
set +e
python3 -m tools.train.pipeline --work "$WORK" --model-dir "$WORK/argen-scenes-v1" \
  --scenes 80000 --workers 16 --deadline 520 --reserve 130 --vq-seconds 100 --vq-batch 64 \
  --batch 128 --lr 1e-3 --eval-every 1 --eval-per-prompt 2 --sampling 5:1:0,3:1:0,5:1:100 --pack-to "$OUT" "$@" 2>&1 | tee "$OUT/train.log"
rc=${PIPESTATUS[0]}
set -e
(cd "$WORK" && tar -cf "$OUT/results.tar" $(ls eval.json ar_history.json *.png *.txt 2>/dev/null))
ls -la "$OUT"
exit $rc
