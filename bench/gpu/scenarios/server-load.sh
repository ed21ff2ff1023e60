# argen_server at the full H200 under a saturating argen_client load against the engine at the full card, same call.
# Random-weight Janus-Pro-7B in the published layout; rows and KV auto, share_prompt_kv_across_requests on,
# diagonal 95% N_r 64, 2,400 lone-image requests of 2,000 distinct captions, 1,600 in flight.
# SERVER_WEIGHTS: the weight_dtype values to serve, in turn (default "auto"; "auto fp8" needs DEADLINE ~570).
# SERVER_PARALLEL_WINDOWS: the loads' parallel_window values, a server each (default "0"; "0 8": #28's "the full
# card not below sequential", ~130 s a window).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="argen_bench of the same bundle at the full card, same policy, prompt rows, 26-token prompts (the captions' length), same call"
NEEDS="argen_bench argen_server argen_client"
run_scenario() {
  local ckpt=$LAB_WORK/Janus-Pro-7B dtype log
  checkpoint_start "$ckpt"
  write_captions "$LAB_WORK/captions.txt" 2000
  checkpoint_wait_draws "$ckpt"
  for dtype in ${SERVER_WEIGHTS:-auto}; do
    stamp "engine: full H200, weight_dtype $dtype"
    guarded 200 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
      --policies diagonal:0.95:64 --prompt-sharing across --prompt-len 26 --weight-dtype "$dtype"
  done
  checkpoint_wait "$ckpt" || { echo "no checkpoint"; return 1; }
  local w tag label window_flag
  for dtype in ${SERVER_WEIGHTS:-auto}; do
    for w in ${SERVER_PARALLEL_WINDOWS:-0}; do
      tag=$dtype label=$dtype window_flag=()
      if [ "$w" != 0 ]; then tag=${dtype}_pw$w label=$dtype+pw$w window_flag=(--parallel_window "$w"); fi
      log=$OUT/server-load_server_$tag.log
      : >"$log"
      stamp "server: weight_dtype $dtype, parallel_window $w"
      if server_start "$log" 50095 --model_dir="$ckpt" --queue_limit=4096 --step_log="$OUT/server-load_steps_$tag.txt" \
        --share_prompt_kv_across_requests=true --weight_dtype="$dtype" \
        --connections.max_concurrent_streams=2048 --connections.max_threads=4096 \
        --default_policy.name=diagonal --default_policy.sparsity=0.95 --default_policy.n_recent=64; then
        {
          guarded 150 "${SBIN:-$BIN}/argen_client" --server localhost:50095 load --requests 2400 --concurrency 1600 \
            --prompts-file "$LAB_WORK/captions.txt" "${window_flag[@]}"
          echo "load rc=$?"
          server_stop
        } >>"$log" 2>&1
      fi
      grep -h -E "^(ok|failed by|wall)|images/s|sizing:|load rc|server rc" "$log" | sed "s/^/server $label: /" | cut -c1-240
      echo "server $label steady state: $(steady_state "$OUT/server-load_steps_$tag.txt")"
    done
  done
}
# The ratio: the server's steady state (busy steps from step 60) over the engine's img/s, per weight_dtype
# (and parallel window: against the sequential engine).
summarize() {
  grep -h -E "^== |^7b |^card|^server |^no checkpoint" "$1" | cut -c1-220
  awk '$1 == "7b" && $9 == "|" { e[($2 ~ /fp8w/) ? "fp8" : "auto"] = $8 }
       /^server .* steady state: [0-9]/ { s[$2] = $5 }
       END { for (d in s) { b = d; sub(/\+pw.*/, "", b)
               if (e[b] > 0) printf "server / engine (weight_dtype %s): %.3f (%s / %s img/s)\n", d, s[d] / e[b], s[d], e[b] } }' "$1"
}
