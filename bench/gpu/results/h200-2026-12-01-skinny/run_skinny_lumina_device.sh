#!/usr/bin/env bash
# One device run (2026-12-01, third session): issue #13 item 5's skinny decode
# GEMM and issue #18's open measurements.
#   1. gpu tests: the skinny kernel, Gemm both ways, the backend and the Lumina
#      family with the skinny GEMM forced (ARGEN_CUDA_GEMM=skinny) and as built.
#   2. The decode GEMMs alone at 7B shapes, cuBLAS vs skinny (argen_bench --gemm-micro).
#   3. 7B end to end, cuBLAS vs skinny in the same call (1, 16, 32 images; dense and
#      diagonal 95%), and the careful PyTorch loop at 16 images as the baseline.
#   4. Lumina-mGPT-7B shape at 768 px on the whole H200 (auto sizing, which now
#      sizes rows for long decodes), dense vs diagonal 95% at the paper's N_r; the
#      attention kernel alone at 768 px, two-pass vs staged.
#   5. The small Lumina model's dense score on the whole benchmark (522 prompts x 2
#      images) through the CUDA engine.
# $OUT: tests.log gemm.txt e2e.txt lumina.txt sweep.log sweep_report.md summary.txt (7 files).
#
# Bundle (development machine): gpu-bundle.sh /tmp/sk <binaries below>; tar | xz > .gpubundle/sk.tar.xz
set -u
B=/tmp/sk
if [ ! -x $B/bin/argen_bench ]; then mkdir -p $B && xz -dc .gpubundle/sk.tar.xz | tar -xf - -C $B || exit 1; fi
BIN=$B/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-560}
. bench/gpu/time_guard.sh

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  for t in kernels_skinny_gemm_test cuda_gemm_test cuda_pool_sizing_test cuda_auto_sizing_test; do
    stamp "$t"
    guarded 60 "$BIN/$t" --gtest_brief=1
    echo "rc($t)=$?"
  done
  for g in skinny cublas; do
    for t in cuda_backend_test lumina_cuda_test; do
      stamp "$t ARGEN_CUDA_GEMM=$g"
      export ARGEN_CUDA_GEMM=$g
      guarded 60 "$BIN/$t" --gtest_brief=1
      echo "rc($t,$g)=$?"
      unset ARGEN_CUDA_GEMM
    done
  done
} >"$OUT/tests.log" 2>&1

stamp gemm-micro >"$OUT/gemm.txt"
guarded 60 "$BIN/argen_bench" --gemm-micro --model 7b,1b --batches 1,4,8,16,24,32 >>"$OUT/gemm.txt" 2>&1
echo "rc=$?" >>"$OUT/gemm.txt"

{
  for g in cublas skinny; do
    stamp "e2e gemm $g"
    guarded 70 "$BIN/argen_bench" --model 7b --batches 1,16,32 --policies dense,diagonal:0.95 --gemm $g
    echo "rc(e2e,$g)=$?"
  done
  stamp "torch loop"
  guarded 60 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16
  echo "rc(torch)=$?"
} >"$OUT/e2e.txt" 2>&1

{
  stamp "lumina-768 full H200"
  guarded 150 "$BIN/argen_bench" --model lumina-768 --auto-sizing --max-batch --policies dense,diagonal:0.95 \
    --prompt-len 40 --stage-steps 0
  echo "rc(full)=$?"
  stamp "lumina-768 attention micro"
  guarded 30 "$BIN/argen_bench" --attention-micro --model lumina-768 --batches 1,8,32 --policies diagonal:0.95 \
    --prompt-len 40
  echo "rc(micro)=$?"
} >"$OUT/lumina.txt" 2>&1

{
  stamp sweep
  rm -rf /tmp/lumina-sweep
  guarded 90 "$BIN/argen_sweep" --model models/argen-lumina-scenes-v1 --backend cuda --out /tmp/lumina-sweep \
    --policies dense --per-category 0 --images-per-prompt 2 --cfg 4 --top_k 0 --seed 0
  echo "rc(sweep)=$?"
  guarded 150 python3 tools/sweep/report.py /tmp/lumina-sweep --metadata tools/sweep/benchmark_prompts.jsonl \
    --workers 14 --no-plot
  echo "rc(report)=$?"
  cp /tmp/lumina-sweep/report.md "$OUT/sweep_report.md" 2>/dev/null
  stamp done
} >"$OUT/sweep.log" 2>&1

{
  echo "== gpu tests"
  grep -h -E "PASSED|FAILED|SKIPPED|^rc\(" "$OUT/tests.log"
  echo "== gemm micro (cublas/skinny > 1: skinny faster)"
  grep -h "^gemm " "$OUT/gemm.txt" | sed -E 's/^gemm ([^ ]+) rows=([0-9]+) ([a-z_]+) .*cublas ([0-9.]+) us \(([0-9]+) GB\/s\), skinny ([0-9.]+) us \(([0-9]+) GB\/s.*cublas\/skinny ([0-9.]+)x, max rel diff (.*)$/\1 rows \2 \3: cublas \4 us \5 GB\/s, skinny \6 us \7 GB\/s, \8x, diff \9/'
  echo "== 7B end to end (model policy images prefill_s decode_s step_ms last_ms img/s)"
  grep -h -E "^(7b |rc\(|model 7b|torch|.*img/s)" "$OUT/e2e.txt" | cut -c1-110
  echo "== lumina"
  grep -h -E "^lumina|cuda memory|^attention|^rc" "$OUT/lumina.txt" | cut -c1-200
  echo "== small Lumina model, whole benchmark, CUDA engine, dense, cfg 4"
  grep -h -E "overall|^\| *(single_object|two_object|counting|colors|position|color_attr)" "$OUT/sweep_report.md" 2>/dev/null | head -8
  grep -h "^rc" "$OUT/sweep.log"
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
