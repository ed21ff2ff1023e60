# shellcheck shell=bash
# Sourced by bench/gpu/lab.sh: the steps the server scenarios share. Uses BIN,
# OUT, PYTHON (the device's python3, which holds torch: nothing can be
# installed there), stamp and guarded (time_guard.sh). SBIN, when set, is the
# bundle whose argen_server / argen_client serve (default BIN).

# A random-weight Janus-Pro-7B in the published layout (config.json, tokenizer,
# model.safetensors; tools/convert/make_janus_pro_bin.py) drawn on the GPU and
# written in the background; DIR.log is its log. Kept for later scenarios of
# the same call.
CKPT_JOB=""
checkpoint_start() {  # DIR [FORMAT: safetensors | bin]
  local dir=$1 format=${2:-safetensors}
  if [ -f "$dir/model.safetensors" ] || [ -f "$dir/pytorch_model.bin.index.json" ]; then return 0; fi
  mkdir -p "$(dirname "$dir")"
  (
    timeout 400 "$PYTHON" tools/convert/make_janus_pro_bin.py --size 7B --format "$format" --device cuda \
      --out "$dir" >"$dir.log" 2>&1
    echo "ckpt rc=$?" >>"$dir.log"
  ) &
  CKPT_JOB=$!
}
# Returns once the random draws are done (the writer then only writes the file), so that
# an engine run beside it has the GPU to itself.
checkpoint_wait_draws() {  # DIR
  for _ in $(seq 240); do
    grep -qE "random tensors on|ckpt rc=" "$1.log" 2>/dev/null && return 0
    [ -f "$1/model.safetensors" ] && return 0
    sleep 0.5
  done
}
checkpoint_wait() {  # DIR: 0 when the checkpoint is there
  if [ -n "$CKPT_JOB" ]; then wait "$CKPT_JOB"; fi
  CKPT_JOB=""
  cat "$1.log" 2>/dev/null
  [ -f "$1/model.safetensors" ] || [ -f "$1/pytorch_model.bin.index.json" ]
}

# argen_server --backend cuda with FLAGS, logging to LOG; returns 0 once it
# answers health (at most 2 minutes), 1 (and stops it) if it never does.
SERVER_PID=""
SERVER_READY_S=""
server_start() {  # LOG PORT FLAGS...
  local log=$1 port=$2 t_start
  shift 2
  local sbin=${SBIN:-$BIN}
  t_start=$(date +%s.%N)
  stamp "argen_server $*" >>"$log"
  "$sbin/argen_server" --config configs/argen.yaml --backend=cuda --port="$port" --metrics_port=-1 "$@" >>"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 240); do
    if "$sbin/argen_client" --server "localhost:$port" health >/dev/null 2>&1; then
      SERVER_READY_S=$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      stamp "healthy after $SERVER_READY_S s" >>"$log"
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.5
  done
  stamp "not healthy" >>"$log"
  server_stop >>"$log" 2>&1
  return 1
}
server_stop() {  # SIGTERM, then its exit status ("server rc=N")
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  timeout 60 tail --pid="$SERVER_PID" -f /dev/null
  wait "$SERVER_PID"
  echo "server rc=$?"
  SERVER_PID=""
}
client() {  # argen_client ARGS... against the bundle's client
  "${SBIN:-$BIN}/argen_client" "$@"
}

write_captions() {  # FILE N: N distinct captions of about 26 tokens
  local i
  for i in $(seq "$2"); do echo "a photo of scene $i with a $((i % 7)) story house and $((i % 13)) trees"; done >"$1"
}

# img/s of the server's busy steps (requests waiting) from step FROM on, from its --step_log
# (columns: step start_s interval_ms step_ms loop_ms rows_decoded rows_prefilled prefill_tokens
# groups_prefilled running_rows queue_depth tokens_sampled): the tokens the steps made over their
# time, TOKENS_PER_IMAGE an image (default 576: Janus; Emu3 at P px: (P/8) * (P/8 + 1) + 3). A log
# without tokens_sampled (before 2026-12-03) counts a token a step for each image in flight (a CFG
# pair each), which undercounts parallel decoding's several a step.
steady_state() {  # STEP_LOG [FROM] [TOKENS_PER_IMAGE]
  awk -v from="${2:-60}" -v tokens="${3:-576}" 'NR > 1 && $1 >= from && $11 > 0 {
      n++; iv += $3; rows += $6 + $7; made += (NF >= 12) ? $12 : ($6 + $7) / 2 }
    END { if (n) printf "%.2f img/s over %d busy steps (%.0f rows, %.1f ms a step)\n", (made / tokens) / (iv / 1000), n, rows / n, iv / n
          else print "- (no busy steps)" }' "$1" 2>/dev/null || echo "- (no step log)"
}
