#!/usr/bin/env bash
# The server at the full H200 with prompt-KV sharing (#13's "server >= 30 img/s"
# target at its best configuration): random-weight Janus-Pro-7B in the published
# layout, argen_server --backend cuda with max_batch_rows 3400 (kv_budget_bytes
# auto), diagonal 95% N_r 64, 4-image requests from argen_client load (600
# requests, 512 in flight = 2,048 images against a 1,700-image cap); the engine
# at its max batch with the same prompt length (26) and row cap first, in the
# same call. $OUT: bench.log server_full.log steps_full.txt summary.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-server}" || exit 1
WORK=${WORK:-/tmp/argen-share}
CKPT=$WORK/Janus-Pro-7B
mkdir -p "$WORK"
t0=$(date +%s); DEADLINE=${DEADLINE:-560}
. bench/gpu/time_guard.sh
BENCH=$OUT/bench.log
: >"$BENCH"
( timeout 170 python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --device cuda \
    --out "$CKPT" >"$WORK/ckpt.log" 2>&1; echo "ckpt rc=$?" >>"$WORK/ckpt.log" ) &
CKPT_JOB=$!
for _ in $(seq 120); do
  grep -qE "random tensors on|ckpt rc=" "$WORK/ckpt.log" 2>/dev/null && break
  sleep 0.5
done
stamp "argen_bench full H200, 4 a prompt, prompt 26, sharing on" >>"$BENCH"
guarded 150 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 3400 --policies diagonal:0.95:64 \
  --prompt-len 26 --images-per-prompt 4 --prompt-sharing on >>"$BENCH" 2>&1
echo "rc=$?" >>"$BENCH"
wait "$CKPT_JOB"
cat "$WORK/ckpt.log" >>"$BENCH"
log=$OUT/server_full.log port=50093
: >"$log"
trap '[ -n "${SP:-}" ] && kill -TERM $SP 2>/dev/null; rm -rf "$WORK"' EXIT
if [ -f "$CKPT/model.safetensors" ]; then
  stamp "server" >>"$log"
  "$BIN/argen_server" --config configs/argen.yaml --model_dir="$CKPT" --backend=cuda --port=$port --metrics_port=-1 \
    --max_batch_rows=3400 --queue_limit=4096 --step_log="$OUT/steps_full.txt" \
    --connections.max_concurrent_streams=1024 --connections.max_threads=2048 \
    --default_policy.name=diagonal --default_policy.sparsity=0.95 --default_policy.n_recent=64 >>"$log" 2>&1 &
  SP=$!
  for _ in $(seq 240); do
    "$BIN/argen_client" --server localhost:$port health >/dev/null 2>&1 && break
    kill -0 "$SP" 2>/dev/null || break
    sleep 0.5
  done
  stamp "healthy" >>"$log"
  guarded 300 "$BIN/argen_client" --server localhost:$port load --requests 600 --concurrency 512 --count 4 >>"$log" 2>&1
  echo "load rc=$?" >>"$log"
  kill -TERM "$SP"; timeout 60 tail --pid="$SP" -f /dev/null; SP=""
fi
# Steady state from the step log: busy steps (requests waiting) from step 60 on.
steady=$(awk 'NR > 1 && $1 >= 60 && $11 > 0 { n++; iv += $3; rows += $6 + $7 }
              END { if (n) printf "%.2f img/s over %d busy steps (%.0f rows, %.1f ms a step)", (rows / n / 2) / (576 * iv / n / 1000), n, rows / n, iv / n }' \
         "$OUT/steps_full.txt" 2>/dev/null)
{
  grep -h -E "^7b |^card" "$BENCH" | cut -c1-150
  grep -h -E "^(ok|failed by|wall)|images/s|sizing:" "$log" | cut -c1-220
  echo "server steady state: ${steady:--}"
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
