#!/usr/bin/env bash
# Continues training the shipped model on the device (one call of at most 10 minutes): same tokenizer
# and VQ (token ids unchanged), AR weights from models/argen-scenes-v1, fresh scenes (seed 2),
# then export, reload and CFG evaluation on the benchmark. $OUT receives the log, the model as a split
# tar (15 MiB parts) and results.tar. Install: cat model.tar.part* | tar -x -C models/
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT=${OUT:-/tmp/argen-out}
WORK=${WORK:-/tmp/argen-train}
mkdir -p "$OUT" "$WORK"
set +e
python3 -m tools.train.pipeline --work "$WORK" --model-dir "$WORK/argen-scenes-v1" \
  --init-from models/argen-scenes-v1 --scenes 80000 --scene-seed 2 --workers 16 --deadline 540 --reserve 100 \
  --batch 128 --lr 5e-4 --eval-every 1 --eval-per-prompt 2 --sampling 3:1:0,5:1:0 --pack-to "$OUT" "$@" 2>&1 \
  | tee "$OUT/train.log"
rc=${PIPESTATUS[0]}
set -e
(cd "$WORK" && tar -cf "$OUT/results.tar" $(ls eval.json ar_history.json *.png *.txt 2>/dev/null))
exit $rc
