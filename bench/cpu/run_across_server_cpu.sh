#!/usr/bin/env bash
# Prompt-KV sharing across requests through the server on the CPU: the shipped
# model (models/argen-scenes-v1), argen_server --backend cpu with
# share_prompt_kv_across_requests false then true, each under the same
# argen_client load (48 distinct captions, bench/cpu/captions_48.txt, cycled;
# closed loop). Prints the load summaries and, per run, the peak of
# argen_kv_cache_used_bytes / argen_kv_cache_shared_prompt_bytes sampled from
# /metrics. Usage: bench/cpu/run_across_server_cpu.sh [requests] [concurrency]
set -u
cd "$(dirname "$0")/../.."
REQUESTS=${1:-32} CONCURRENCY=${2:-16}
BUILD_DIR=${BUILD_DIR:-build}
SERVER=$BUILD_DIR/server/argen_server CLIENT=$BUILD_DIR/client/argen_client
OUT=${OUT:-out/across-cpu}
mkdir -p "$OUT"
port=50171 metrics=50172
for across in false true; do
  log=$OUT/server_$across.log
  "$SERVER" --config configs/argen.yaml --model_dir models/argen-scenes-v1 --backend cpu --port $port \
    --metrics_port $metrics --http_port -1 --share_prompt_kv_across_requests=$across >"$log" 2>&1 &
  sp=$!
  for _ in $(seq 120); do "$CLIENT" --server localhost:$port health >/dev/null 2>&1 && break; sleep 0.5; done
  ( peak_used=0 peak_shared=0
    while kill -0 $sp 2>/dev/null; do
      scrape=$(curl -s localhost:$metrics/metrics)
      used=$(awk '/^argen_kv_cache_used_bytes /{printf "%d", $2}' <<<"$scrape")
      shared=$(awk '/^argen_kv_cache_shared_prompt_bytes /{printf "%d", $2}' <<<"$scrape")
      [ "${used:-0}" -gt "$peak_used" ] && peak_used=$used
      [ "${shared:-0}" -gt "$peak_shared" ] && peak_shared=$shared
      echo "$peak_used $peak_shared" >"$OUT/peak_$across.txt"
      sleep 0.2
    done ) &
  watcher=$!
  echo "== share_prompt_kv_across_requests: $across"
  "$CLIENT" --server localhost:$port load --requests "$REQUESTS" --concurrency "$CONCURRENCY" \
    --prompts-file bench/cpu/captions_48.txt --seed 1 2>/dev/null | tee "$OUT/load_$across.txt"
  kill -TERM $sp; wait $sp 2>/dev/null; wait $watcher 2>/dev/null
  read -r used shared <"$OUT/peak_$across.txt"
  echo "peak KV in use $((used / 1000000)) MB, of it shared prompts $((shared / 1000)) kB"
done
