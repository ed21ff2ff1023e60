#!/usr/bin/env bash
# Testbed candidate A (docs/model.md, "Testbed candidates"), one device call of at most 570 s:
# a new Janus-layout model trained from scratch (new caption tokenizer and AR model) on the shipped
# VQ's image tokens, with the levers "system prompt in the template" (Janus' VLChatProcessor system
# prompt, recorded in config.json as argen_system_prompt so the engine prompts with it) and
# "rich captions" (half of the captions specify every object), AdamW weight decay 0.1.
# $OUT receives train.log, the model as a split tar (15 MiB parts; install: cat model.tar.part* |
# tar -x -C models/) and results.tar (eval.json with the scores and the run's numbers, the loss
# history, sample and VQ PNGs).
#   before the call, here:  .venv/bin/python -m tools.train.vq_only models/argen-scenes-v1 build/testbed-vq
#   on the device:          tools/train/device_testbed.sh [extra pipeline args...]   (carry build/testbed-vq)
# Without the VQ extract the VQ is trained in the call (100 s less for the AR model).
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT=${OUT:-/tmp/argen-out}
WORK=${WORK:-/tmp/argen-testbed}
VQ_FROM=${VQ_FROM:-build/testbed-vq}
NAME=${NAME:-argen-testbed-a}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
if [[ -f "$VQ_FROM/model.safetensors.index.json" ]]; then
  vq_args=(--vq-from "$VQ_FROM")
else
  echo "device_testbed: no VQ extract at $VQ_FROM: training a VQ in the call" >&2
  vq_args=(--vq-seconds 100 --vq-batch 64)
fi
set +e
"$PYTHON" -m tools.train.pipeline --work "$WORK" --model-dir "$WORK/$NAME" "${vq_args[@]}" \
  --janus-system-prompt --rich-captions 0.5 --weight-decay 0.1 --default-cfg 3 \
  --scenes 80000 --workers 16 --deadline ${DEADLINE:-530} --reserve ${RESERVE:-45} \
  --batch 128 --lr 1e-3 --eval-every 1 --eval-per-prompt 2 --sampling 3:1:0 --pack-to "$OUT" "$@" 2>&1 \
  | tee "$OUT/train.log"
rc=${PIPESTATUS[0]}
set -e
(cd "$WORK" && tar -cf "$OUT/results.tar" $(ls eval.json ar_history.json *.png *.txt 2>/dev/null))
ls -la "$OUT"
exit $rc
