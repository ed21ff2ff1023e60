# Janus-Pro-7B in the published .bin layout (written by the device's torch.save) served with no conversion, then
# argen_convert to safetensors and served again: start-to-healthy times, one generate, a short load.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="the same weights as safetensors after argen_convert, same call (the .bin / safetensors start-time ratio)"
NEEDS="argen_server argen_client argen_convert"
run_scenario() {
  local bin_dir=$LAB_WORK/Janus-Pro-7B-bin st_dir=$LAB_WORK/Janus-Pro-7B-bin-safetensors log=$OUT/torch-checkpoint_server.log
  local s load_bin=-
  stamp "torch.save, published .bin layout"
  checkpoint_start "$bin_dir" bin
  checkpoint_wait "$bin_dir" >/dev/null || { echo "no checkpoint"; cat "$bin_dir.log"; return 1; }
  ls -l "$bin_dir"
  if server_start "$log" 50071 --model_dir="$bin_dir"; then
    load_bin=$SERVER_READY_S
    echo "served .bin: healthy after $load_bin s"
    guarded 300 "$BIN/argen_client" --server localhost:50071 generate --prompt "a photo of a red circle above a blue square" \
      --count 2 --seed 3 --out "$LAB_WORK/png"
    echo "generate rc=$? ($(find "$LAB_WORK/png" -name "*.png" 2>/dev/null | wc -l) PNGs)"
    guarded 300 "$BIN/argen_client" --server localhost:50071 load --requests 32 --concurrency 16 --policies dense,diagonal:0.9
    echo "load rc=$?"
    server_stop
  else
    echo "served .bin: not healthy"
  fi
  stamp argen_convert
  s=$(date +%s)
  guarded 400 "$BIN/argen_convert" --in "$bin_dir" --out "$st_dir"
  echo "argen_convert rc=$? in $(($(date +%s) - s)) s"
  rm -rf "$bin_dir"  # the disk: one copy at a time
  if server_start "$log" 50072 --model_dir="$st_dir"; then
    echo "served safetensors: healthy after $SERVER_READY_S s; .bin / safetensors start time" \
      "$(awk -v a="$load_bin" -v b="$SERVER_READY_S" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
    server_stop
  else
    echo "served safetensors: not healthy"
  fi
  rm -rf "$st_dir"
}
summarize() { grep -h -E "^== |^served |rc=|^no checkpoint" "$1" | cut -c1-200; }
