#!/usr/bin/env bash
# One device run for the Lumina-mGPT family (issue #18): the family's gpu
# tests, then Lumina-mGPT-7B shapes with random weights at 768 px (48 rows of
# 48 codes + a new line each, L_dec 2351; the guidance row is the 3-token
# header) through argen_bench, and the small model's dense score through the
# CUDA engine. Targets (ratios in this run): last-step attention dense vs
# diagonal 95% (engine stage time of the last 4 steps) >= 10x; per-image
# latency at the same batch >= 1.3x; 48 GB-card emulation, max-batch
# throughput diagonal 95% (N_r = 0.5 L_dec) vs dense >= 3.1x. A time guard
# keeps the run under DEADLINE seconds (default 230; the 512 px runs come last and
# are the first to go); the compact table is
# printed last and kept in summary.txt. $OUT: tests.log, latency.txt,
# maxbatch.txt, sweep.log, sweep_report.md, summary.txt (6 files).
#
#   bash bench/gpu/run_lumina_device.sh
#
# Bundle (on the development machine, after building; carry .gpubundle):
#   /work/shared/tools/gpu-bundle.sh /tmp/lb build/bench/gpu/argen_bench build/tools/sweep/argen_sweep \
#     build/engine/families/lumina/tests/lumina_cuda_test build/engine/cuda/tests/cuda_backend_test
#   mkdir -p .gpubundle && tar -cJf .gpubundle/lumina.tar.xz -C /tmp/lb bin lib
set -u
if [ -f .gpubundle/lumina.tar.xz ]; then
  B=/tmp/lb
  [ -x $B/bin/argen_bench ] || { mkdir -p $B && tar -xJf .gpubundle/lumina.tar.xz -C $B; } || exit 1
else
  B=$PWD/.gpubundle
fi
BIN=$B/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-230}
. bench/gpu/time_guard.sh  # stamp, guarded (run from the repository root)

{
  nvidia-smi --query-gpu=name,memory.total --format=csv
  for t in lumina_cuda_test cuda_backend_test; do
    if [ ! -x "$BIN/$t" ]; then echo "MISSING $t"; continue; fi
    stamp "$t"
    guarded 45 "$BIN/$t" --gtest_brief=1
    echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1

# Same batch, dense vs diagonal 95%: per-image latency and the last steps' stage times.
stamp latency >"$OUT/latency.txt"
guarded 60 "$BIN/argen_bench" --model lumina-768 --batches 8 --policies dense,diagonal:0.95 --prompt-len 40 \
  --stage-steps 4 >>"$OUT/latency.txt" 2>&1
echo "rc=$?" >>"$OUT/latency.txt"

# A 48 GB card: the largest batch each policy admits, its throughput.
stamp maxbatch >"$OUT/maxbatch.txt"
guarded 75 "$BIN/argen_bench" --model lumina-768 --card-memory 48G --max-batch --max-rows 256 \
  --policies dense,diagonal:0.95 --prompt-len 40 >>"$OUT/maxbatch.txt" 2>&1
echo "rc=$?" >>"$OUT/maxbatch.txt"

# The small model's dense score through the CUDA engine (4 prompts per category x 2 images).
{
  stamp sweep
  rm -rf /tmp/lumina-sweep
  guarded 40 "$BIN/argen_sweep" --model models/argen-lumina-scenes-v1 --backend cuda --out /tmp/lumina-sweep \
    --policies dense --per-category 4 --images-per-prompt 2 --cfg 4 --top_k 0 --seed 0
  echo "rc(sweep)=$?"
  guarded 30 python3 tools/sweep/report.py /tmp/lumina-sweep --metadata tools/sweep/benchmark_prompts.jsonl \
    --workers 8 --no-plot
  echo "rc(report)=$?"
  cp /tmp/lumina-sweep/report.md "$OUT/sweep_report.md" 2>/dev/null
} >"$OUT/sweep.log" 2>&1
stamp done >>"$OUT/sweep.log"

# 512 px, if time remains (appended to the same files).
guarded 40 "$BIN/argen_bench" --model lumina-512 --batches 8 --policies dense,diagonal:0.95 --prompt-len 40 \
  --stage-steps 4 >>"$OUT/latency.txt" 2>&1
echo "rc(512)=$?" >>"$OUT/latency.txt"
guarded 45 "$BIN/argen_bench" --model lumina-512 --card-memory 48G --max-batch --max-rows 256 \
  --policies dense,diagonal:0.95 --prompt-len 40 >>"$OUT/maxbatch.txt" 2>&1
echo "rc(512)=$?" >>"$OUT/maxbatch.txt"

{
  echo "== gpu tests"
  grep -h -E "^MISSING|PASSED|FAILED|SKIPPED|^rc\(" "$OUT/tests.log"
  echo
  echo "== Lumina-mGPT-7B shape, random weights, 768 px (512 px if time was left); ratios = dense / diagonal:0.95 unless noted"
  # argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | embed plan qkv attention
  #   observe apply o_proj ffn head indexing kv_MB/img keys
  awk '
    FNR == 1 { f = FILENAME ~ /latency/ ? "lat" : "max" }
    $1 ~ /^lumina-/ && $9 == "|" {
      m = $1; models[m] = 1
      p = ($2 == "dense") ? "dense" : "diag"
      img[f, m, p] = $3; ips[f, m, p] = $8; lat[f, m, p] = $4 + $5; att[f, m, p] = $13; idx[f, m, p] = $19
    }
    END {
      n = 0
      split("lumina-768 lumina-512 lumina-1024", order, " ")
      for (i = 1; i <= 3; i++) {
        m = order[i]
        if (!(m in models)) continue
        n++
        print "-- " m
        if (att["lat", m, "diag"] > 0) {
          printf "last-step attention stage (batch %d): dense %.3f ms, diagonal %.3f ms (+ indexing %.3f): %.2fx (attention alone), %.2fx (with indexing); target >= 10x\n",
            img["lat", m, "dense"], att["lat", m, "dense"], att["lat", m, "diag"], idx["lat", m, "diag"],
            att["lat", m, "dense"] / att["lat", m, "diag"], att["lat", m, "dense"] / (att["lat", m, "diag"] + idx["lat", m, "diag"])
          printf "per-image latency (batch %d): dense %.2f s, diagonal %.2f s: %.2fx; target >= 1.3x\n",
            img["lat", m, "dense"], lat["lat", m, "dense"], lat["lat", m, "diag"], lat["lat", m, "dense"] / lat["lat", m, "diag"]
        } else print "latency run: no lines parsed (latency.txt)"
        if (ips["max", m, "dense"] > 0 && ips["max", m, "diag"] > 0)
          printf "48 GB card max batch: dense %d images %.3f img/s, diagonal %d images %.3f img/s: %.2fx (diagonal / dense); target >= 3.1x\n",
            img["max", m, "dense"], ips["max", m, "dense"], img["max", m, "diag"], ips["max", m, "diag"], ips["max", m, "diag"] / ips["max", m, "dense"]
        else print "max-batch run: no lines parsed (maxbatch.txt)"
      }
      if (n == 0) print "no argen_bench lines parsed (latency.txt, maxbatch.txt)"
    }' "$OUT/latency.txt" "$OUT/maxbatch.txt"
  echo
  echo "== small model (argen-lumina-scenes-v1), dense, CUDA engine, cfg 4"
  grep -h -E "overall|^\| *(single_object|two_object|counting|colors|position|color_attr)" "$OUT/sweep_report.md" 2>/dev/null | head -8 \
    || echo "no report (sweep.log)"
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
