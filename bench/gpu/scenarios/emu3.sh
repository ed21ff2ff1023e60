# Emu3-Gen (8.5B shape, random weights in BAAI's layout) through the server: one lone image, dense against
# diagonal 95% N_r EMU3_N_RECENT (default five image rows), then EMU3_CONCURRENT (default 16) images at once; the server's vision-decode time apart.
# EMU3_PX: 512 (default: config image_area 512^2, 64 x 65 + 3 = 4,163 tokens, ~400 s in all) or 720 (the
# published 720^2: 90 x 91 + 3 = 8,193 tokens; about twice as long, so with EMU3_POLICIES=dense or =diagonal
# (default "dense diagonal") a call at DEADLINE 570 holds one policy).
# EMU3_STEPS: which of "lone concurrent full" (default "lone concurrent"; concurrent alone skips the lone runs'
# graph warm-up). full (issue #29, the server at the full card): rows and KV auto, EMU3_FULL_REQUESTS (default
# 1100, past the ~824 diagonal images 720 px fits, so requests stay queued; past 2,048 they wait for a stream; 512 px fits ~1,200:
# set ~1600) lone-image requests all in flight, cut by the guard after EMU3_FULL_SECONDS (default 240: ~820 images x
# 8,193 steps cannot finish in a call); the server's img/s is the steady state of its step log from step
# EMU3_FULL_FROM (default 600: past the 455-step diagonal window the KV stops growing). Before the servers, per
# bundle, argen_bench at the full card (auto sizing, max batch, diagonal only, the rest projected from step 1,000)
# under EMU3_ENGINE_GUARD seconds (default 200) is the baseline. At 720 px a call holds the engine and one
# policy's full step (EMU3_POLICIES=diagonal).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same call, same server binary and checkpoint (the issue #29 ratios); full: argen_bench of the same bundle at the full card, diagonal at the same N_r, same call; BASE_BUNDLE's server the same way first (when set)"
NEEDS="argen_server argen_client"
case " ${EMU3_STEPS:-lone concurrent} " in *" full "*) NEEDS="$NEEDS argen_bench" ;; esac
run_scenario() {
  local px=${EMU3_PX:-512} n=${EMU3_CONCURRENT:-16} steps=" ${EMU3_STEPS:-lone concurrent} "
  local full_n=${EMU3_FULL_REQUESTS:-1100} tokens=$(((px / 8) * (px / 8 + 1) + 3))
  # N_r: 95% of 4,163 (512 px) leaves N_att 208 > 64, so the window is EMU3_N_RECENT (default five image rows: 325 at 512 px, 455 at 720).
  local nr=${EMU3_N_RECENT:-$((5 * (px / 8 + 1)))}
  local ckpt=$LAB_WORK/Emu3-Gen-$px b i policy log s e label tag step model
  for step in $steps; do
    case $step in lone | concurrent | full) ;; *) echo "emu3: no step $step (lone concurrent full)" ;; esac
  done
  if [ ! -f "$ckpt/model.safetensors" ]; then
    mkdir -p "$ckpt"
    guarded 300 "$PYTHON" tools/convert/make_emu3_gen_random.py --out "$ckpt" --image-area $((px * px)) \
      --device cuda >"$ckpt.log" 2>&1
    cat "$ckpt.log"
  fi
  [ -f "$ckpt/model.safetensors" ] || { echo "no checkpoint"; return 1; }
  write_captions "$LAB_WORK/emu3_captions.txt" "$n"
  [[ $steps == *" full "* ]] && write_captions "$LAB_WORK/emu3_full_captions.txt" "$full_n"
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    SBIN=$b
    # The full step's files: the candidate's plain, a baseline's named (the step log is rewritten by each server).
    tag=""
    [ "${AB_NAMES[$i]}" = candidate ] || tag=_${AB_NAMES[$i]}
    # The engine's own img/s at the full card, diagonal at the server's N_r (argen_bench's emu3 is 720 px).
    if [[ $steps == *" full "* && " ${EMU3_POLICIES:-dense diagonal} " == *" diagonal "* ]]; then
      case $px in 720) model=emu3 ;; 512) model=emu3-512 ;; *) model="" ;; esac
      if [ -n "$model" ]; then
        stamp "${AB_NAMES[$i]} engine: $model, full H200, auto sizing, max batch, diagonal:0.95:$nr"
        guarded "${EMU3_ENGINE_GUARD:-200}" "$b/argen_bench" --model "$model" --auto-sizing --max-batch \
          --policies "diagonal:0.95:$nr" --prompt-len 50 --stage-steps 0 --project-bounded 1000
      else
        echo "${AB_NAMES[$i]} engine: no argen_bench model at $px px (512 or 720): no baseline"
      fi
    fi
    # shellcheck disable=SC2086  # EMU3_POLICIES is a list
    for policy in ${EMU3_POLICIES:-dense diagonal}; do
      local extra=("--default_policy.name=$policy")
      [ "$policy" = diagonal ] && extra+=(--default_policy.sparsity=0.95 "--default_policy.n_recent=$nr")
      label="${AB_NAMES[$i]} $policy ${px}px"
      if [[ $steps == *" lone "* || $steps == *" concurrent "* ]]; then
        log=$OUT/emu3_server_$policy.log
        stamp "$label: server"
        if server_start "$log" 50097 --model_dir="$ckpt" "${extra[@]}"; then
          grep -h "Emu3 vision decoder" "$log" | sed "s/^/$label: /"
          # A lone image (the first call also warms the captured graphs: two runs).
          [[ $steps == *" lone "* ]] && for run in 1 2; do
            s=$(date +%s.%N)
            guarded 200 "$b/argen_client" --server localhost:50097 generate --prompt "a red circle above a blue square" \
              --count 1 --seed "$run" --out "$LAB_WORK/emu3_png_$policy" --json >"$LAB_WORK/emu3_lone.json" \
              2>>"$LAB_WORK/emu3_client.err"
            e=$(date +%s.%N)
            echo "$label lone run $run: client wall $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }') s," \
              "$(emu3_metrics "$LAB_WORK/emu3_lone.json")"
          done
          # n images at once: n requests in flight (one image each).
          if [[ $steps == *" concurrent "* ]]; then
            s=$(date +%s.%N)
            guarded 300 "$b/argen_client" --server localhost:50097 generate --prompts-file "$LAB_WORK/emu3_captions.txt" \
              --parallel "$n" --seed 1 --out "$LAB_WORK/emu3_png_${policy}_$n" --json >"$LAB_WORK/emu3_batch.json" \
              2>>"$LAB_WORK/emu3_client.err"
            e=$(date +%s.%N)
            echo "$label $n concurrent: client wall $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }') s," \
              "$(emu3_metrics "$LAB_WORK/emu3_batch.json")"
          fi
          server_stop
          grep -h "^argen_client:" "$LAB_WORK/emu3_client.err" 2>/dev/null | sort | uniq -c | head -3 | sed "s/^/$label client: /"
          rm -f "$LAB_WORK/emu3_client.err"
        else
          echo "$label: not healthy"
        fi
      fi
      if [[ $steps == *" full "* ]]; then
        log=$OUT/emu3_server_full${tag}_$policy.log
        : >"$log"
        stamp "$label: server at the full card, $full_n requests"
        # Rows and KV auto; every request in flight at once (streams, threads, queue); a short drain once the
        # guard has cancelled them.
        if server_start "$log" 50097 --model_dir="$ckpt" "${extra[@]}" --step_log="$OUT/emu3_steps${tag}_$policy.txt" \
          --queue_limit=4096 --connections.max_concurrent_streams=2048 --connections.max_threads=4096 \
          --drain_timeout_s=5; then
          {
            # The guard's timeout ends it (its summary covers the requests sent; the server cancels the streams).
            guarded "${EMU3_FULL_SECONDS:-240}" "$b/argen_client" --server localhost:50097 load --requests "$full_n" \
              --concurrency "$full_n" --prompts-file "$LAB_WORK/emu3_full_captions.txt"
            echo "load rc=$?"
            server_stop
          } >>"$log" 2>&1
          grep -h -E "^(ok|failed by|wall)|images/s|sizing:|interrupted after|load rc|server rc" "$log" \
            | sed "s/^/$label full card: /" | cut -c1-240
          echo "$label full card steady state: $(steady_state "$OUT/emu3_steps${tag}_$policy.txt" "${EMU3_FULL_FROM:-600}" "$tokens")"
        else
          echo "$label full card: not healthy"
        fi
      fi
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
# Ratios are dense / diagonal of the same bundle, size and load: the requests' mean wall (client side); at the full
# card the steady-state img/s, diagonal / dense and server / engine (argen_bench's img/s, 8th column).
summarize() {
  grep -h -E "^== | lone run | concurrent: |not healthy|no checkpoint|server rc|Emu3 vision decoder| client: | full card|^emu3(-512)? |^projected|^cuda memory| engine: no " "$1" | cut -c1-220
  # "<bundle> <policy> <px>px lone run 2: ..." and "<bundle> <policy> <px>px N concurrent: ...", each with "mean wall S"
  awk 'match($0, /mean wall [0-9.]+/) { m = substr($0, RSTART + 10, RLENGTH - 10) }
       $4 == "lone" && $6 == "2:" { k = $1 " " $3 " lone image"; w[k, $2] = m; keys[k] = 1 }
       $5 == "concurrent:" { k = $1 " " $3 " " $4 " concurrent"; w[k, $2] = m; keys[k] = 1 }
       END { for (k in keys) if (w[k, "dense"] > 0 && w[k, "diagonal"] > 0)
               printf "%s: mean request wall dense / diagonal %.2fx (%s vs %s s)\n", k, w[k, "dense"] / w[k, "diagonal"], w[k, "dense"], w[k, "diagonal"] }' "$1"
  # The engine's line follows its "== T s: <bundle> engine: ..." stamp; the server's is
  # "<bundle> <policy> <px>px full card steady state: X img/s ...".
  awk '/^== / { bundle = $4 }
       $9 == "|" && $2 ~ /^diagonal/ && $3 ~ /^[0-9]+$/ { e[bundle] = $8 }
       $4 == "full" && $6 == "steady" && $8 ~ /^[0-9]/ { s[$1, $2] = $8; px[$1] = $3; keys[$1] = 1 }
       END { for (b in keys) {
               if (s[b, "diagonal"] > 0 && e[b] > 0)
                 printf "%s %s full card: server / engine (diagonal) %.3f (%s / %s img/s)\n", b, px[b], s[b, "diagonal"] / e[b], s[b, "diagonal"], e[b]
               if (s[b, "dense"] > 0 && s[b, "diagonal"] > 0)
                 printf "%s %s full card: steady-state img/s diagonal / dense %.2fx (%s vs %s)\n", b, px[b], s[b, "diagonal"] / s[b, "dense"], s[b, "diagonal"], s[b, "dense"] } }' "$1"
}
