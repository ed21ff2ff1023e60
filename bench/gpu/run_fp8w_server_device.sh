#!/usr/bin/env bash
# weight_dtype fp8 through the server at the full H200: random-weight
# Janus-Pro-7B in the published layout, argen_server --backend cuda
# (max_batch_rows and kv_budget_bytes auto, share_prompt_kv_across_requests on),
# diagonal 95% N_r 64, lone images, 2,000 distinct captions cycled by
# argen_client load --prompts-file; weight_dtype auto then fp8, in one call.
# Also cuda_backend_test (the fp8-weight cases against the CPU reference).
# $OUT: server_{auto,fp8}.log steps_{auto,fp8}.txt tests.log summary.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-fp8wserver}" || exit 1
WORK=${WORK:-/tmp/argen-fp8w}
CKPT=$WORK/Janus-Pro-7B
mkdir -p "$WORK"
t0=$(date +%s); DEADLINE=${DEADLINE:-570}
. bench/gpu/time_guard.sh
( timeout 170 python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --device cuda \
    --out "$CKPT" >"$WORK/ckpt.log" 2>&1; echo "ckpt rc=$?" >>"$WORK/ckpt.log" ) &
CKPT_JOB=$!
{ stamp "cuda_backend_test"; guarded 60 "$BIN/cuda_backend_test" --gtest_brief=1
  echo "rc(cuda_backend_test)=$?"; } >"$OUT/tests.log" 2>&1
for i in $(seq 2000); do echo "a photo of scene $i with a $((i % 7)) story house and $((i % 13)) trees"; done >"$WORK/captions.txt"
wait "$CKPT_JOB"
trap '[ -n "${SP:-}" ] && kill -TERM $SP 2>/dev/null; rm -rf "$WORK"' EXIT
serve() {  # WEIGHT_DTYPE
  local name=$1 log=$OUT/server_$1.log port=50095
  : >"$log"
  [ -f "$CKPT/model.safetensors" ] || { cat "$WORK/ckpt.log" >>"$log"; return 1; }
  stamp "server $name" >>"$log"
  "$BIN/argen_server" --config configs/argen.yaml --model_dir="$CKPT" --backend=cuda --port=$port --metrics_port=-1 \
    --queue_limit=4096 --step_log="$OUT/steps_$name.txt" --share_prompt_kv_across_requests=true --weight_dtype=$name \
    --connections.max_concurrent_streams=2048 --connections.max_threads=4096 \
    --default_policy.name=diagonal --default_policy.sparsity=0.95 --default_policy.n_recent=64 >>"$log" 2>&1 &
  SP=$!
  for _ in $(seq 240); do
    "$BIN/argen_client" --server localhost:$port health >/dev/null 2>&1 && break
    kill -0 "$SP" 2>/dev/null || break
    sleep 0.5
  done
  stamp "healthy" >>"$log"
  guarded 150 "$BIN/argen_client" --server localhost:$port load --requests 2400 --concurrency 1600 \
    --prompts-file "$WORK/captions.txt" >>"$log" 2>&1
  echo "load rc=$?" >>"$log"
  kill -TERM "$SP"; timeout 60 tail --pid="$SP" -f /dev/null; SP=""
}
serve auto
serve fp8
steady() {  # busy steps (requests waiting) from step 60 on
  awk 'NR > 1 && $1 >= 60 && $11 > 0 { n++; iv += $3; rows += $6 + $7 }
       END { if (n) printf "%.2f img/s over %d busy steps (%.0f rows, %.1f ms a step)", (rows / n / 2) / (576 * iv / n / 1000), n, rows / n, iv / n }' \
      "$OUT/steps_$1.txt" 2>/dev/null
}
{
  grep -h -E "PASSED|FAILED|^rc\(|fp8 weights 1" "$OUT/tests.log" | cut -c1-160
  for n in auto fp8; do
    echo "server weight_dtype=$n:"
    grep -h -E "^(ok|failed by|wall)|images/s|sizing:|load rc" "$OUT/server_$n.log" | cut -c1-240
    echo "  steady state: $(steady $n)"
  done
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
