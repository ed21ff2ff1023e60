# One 7B image alone through the server, end to end (a PNG over gRPC): client wall time, dense and diagonal 95%.
# argen_client generate --count 1 SINGLE_RUNS times (default 5) a policy; the first warms the captured graphs.
# SINGLE_WINDOWS="0 8": also parallel decoding (dense only) at those windows, same server.
# SINGLE_MODEL: janus-7b (default: random Janus-Pro-7B, 384 px, diagonal N_r 64) or lumina-768 (random
# Lumina-mGPT-7B-768 from tools/convert/make_lumina_random.py: 768 px, 2,351 tokens, the family's N_r; issue #28's
# "Lumina-mGPT 768 px one image against sequential"; ~14 s a sequential image, so SINGLE_RUNS=3 fits a call).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none in the call: the target is absolute (<= 2.0 s); BASE_BUNDLE's server the same way first (when set)"
NEEDS="argen_server argen_client"
run_scenario() {
  local model=${SINGLE_MODEL:-janus-7b} ckpt b i policy run s e log guard=30
  case $model in
    janus-7b)
      ckpt=$LAB_WORK/Janus-Pro-7B
      checkpoint_start "$ckpt"
      checkpoint_wait "$ckpt" >/dev/null || { echo "no checkpoint"; cat "$ckpt.log"; return 1; } ;;
    lumina-768)
      # The folder's -768 is the target size argen reads.
      ckpt=$LAB_WORK/Lumina-mGPT-7B-768 guard=90
      [ -f "$ckpt/model.safetensors" ] || guarded 300 "$PYTHON" tools/convert/make_lumina_random.py --out "$ckpt" \
        --device cuda >"$ckpt.log" 2>&1
      cat "$ckpt.log"
      [ -f "$ckpt/model.safetensors" ] || { echo "no checkpoint"; return 1; } ;;
    *) echo "single-image: no model $model (janus-7b lumina-768)"; return 1 ;;
  esac
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    SBIN=$b
    for policy in dense diagonal; do
      local extra=("--default_policy.name=$policy")
      # Janus: the paper's N_r 64; Lumina: the family's default window.
      [ $policy = diagonal ] && extra+=(--default_policy.sparsity=0.95)
      [ $policy = diagonal ] && [ "$model" = janus-7b ] && extra+=(--default_policy.n_recent=64)
      log=$OUT/single-image_server_$policy.log
      stamp "${AB_NAMES[$i]}: server $policy"
      server_start "$log" 50091 --model_dir="$ckpt" "${extra[@]}" || { echo "server $policy: not healthy"; continue; }
      local windows="0" w label
      [ $policy = dense ] && windows=${SINGLE_WINDOWS:-0}
      for w in $windows; do
        label=$policy
        [ "$w" != 0 ] && label="$policy parallel_window $w"
        for run in $(seq "${SINGLE_RUNS:-5}"); do
          s=$(date +%s.%N)
          guarded "$guard" "$b/argen_client" --server localhost:50091 generate --prompt "a red circle above a blue square" \
            --count 1 --seed "$run" --parallel_window "$w" --out "$LAB_WORK/png_$policy$w" --json
          e=$(date +%s.%N)
          echo "client wall $label run $run: $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f", e - s }') s"
        done
      done
      server_stop
    done
  done
  SBIN=""
}
summarize() { grep -h -E "^== |client wall|not healthy|no checkpoint|server rc" "$1" | cut -c1-200; }
