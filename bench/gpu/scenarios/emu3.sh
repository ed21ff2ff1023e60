# Emu3-Gen (8.5B shape, random weights in BAAI's layout) through the server: one lone image, dense against
# diagonal 95% N_r 64, then EMU3_CONCURRENT (default 16) images at once; the server's vision-decode time apart.
# EMU3_PX: 512 (default: config image_area 512^2, 64 x 65 + 3 = 4,163 tokens, ~400 s in all) or 720 (the
# published 720^2: 90 x 91 + 3 = 8,193 tokens; about twice as long, so with EMU3_POLICIES=dense or =diagonal
# (default "dense diagonal") a call at DEADLINE 570 holds one policy).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same call, same server binary and checkpoint (the issue #29 ratios); BASE_BUNDLE's server the same way first (when set)"
NEEDS="argen_server argen_client"
run_scenario() {
  local px=${EMU3_PX:-512} n=${EMU3_CONCURRENT:-16}
  local ckpt=$LAB_WORK/Emu3-Gen-$px b i policy log s e label
  if [ ! -f "$ckpt/model.safetensors" ]; then
    mkdir -p "$ckpt"
    guarded 300 "$PYTHON" tools/convert/make_emu3_gen_random.py --out "$ckpt" --image-area $((px * px)) \
      --device cuda >"$ckpt.log" 2>&1
    cat "$ckpt.log"
  fi
  [ -f "$ckpt/model.safetensors" ] || { echo "no checkpoint"; return 1; }
  write_captions "$LAB_WORK/emu3_captions.txt" "$n"
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    SBIN=$b
    # shellcheck disable=SC2086  # EMU3_POLICIES is a list
    for policy in ${EMU3_POLICIES:-dense diagonal}; do
      local extra=("--default_policy.name=$policy")
      [ "$policy" = diagonal ] && extra+=(--default_policy.sparsity=0.95 --default_policy.n_recent=64)
      log=$OUT/emu3_server_$policy.log
      label="${AB_NAMES[$i]} $policy ${px}px"
      stamp "$label: server"
      server_start "$log" 50097 --model_dir="$ckpt" "${extra[@]}" || { echo "$label: not healthy"; continue; }
      grep -h "Emu3 vision decoder" "$log" | sed "s/^/$label: /"
      # A lone image (the first call also warms the captured graphs: two runs).
      for run in 1 2; do
        s=$(date +%s.%N)
        guarded 200 "$b/argen_client" --server localhost:50097 generate --prompt "a red circle above a blue square" \
          --count 1 --seed "$run" --out "$LAB_WORK/emu3_png_$policy" --json >"$LAB_WORK/emu3_lone.json" \
          2>>"$LAB_WORK/emu3_client.err"
        e=$(date +%s.%N)
        echo "$label lone run $run: client wall $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }') s," \
          "$(emu3_metrics "$LAB_WORK/emu3_lone.json")"
      done
      # n images at once: n requests in flight (one image each).
      s=$(date +%s.%N)
      guarded 300 "$b/argen_client" --server localhost:50097 generate --prompts-file "$LAB_WORK/emu3_captions.txt" \
        --parallel "$n" --seed 1 --out "$LAB_WORK/emu3_png_${policy}_$n" --json >"$LAB_WORK/emu3_batch.json" \
        2>>"$LAB_WORK/emu3_client.err"
      e=$(date +%s.%N)
      echo "$label $n concurrent: client wall $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }') s," \
        "$(emu3_metrics "$LAB_WORK/emu3_batch.json")"
      server_stop
      grep -h "^argen_client:" "$LAB_WORK/emu3_client.err" 2>/dev/null | sort | uniq -c | head -3 | sed "s/^/$label client: /"
      rm -f "$LAB_WORK/emu3_client.err"
    done
  done
  SBIN=""
}
# The requests' mean wall, decode and vision-decode seconds from argen_client's --json output.
emu3_metrics() {  # FILE
  sed 's/[,{}]/\n/g' "$1" | awk -F': *' '
    $1 ~ /"wall_seconds"/ { w += $2; nw++ } $1 ~ /"decode_seconds"/ && $1 !~ /vq_/ { d += $2; nd++ }
    $1 ~ /"vq_decode_seconds"/ { v += $2; nv++ } $1 ~ /"status"/ && $2 ~ /"OK"/ { ok++ }
    END { printf "%d requests (%d OK): mean wall %.2f s, decode %.2f s, vision decode + PNG %.3f s", nw, ok,
            nw ? w / nw : 0, nd ? d / nd : 0, nv ? v / nv : 0 }'
}
# Ratios are dense / diagonal of the same bundle, size and load: the requests' mean wall (client side).
summarize() {
  grep -h -E "^== | lone run | concurrent: |not healthy|no checkpoint|server rc|Emu3 vision decoder| client: " "$1" | cut -c1-220
  # "<bundle> <policy> <px>px lone run 2: ..." and "<bundle> <policy> <px>px N concurrent: ...", each with "mean wall S"
  awk 'match($0, /mean wall [0-9.]+/) { m = substr($0, RSTART + 10, RLENGTH - 10) }
       $4 == "lone" && $6 == "2:" { k = $1 " " $3 " lone image"; w[k, $2] = m; keys[k] = 1 }
       $5 == "concurrent:" { k = $1 " " $3 " " $4 " concurrent"; w[k, $2] = m; keys[k] = 1 }
       END { for (k in keys) if (w[k, "dense"] > 0 && w[k, "diagonal"] > 0)
               printf "%s: mean request wall dense / diagonal %.2fx (%s vs %s s)\n", k, w[k, "dense"] / w[k, "diagonal"], w[k, "dense"], w[k, "diagonal"] }' "$1"
}
