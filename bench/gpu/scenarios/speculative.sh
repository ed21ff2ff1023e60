# One 7B image alone through the server, sequential against speculative decoding (issue #28): wall, steps, drafts taken.
# Random-weight Janus-Pro-7B in the published layout, dense: argen_client generate --count 1 five times (seeds 1-5) at
# speculative_window 0 (sequential), then at each of SPECULATIVE_WINDOWS (default "4 8 16"), same server; run 1 of
# each window warms its graph shapes. Random weights' near-flat distributions make their acceptance rate no guide to
# a trained model's (docs/serving.md has the shipped model's): this measures a step's cost at each window.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="speculative_window 0 (sequential) on the same server, same prompt and seeds, same call"
NEEDS="argen_server argen_client"
# A number field of the client's --json output (flattened), or "-".
json_field() {  # JSON NAME
  local v
  v=$(sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" <<<"$1")
  echo "${v:--}"
}
run_scenario() {
  local ckpt=$LAB_WORK/Janus-Pro-7B log=$OUT/speculative_server.log w run s e json
  checkpoint_start "$ckpt"
  checkpoint_wait "$ckpt" >/dev/null || { echo "no checkpoint"; cat "$ckpt.log"; return 1; }
  stamp "server dense"
  server_start "$log" 50095 --model_dir="$ckpt" --default_policy.name=dense || { echo "server dense: not healthy"; return 1; }
  for w in 0 ${SPECULATIVE_WINDOWS:-4 8 16}; do
    for run in 1 2 3 4 5; do
      s=$(date +%s.%N)
      json=$(guarded 60 "$BIN/argen_client" --server localhost:50095 generate --prompt "a red circle above a blue square" \
        --count 1 --seed "$run" --speculative_window "$w" --out "$LAB_WORK/png_sw$w" --json 2>&1 | tr -d ' \n')
      e=$(date +%s.%N)
      echo "speculative_window $w run $run: wall $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f", e - s }') s," \
        "steps $(json_field "$json" steps), drafts $(json_field "$json" drafts_accepted) of" \
        "$(json_field "$json" drafts_proposed), decode $(json_field "$json" decode_seconds) s, status" \
        "$(sed -n 's/.*"status":"\([A-Z_]*\)".*/\1/p' <<<"$json")"
    done
  done
  server_stop
}
# Per window, runs 2-5: mean wall, steps per image, the drafts taken, the speed-up over sequential.
summarize() {
  grep -h -E "^== |^speculative_window .* run 1:|not healthy|no checkpoint|server rc" "$1" | cut -c1-200
  awk '/^speculative_window / && $4 != "1:" {
         w = $2; n[w]++; wall[w] += $6; steps[w] += $9; acc[w] += $11; prop[w] += $13
         if (!(w in seen)) { seen[w] = 1; order[++k] = w } }
       END { for (i = 1; i <= k; ++i) { w = order[i]
               taken = "-"; if (prop[w] > 0) taken = sprintf("%.1f%%", 100 * acc[w] / prop[w])
               against = "no baseline"
               if (w == 0) against = "the baseline"
               else if (n[0] > 0 && wall[w] > 0) against = sprintf("%.2fx sequential speed", (wall[0] / n[0]) / (wall[w] / n[w]))
               printf "speculative_window %s (runs 2-5): wall %.3f s, %.0f steps per image, drafts taken %s, %s\n",
                 w, wall[w] / n[w], steps[w] / n[w], taken, against } }' "$1"
}
