#!/usr/bin/env bash
# Trains the small Lumina-format model (argen-lumina-scenes-v1; hidden 256, 6 layers: ~21 MB, kept small
# because the device tool carries at most 64 MiB of working tree) on one H200 in about 6 minutes (a 345 s budget for everything, AR gets what the other phases leave), one call.
# Run from the repository root on the device (torch + transformers there); $OUT receives 5 files:
#   train.log, model.tar.part00..02 (the model directory as a tar split in 15 MiB parts, written right
#   after export; reassemble: cat model.tar.part* | tar -x -C models/), results.tar (eval.json with the
#   published-layout checks and the scorer tables, ar_history.json, VQ and sample PNGs with their prompts).
#   usage: tools/train_lumina/device_train.sh [extra pipeline args...]
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT=${OUT:-/tmp/argen-out}
WORK=${WORK:-/tmp/argen-lumina-train}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
set +e
python3 -m tools.train_lumina.pipeline --work "$WORK" --model-dir "$WORK/argen-lumina-scenes-v1" \
  --scenes 50000 --workers 16 --deadline 345 --reserve 70 --vq-seconds 75 --vq-batch 32 \
  --hidden 256 --layers 6 --heads 4 --intermediate 768 \
  --batch 64 --lr 1e-3 --eval-every 1 --eval-per-prompt 2 --sampling 4:1:0,3:1:0 --pack-to "$OUT" "$@" 2>&1 \
  | tee "$OUT/train.log"
rc=${PIPESTATUS[0]}
set -e
(cd "$WORK" && tar -cf "$OUT/results.tar" $(ls eval.json ar_history.json *.png *.txt 2>/dev/null))
ls -la "$OUT"
exit $rc
