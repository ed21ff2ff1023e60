# Concurrent lone 7B images through the server, sequential against parallel decoding (issue #28), same server.
# Random-weight Janus-Pro-7B in the published layout, dense, rows and KV auto: argen_client load with
# PARALLEL_CONCURRENCY (default "16 64") requests in flight (3 x that many requests), parallel_window 0 then each of
# PARALLEL_WINDOWS (default "8"); then diagonal 95% N_r 64 at the same loads, sequential and at PARALLEL_DIAGONAL_WINDOWS
# (default: PARALLEL_WINDOWS; "" for sequential only). Ratios: each window against its policy's sequential run, and
# every run against dense sequential (the issue's "today"). Each load's steps from the server's step log: how many,
# their mean time and rows (where a window's gain goes: fewer steps an image against slower, fuller steps).
# PARALLEL_ENGINE=1 first runs argen_bench at the same batches, policies and windows (--parallel-window): the
# engine's step with its stage columns (qkv, attention, plan, apply, ffn ...) for each window (~60 s).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="parallel_window 0 (sequential) on the same server, same loads, same call"
NEEDS="argen_server argen_client"
run_scenario() {
  local ckpt=$LAB_WORK/Janus-Pro-7B log conc w policy steps n0
  checkpoint_start "$ckpt"
  if [ -n "${PARALLEL_ENGINE:-}" ]; then
    for w in 0 ${PARALLEL_WINDOWS:-8}; do
      stamp "engine: parallel window $w"
      guarded 120 "$BIN/argen_bench" --model 7b --batches "$(echo "${PARALLEL_CONCURRENCY:-16 64}" | tr ' ' ',')" \
        --policies dense,diagonal:0.95:64 --prompt-len 50 --parallel-window "$w"
    done
  fi
  checkpoint_wait "$ckpt" >/dev/null || { echo "no checkpoint"; cat "$ckpt.log"; return 1; }
  for policy in dense diagonal; do
    local extra=("--default_policy.name=$policy") windows="0 ${PARALLEL_WINDOWS:-8}"
    if [ $policy = diagonal ]; then
      extra+=(--default_policy.sparsity=0.95 --default_policy.n_recent=64)
      windows="0 ${PARALLEL_DIAGONAL_WINDOWS-${PARALLEL_WINDOWS:-8}}"
    fi
    log=$OUT/parallel-load_server_$policy.log
    steps=$OUT/parallel-load_steps_$policy.txt
    stamp "server $policy"
    server_start "$log" 50097 --model_dir="$ckpt" --queue_limit=1024 --step_log="$steps" "${extra[@]}" ||
      { echo "server $policy: not healthy"; continue; }
    for conc in ${PARALLEL_CONCURRENCY:-16 64}; do
      for w in $windows; do
        n0=$(wc -l <"$steps" 2>/dev/null || echo 1)
        echo "load $policy concurrency $conc parallel_window $w: $(
          guarded 120 "$BIN/argen_client" --server localhost:50097 load --requests $((3 * conc)) \
            --concurrency "$conc" --parallel_window "$w" --prompt "a red circle above a blue square" 2>&1 |
            grep -E "^wall|^failed by|^ok " | tr '\n' ' ')"
        sleep 0.5  # the step log is written every 200 ms
        echo "steps $policy concurrency $conc parallel_window $w: $(load_steps "$steps" "$n0")"
      done
    done
    server_stop
  done
}
# The decode steps a load added to STEP_LOG after line FROM (columns: bench/gpu/lib/serve.sh, steady_state).
load_steps() {  # STEP_LOG FROM
  awk -v from="$2" 'NR > from && $6 > 0 { n++; iv += $3; ms += $4; rows += $6 }
    END { if (n) printf "%d steps, %.2f ms a step (%.2f ms busy), %.1f rows decoded a step\n", n, iv / n, ms / n, rows / n
          else print "- (no steps)" }' "$1" 2>/dev/null || echo "- (no step log)"
}
# img/s per load, each window's ratio to its policy's sequential run and every run's to dense sequential.
summarize() {
  grep -h -E "^== |^load |^steps |^parallel |^7b |not healthy|no checkpoint|server rc" "$1" | cut -c1-240
  awk '/^load (dense|diagonal) concurrency/ { for (i = 1; i <= NF; ++i) if ($i == "images/s") r = $(i + 1); sub(",", "", r)
         p = $2; c = $4; w = $6; sub(":", "", w)
         if (w == 0) base[p, c] = r
         else if (base[p, c] > 0) printf "%s concurrency %s parallel_window %s: %.2fx sequential (%s / %s img/s)\n", p, c, w, r / base[p, c], r, base[p, c]
         if (p != "dense" || w != 0) if (base["dense", c] > 0)
           printf "%s concurrency %s parallel_window %s: %.2fx dense sequential\n", p, c, w, r / base["dense", c] }' "$1"
}
