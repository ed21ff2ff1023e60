#!/usr/bin/env bash
# Issue #13 items 2 and 6 on one H200, one call (~3.5 min): the server at the
# engine's speed and the card sized by kv_budget_bytes / max_batch_rows auto.
#   1. a random-weight Janus-Pro-7B checkpoint in the published layout, as one
#      model.safetensors (tools/convert/make_janus_pro_bin.py, drawn on the GPU,
#      written while the engine runs);
#   2. argen_bench (the engine) at the batches the server runs below: diagonal
#      95% N_r 64 at 256 images and dense at 96 images, prompt of the server's
#      length (26 tokens: the load's caption with the checkpoint's tokenizer);
#   3. the new gpu test (cuda_auto_sizing_test: a full-cap 1B batch under auto sizing);
#   4. argen_server --backend cuda on that checkpoint (GPU VQ decoder, 384 px PNGs
#      over gRPC) under a saturating argen_client load at the same batch cap
#      (max_batch_rows 512 / 192), with step_log on: diagonal 1 image a request
#      (the case that reached 63% of the engine), dense 4 images a request;
#   5. argen_bench --auto-sizing --max-batch: the full H200 with the new sizing.
# The headline is server/engine img/s at the same batch; the step logs show the
# decode loop's interval, rows and prefill tokens under the load. Table last
# (summary.txt). $OUT holds tests.log, bench.log, server_diagonal.log,
# server_dense.log, steps_diagonal.txt, steps_dense.txt, summary.txt (7 files).
#
#   bash bench/gpu/run_throughput_device.sh      # device, repository root, python3 with torch
#
# Bundle (development machine, after building build/ with CUDA):
#   /work/shared/tools/gpu-bundle.sh /tmp/tb build/server/argen_server build/client/argen_client \
#     build/bench/gpu/argen_bench build/engine/cuda/tests/cuda_auto_sizing_test
#   mkdir -p .gpubundle && tar -cJf .gpubundle/tput.tar.xz -C /tmp/tb bin lib
# A time guard keeps the run under DEADLINE seconds (default 235): every step
# gets at most what is left.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
if [ -f .gpubundle/tput.tar.xz ]; then
  B=/tmp/b
  [ -x $B/bin/argen_server ] || { mkdir -p $B && tar -xJf .gpubundle/tput.tar.xz -C $B; } || exit 1
else
  B=$ROOT/.gpubundle
fi
BIN=$B/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$ROOT
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/argen-tput}
CKPT=$WORK/Janus-Pro-7B
PROMPT_TOKENS=${PROMPT_TOKENS:-26}
mkdir -p "$OUT" "$WORK"
t0=$(date +%s)
DEADLINE=${DEADLINE:-235}
. bench/gpu/time_guard.sh  # stamp, guarded (run from the repository root)
BENCH=$OUT/bench.log
: >"$BENCH"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } >>"$BENCH" 2>&1

# 1. The checkpoint, in the background; the engine waits for its random draws (GPU) to end.
stamp "checkpoint" >>"$BENCH"
( timeout 170 python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --device cuda \
    --out "$CKPT" >"$WORK/ckpt.log" 2>&1; echo "ckpt rc=$?" >>"$WORK/ckpt.log" ) &
CKPT_JOB=$!
for _ in $(seq 120); do
  grep -qE "random tensors on|ckpt rc=" "$WORK/ckpt.log" 2>/dev/null && break
  sleep 0.5
done

# 2. The engine at the server's batches (explicit budget: the checkpoint writer still runs).
for run in "diagonal:0.95:64 256" "dense 96"; do
  set -- $run
  stamp "argen_bench $1 $2 images" >>"$BENCH"
  guarded 60 "$BIN/argen_bench" --model 7b --batches "$2" --policies "$1" --prompt-len "$PROMPT_TOKENS" \
    --kv-budget 64G >>"$BENCH" 2>&1
  echo "rc=$?" >>"$BENCH"
done
stamp "waiting for the checkpoint" >>"$BENCH"
wait "$CKPT_JOB"
cat "$WORK/ckpt.log" >>"$BENCH"

# 3. The new gpu test (it sizes the whole card, so it runs alone).
{
  stamp cuda_auto_sizing_test
  guarded 60 "$BIN/cuda_auto_sizing_test" --gtest_brief=0
  echo "rc(cuda_auto_sizing_test)=$?"
} >"$OUT/tests.log" 2>&1

