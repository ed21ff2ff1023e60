#!/usr/bin/env bash
# The whole Lumina-format training pipeline on the CPU at toy sizes (a few minutes): scenes, tokenizer,
# VQGAN, LM, export in the published layouts, transformers reload + logits check, sampler check, scorer.
#   tools/train_lumina/smoke.sh [work dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-/tmp/argen-lumina-smoke}
PY=${PYTHON:-.venv/bin/python}
"$PY" -m tools.train_lumina.pipeline --work "$WORK" --model-dir "$WORK/model" --device cpu \
  --scenes 64 --workers 2 --scale 1 --vq-steps 3 --vq-batch 4 --vq-crop 96 --vq-ch-mult 1,1,1,1,1 \
  --vq-res-blocks 1 --codebook 64 --hidden 64 --layers 2 --heads 2 --intermediate 128 --text-vocab 200 \
  --batch 4 --ar-steps 3 --deadline 100000 --reserve 0 --eval-every 200 --eval-per-prompt 1 --sampling 4:1:0
