#!/usr/bin/env bash
# One 7B image alone through the server (issue #13's "at most 2.0 s end to end"):
# a random-weight Janus-Pro-7B checkpoint written on the device (torch), then
# argen_server --backend cuda (GPU VQ decoder, 384 px PNG over gRPC) and
# `argen_client generate --count 1 --json` five times per policy (the first
# warms the captured graphs); the client's wall time and the server's figures
# per request. $OUT: single.log (client JSON lines and the server log).
#   bash bench/gpu/run_single_image_device.sh    # device, repository root, python3 with torch
# Bundle: gpu-bundle.sh /tmp/sb build/server/argen_server build/client/argen_client; tar | xz > .gpubundle/sb.tar.xz
set -u
. bench/gpu/bundle_env.sh
use_bundle sb || exit 1
WORK=/tmp/argen-single; CKPT=$WORK/Janus-Pro-7B
mkdir -p "$WORK"
t0=$(date +%s); DEADLINE=${DEADLINE:-280}
. bench/gpu/time_guard.sh
log=$OUT/single.log
stamp checkpoint >"$log"
guarded 150 python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --device cuda --out "$CKPT" \
  >>"$log" 2>&1
echo "ckpt rc=$?" >>"$log"
for policy in dense diagonal; do
  extra=(--default_policy.name=$policy)
  [ $policy = diagonal ] && extra+=(--default_policy.sparsity=0.95 --default_policy.n_recent=64)
  stamp "server $policy" >>"$log"
  "$BIN/argen_server" --config configs/argen.yaml --model_dir="$CKPT" --backend=cuda --port=50091 --metrics_port=-1 \
    "${extra[@]}" >>"$OUT/server_$policy.log" 2>&1 &
  pid=$!
  for _ in $(seq 240); do
    "$BIN/argen_client" --server localhost:50091 health >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  stamp "healthy $policy" >>"$log"
  for i in 1 2 3 4 5; do
    s=$(date +%s.%N)
    guarded 30 "$BIN/argen_client" --server localhost:50091 generate --prompt "a red circle above a blue square" \
      --count 1 --seed $i --out "$WORK/png_$policy" --json >>"$log" 2>&1
    e=$(date +%s.%N)
    echo "client wall $policy run $i: $(awk "BEGIN{print $e - $s}") s" >>"$log"
  done
  kill -TERM $pid; wait $pid; echo "server rc=$?" >>"$log"
done
tail -n 30 "$OUT/server_dense.log" >>"$log" 2>/dev/null
grep -E "client wall|ckpt rc|server rc|healthy" "$log"
rm -rf "$WORK"