# 4. The server under a saturating load at the same batch cap.
SERVER_PID=""
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  timeout 60 tail --pid="$SERVER_PID" -f /dev/null
  wait "$SERVER_PID"
  echo "server rc=$?"
  SERVER_PID=""
}
trap 'stop_server >/dev/null 2>&1; rm -rf "$WORK"' EXIT
serve() {  # NAME ROWS POLICY_FLAGS... ; then the load flags after --
  local name=$1 rows=$2; shift 2
  local policy=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do policy+=("$1"); shift; done
  shift
  local log=$OUT/server_$name.log port=50081
  : >"$log"
  [ -f "$CKPT/model.safetensors" ] || { echo "no checkpoint (see bench.log)" >>"$log"; return 1; }
  stamp "server $name" >>"$log"
  "$BIN/argen_server" --config configs/argen.yaml --model_dir="$CKPT" --backend=cuda --port=$port \
    --metrics_port=-1 --max_batch_rows="$rows" --queue_limit=4096 --step_log="$OUT/steps_$name.txt" \
    --connections.max_concurrent_streams=1024 --connections.max_threads=2048 \
    "${policy[@]}" >>"$log" 2>&1 &
  SERVER_PID=$!
  local up=0
  for _ in $(seq 240); do
    if "$BIN/argen_client" --server localhost:$port health >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.5
  done
  stamp "healthy=$up" >>"$log"
  if [ $up = 1 ]; then
    guarded 110 "$BIN/argen_client" --server localhost:$port load "$@" >>"$log" 2>&1
    echo "load rc=$?" >>"$log"
  fi
  stop_server >>"$log" 2>&1
}
# Diagonal: 1 image a request, 384 in flight against a 256-image cap, 640 images (2.5 lifetimes).
serve diagonal 512 --default_policy.name=diagonal --default_policy.sparsity=0.95 --default_policy.n_recent=64 \
  -- --requests 640 --concurrency 384 --count 1
# Dense: 4 images a request, 144 in flight against a 96-image cap, 240 images.
serve dense 192 --default_policy.name=dense -- --requests 60 --concurrency 36 --count 4

# 5. The full H200 with the new sizing (kv_budget_bytes / max_batch_rows auto).
stamp "argen_bench --auto-sizing --max-batch" >>"$BENCH"
guarded 150 "$BIN/argen_bench" --model 7b --auto-sizing --max-batch --policies diagonal:0.95:64,dense \
  --prompt-len 50 >>"$BENCH" 2>&1
echo "rc=$?" >>"$BENCH"
stamp done >>"$BENCH"

# The table. argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | ...
engine() { awk -v p="$1" -v n="$2" '$1 == "7b" && $2 == p && $3 == n && $9 == "|" { v = $'"$3"' } END { print (v == "" ? "-" : v) }' "$BENCH"; }
load_ips() { sed -n 's/.*images\/s \([0-9.]*\),.*/\1/p' "$OUT/server_$1.log" | tail -n1; }
# Busy steps (requests waiting, past the ramp): interval, rows, loop time, prefill tokens; P = tokens per prefilled row.
steps() {
  awk 'NR > 1 && $1 >= 20 && $11 > 0 { n++; iv += $3; rows += $6 + $7; lp += $5; if ($5 > mx) mx = $5; pt += $8 }
       NR > 1 { tok += $8; pr += $7 }
       END { if (n == 0) { print "- - - - - - -"; exit }
             printf "%.2f %.0f %.3f %.2f %.0f %.1f %.2f\n", iv / n, rows / n, lp / n, mx, pt / n, (pr ? tok / pr : 0),
                    (rows / n / 2) / (576 * iv / n / 1000) }' "$OUT/steps_$1.txt" 2>/dev/null || echo "- - - - - - -"
}
{
  echo "== gpu tests"
  grep -h -E "^\[  (PASSED|FAILED)|^rc\(|SKIPPED|cuda memory|free after" "$OUT/tests.log"
  echo
  echo "== same batch: server (argen_client load, 384 px PNGs over gRPC) / engine (argen_bench), 7B random weights"
  printf "%-17s %6s %5s %9s %9s %7s | %8s %9s %7s %8s %8s %8s %4s %9s\n" policy images cap engine server ratio \
    eng_step srv_step rows loop_ms loop_max pf_tok P steady
  for c in "diagonal diagonal:0.95:64 256 512" "dense dense 96 192"; do
    set -- $c
    e=$(engine "$2" "$3" 8); st=$(engine "$2" "$3" 6); s=$(load_ips "$1")
    read -r iv rows lp mx pt p steady <<<"$(steps "$1")"
    r=$(awk -v a="${s:-0}" -v b="$e" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.3f", a / b; else print "-" }')
    printf "%-17s %6s %5s %9s %9s %7s | %8s %9s %7s %8s %8s %8s %4s %9s\n" "$2" "$3" "$4" "$e" "${s:--}" "$r" \
      "$st" "$iv" "$rows" "$lp" "$mx" "$pt" "$p" "$steady"
  done
  echo "(img/s; eng_step: engine decode step ms; srv_step: mean step interval ms of the server's busy steps"
  echo " (requests waiting, step >= 20); rows: their mean rows decoded + prefilled; loop_ms / loop_max: the loop's"
  echo " own time between steps; pf_tok: prompt tokens prefilled per step; P: tokens per prompt (the engine ran"
  echo " $PROMPT_TOKENS); steady: img/s from the step log = rows/2 / (576 x step interval))"
  grep -h -E "^(ok|failed by|wall)|sizing:" "$OUT"/server_*.log | cut -c1-240
  echo
  echo "== full H200, kv_budget_bytes / max_batch_rows auto (argen_bench --auto-sizing --max-batch, prompt 50)"
  grep -E "^cuda memory" "$BENCH" | tail -n1
  awk 'f && $1 == "7b" && $9 == "|" { printf "%-17s %6s images %8s img/s, step %s ms, prefill %s s\n", $2, $3, $8, $6, $4 }
       /auto-sizing/ { f = 1 }' "$BENCH"
} | tee "$OUT/summary.txt"
