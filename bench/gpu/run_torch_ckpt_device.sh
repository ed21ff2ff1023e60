#!/usr/bin/env bash
# Issue #12 on the device: a directory laid out exactly as deepseek-ai ships
# Janus-Pro-7B (pytorch_model-0000{1,2}-of-00002.bin + pytorch_model.bin.index.json,
# config.json as published, a small tokenizer.json), written with random weights
# by the device's torch.save (tools/convert/make_janus_pro_bin.py), served by
# argen_server --backend cuda --model_dir DIR with no conversion: health, one
# generate, a short argen_client load. Then argen_convert turns it into
# safetensors (every storage CRC-checked, the 10 GB shard is ZIP64) and the
# server loads that form too, for the load-time ratio. Deletes the ~30 GB at
# the end. Table last; logs in $OUT.
#
#   bash bench/gpu/run_torch_ckpt_device.sh          # device: binaries in .gpubundle (bin/ + lib/, or a *.tar.xz of them)
#   bash bench/gpu/run_torch_ckpt_device.sh --cpu    # here: the tiny checkpoint, CPU backend, build/ binaries, .venv
#
# Env: BIN (directory with argen_server, argen_client, argen_convert), PY (python with torch),
# WORK (scratch, default /tmp/argen-torch-ckpt), SIZE (7B, 1B or tiny), SKIP_CONVERT=1.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
CPU=0
[ "${1:-}" = "--cpu" ] && CPU=1
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/argen-torch-ckpt}
mkdir -p "$OUT"
LOG=$OUT/torch_ckpt.log
: >"$LOG"
if [ $CPU = 1 ]; then
  BIN=${BIN:-$ROOT/build}
  PY=${PY:-$ROOT/.venv/bin/python}
  SIZE=${SIZE:-tiny}
  BACKEND=cpu
  server=$BIN/server/argen_server client=$BIN/client/argen_client convert=$BIN/tools/convert/argen_convert
else
  if [ -z "${BIN:-}" ]; then
    if [ -d .gpubundle/bin ]; then
      BIN=$ROOT/.gpubundle
    else
      mkdir -p /tmp/b && tar -xJf "$(ls .gpubundle/*.tar.xz | head -n1)" -C /tmp/b || exit 1
      BIN=/tmp/b
    fi
  fi
  export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
  PY=${PY:-python3}
  SIZE=${SIZE:-7B}
  BACKEND=cuda
  server=$BIN/bin/argen_server client=$BIN/bin/argen_client convert=$BIN/bin/argen_convert
fi
export ARGEN_SOURCE_DIR=$ROOT
BIN_DIR=$WORK/Janus-Pro-$SIZE
ST_DIR=$WORK/Janus-Pro-$SIZE-safetensors
rm -rf "$WORK"
mkdir -p "$WORK"
t0=$(date +%s)
rows=()
row() { rows+=("$(printf '%-34s %8s  %s' "$1" "$2" "$3")"); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
step() { echo "== $(( $(date +%s) - t0 )) s: $*" >>"$LOG"; }

# Starts the server on $1 and waits until it answers health; LOAD_S = the seconds that took, or FAIL.
SERVER_PID=""
LOAD_S=FAIL
start_server() {
  local dir=$1 port=$2 s
  s=$(now)
  LOAD_S=FAIL
  "$server" --model_dir="$dir" --backend=$BACKEND --port="$port" --metrics_port=-1 >>"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1200); do
    if "$client" --server "localhost:$port" health >/dev/null 2>&1; then LOAD_S=$(since "$s"); return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { wait "$SERVER_PID"; SERVER_PID=""; return 1; }
    sleep 0.5
  done
  return 1
}
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  timeout 60 tail --pid="$SERVER_PID" -f /dev/null
  wait "$SERVER_PID"; local rc=$?
  SERVER_PID=""
  return $rc
}
trap 'stop_server; rm -rf "$WORK"' EXIT

step "write $SIZE (.bin layout) with torch.save"
s=$(now)
if timeout 400 "$PY" tools/convert/make_janus_pro_bin.py --size "$SIZE" --out "$BIN_DIR" >>"$LOG" 2>&1; then
  row "torch.save $SIZE .bin layout" "$(since "$s")" "$(ls "$BIN_DIR" | tr '\n' ' ')"
else
  row "torch.save $SIZE .bin layout" "-" "FAILED (see $LOG)"; printf '%s\n' "${rows[@]}"; exit 1
fi
du -ab "$BIN_DIR" >>"$LOG"

step "serve the .bin layout"
start_server "$BIN_DIR" 50071
load_bin=$LOAD_S
if [ "$load_bin" = FAIL ]; then
  row "argen_server --model_dir (.bin)" "-" "FAILED to start (see $LOG)"
else
  row "argen_server --model_dir (.bin)" "$load_bin" "healthy ($BACKEND)"
  step "generate"
  if timeout 300 "$client" --server localhost:50071 generate --prompt "a photo of a red circle above a blue square" \
      --count 2 --seed 3 --out "$WORK/png" >>"$LOG" 2>&1; then
    row "argen_client generate" "" "ok: $(ls "$WORK/png" | wc -l) PNGs"
  else
    row "argen_client generate" "" "FAILED (see $LOG)"
  fi
  step "load"
  s=$(now)
  if [ $CPU = 1 ]; then reqs=4 conc=2; else reqs=32 conc=16; fi
  if timeout 300 "$client" --server localhost:50071 load --requests $reqs --concurrency $conc --policies dense,diagonal:0.9 \
      >"$WORK/load.txt" 2>&1; then
    row "argen_client load ($reqs requests)" "$(since "$s")" "$(grep -iE 'images/s|ok|failed' "$WORK/load.txt" | head -n2 | tr '\n' ' ')"
  else
    row "argen_client load ($reqs requests)" "$(since "$s")" "FAILED (see $LOG)"
  fi
  cat "$WORK/load.txt" >>"$LOG"
fi
stop_server; rc=$?
row "server exit after SIGTERM" "" "rc=$rc"

if [ "${SKIP_CONVERT:-0}" != 1 ]; then
  step "argen_convert"
  s=$(now)
  if timeout 400 "$convert" --in "$BIN_DIR" --out "$ST_DIR" >>"$LOG" 2>&1; then
    row "argen_convert .bin -> safetensors" "$(since "$s")" "$(ls "$ST_DIR" | grep -c safetensors) files, read back"
    rm -rf "$BIN_DIR"  # disk: keep one copy at a time
    step "serve the safetensors form"
    start_server "$ST_DIR" 50072
    load_st=$LOAD_S
    if [ "$load_st" = FAIL ]; then
      row "argen_server --model_dir (safetensors)" "-" "FAILED to start (see $LOG)"
    else
      ratio=$(awk -v a="$load_bin" -v b="$load_st" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "-" }')
      row "argen_server --model_dir (safetensors)" "$load_st" "healthy; .bin/safetensors load time = $ratio"
    fi
    stop_server
  else
    row "argen_convert .bin -> safetensors" "$(since "$s")" "FAILED (see $LOG)"
  fi
fi
rm -rf "$WORK"
step "done"
{
  printf '%-34s %8s  %s\n' "step ($SIZE, $BACKEND)" "seconds" "result"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/torch_ckpt_table.txt"
grep -q "FAIL" "$OUT/torch_ckpt_table.txt" && exit 1
exit 0
