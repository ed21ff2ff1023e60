#!/usr/bin/env bash
# Prompt-KV sharing through the server (#13 items 3 and 2), one device call:
# a random-weight Janus-Pro-7B checkpoint in the published layout; the engine
# (argen_bench) at the server's batch, 4 images a prompt, sharing off / on; then
# argen_server --backend cuda (GPU VQ decoder, 384 px PNGs over gRPC) under a
# saturating argen_client load of 4-image requests at the same batch cap, with
# share_prompt_kv true and false. Headline: server / engine img/s, same batch,
# same sharing. $OUT: bench.log server_share.log server_noshare.log summary.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-server}" || exit 1
WORK=${WORK:-/tmp/argen-share}
CKPT=$WORK/Janus-Pro-7B
mkdir -p "$WORK"
t0=$(date +%s); DEADLINE=${DEADLINE:-540}
. bench/gpu/time_guard.sh
BENCH=$OUT/bench.log
: >"$BENCH"
stamp "checkpoint" >>"$BENCH"
( timeout 170 python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --device cuda \
    --out "$CKPT" >"$WORK/ckpt.log" 2>&1; echo "ckpt rc=$?" >>"$WORK/ckpt.log" ) &
CKPT_JOB=$!
for _ in $(seq 120); do
  grep -qE "random tensors on|ckpt rc=" "$WORK/ckpt.log" 2>/dev/null && break
  sleep 0.5
done
stamp "argen_bench 256 images, 4 a prompt, prompt 26" >>"$BENCH"
guarded 90 "$BIN/argen_bench" --model 7b --batches 256 --policies diagonal:0.95:64 --prompt-len 26 --kv-budget 64G \
  --images-per-prompt 4 --prompt-sharing both >>"$BENCH" 2>&1
echo "rc=$?" >>"$BENCH"
wait "$CKPT_JOB"
cat "$WORK/ckpt.log" >>"$BENCH"

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
serve() {  # NAME SHARE
  local name=$1 share=$2 log=$OUT/server_$1.log port=50091
  : >"$log"
  [ -f "$CKPT/model.safetensors" ] || { echo "no checkpoint (see bench.log)" >>"$log"; return 1; }
  stamp "server $name" >>"$log"
  "$BIN/argen_server" --config configs/argen.yaml --model_dir="$CKPT" --backend=cuda --port=$port \
    --metrics_port=-1 --max_batch_rows=512 --queue_limit=4096 --share_prompt_kv="$share" \
    --connections.max_concurrent_streams=1024 --connections.max_threads=2048 \
    --default_policy.name=diagonal --default_policy.sparsity=0.95 --default_policy.n_recent=64 >>"$log" 2>&1 &
  SERVER_PID=$!
  local up=0
  for _ in $(seq 240); do
    if "$BIN/argen_client" --server localhost:$port health >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.5
  done
  stamp "healthy=$up" >>"$log"
  if [ $up = 1 ]; then
    # 96 requests of 4 images in flight against a 256-image cap: 640 images.
    guarded 130 "$BIN/argen_client" --server localhost:$port load --requests 160 --concurrency 96 --count 4 >>"$log" 2>&1
    echo "load rc=$?" >>"$log"
  fi
  stop_server >>"$log" 2>&1
}
serve share true
serve noshare false
{
  grep -h -E "^7b " "$BENCH" | cut -c1-120
  for n in share noshare; do echo "server $n:"; grep -h -E "^(ok|failed by|wall)|images/s|sizing:" "$OUT/server_$n.log" | cut -c1-200; done
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
