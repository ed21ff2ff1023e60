# One 7B image alone through the server, end to end (384 px PNG over gRPC): client wall time, dense and diagonal 95%.
# argen_client generate --count 1 five times a policy; the first warms the captured graphs.
# SINGLE_WINDOWS="0 8": also parallel decoding (dense only) at those windows, same server.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none in the call: the target is absolute (<= 2.0 s); BASE_BUNDLE's server the same way first (when set)"
NEEDS="argen_server argen_client"
run_scenario() {
  local ckpt=$LAB_WORK/Janus-Pro-7B b i policy run s e log
  checkpoint_start "$ckpt"
  checkpoint_wait "$ckpt" >/dev/null || { echo "no checkpoint"; cat "$ckpt.log"; return 1; }
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    SBIN=$b
    for policy in dense diagonal; do
      local extra=("--default_policy.name=$policy")
      [ $policy = diagonal ] && extra+=(--default_policy.sparsity=0.95 --default_policy.n_recent=64)
      log=$OUT/single-image_server_$policy.log
      stamp "${AB_NAMES[$i]}: server $policy"
      server_start "$log" 50091 --model_dir="$ckpt" "${extra[@]}" || { echo "server $policy: not healthy"; continue; }
      local windows="0" w label
      [ $policy = dense ] && windows=${SINGLE_WINDOWS:-0}
      for w in $windows; do
        label=$policy
        [ "$w" != 0 ] && label="$policy parallel_window $w"
        for run in 1 2 3 4 5; do
          s=$(date +%s.%N)
          guarded 30 "$b/argen_client" --server localhost:50091 generate --prompt "a red circle above a blue square" \
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
