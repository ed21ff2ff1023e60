#!/usr/bin/env bash
# The one-command demo: installs dependencies, builds, starts argen_server on
# the default model, waits until it is healthy, generates an image into out/,
# generates one through the OpenAI-compatible HTTP API with curl, runs a
# short load test, and stops the server cleanly (SIGTERM -> drain -> 0).
#
# Knobs (environment): MODEL_DIR (default: configs/argen.yaml's model_dir, else
# a model under models/, else the tiny test checkpoint), PORT (50051),
# METRICS_PORT (9464), HTTP_PORT (8080), BUILD_DIR (build), SKIP_BUILD=1 (reuse an existing
# build), PROMPT, LOAD_REQUESTS (8), LOAD_CONCURRENCY (4), HEALTH_TIMEOUT_S (600).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PORT=${PORT:-50051}
METRICS_PORT=${METRICS_PORT:-9464}
HTTP_PORT=${HTTP_PORT:-8080}
PROMPT=${PROMPT:-"a red circle above a blue square"}
LOAD_REQUESTS=${LOAD_REQUESTS:-8}
LOAD_CONCURRENCY=${LOAD_CONCURRENCY:-4}
HEALTH_TIMEOUT_S=${HEALTH_TIMEOUT_S:-600}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  scripts/install-deps.sh
  BUILD_DIR="$BUILD_DIR" scripts/build.sh
fi
SERVER="$BUILD_DIR/server/argen_server"
CLIENT="$BUILD_DIR/client/argen_client"
for bin in "$SERVER" "$CLIENT"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing; build first (scripts/build.sh)" >&2; exit 1; }
done

# The default model: configs/argen.yaml's model_dir, else any checkpoint under
# models/; if none is there, the tiny random-weight test checkpoint.
if [ -z "${MODEL_DIR:-}" ]; then
  configured=$(sed -n 's/^model_dir:[[:space:]]*\([^[:space:]#]*\).*/\1/p' configs/argen.yaml)
  if [ -n "$configured" ] && [ -f "$configured/config.json" ]; then MODEL_DIR=$configured; fi
fi
if [ -z "${MODEL_DIR:-}" ]; then
  for candidate in models/*/; do
    if [ -f "$candidate/config.json" ]; then MODEL_DIR=${candidate%/}; break; fi
  done
fi
if [ -z "${MODEL_DIR:-}" ]; then
  MODEL_DIR=tests/goldens/tiny/tiny-mha
  echo "demo: no model found (configs/argen.yaml model_dir, models/); using the tiny test checkpoint $MODEL_DIR" \
       "(random weights: the image is noise, every code path still runs)"
fi

mkdir -p out
LOG=out/argen_server.log
echo "demo: starting argen_server on $MODEL_DIR (gRPC :$PORT, HTTP :$HTTP_PORT, /metrics :$METRICS_PORT; log $LOG)"
"$SERVER" --config configs/argen.yaml --model_dir "$MODEL_DIR" --port "$PORT" \
  --metrics_port "$METRICS_PORT" --http_port "$HTTP_PORT" >"$LOG" 2>&1 &
SERVER_PID=$!
stop_server() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"
    local rc=0
    wait "$SERVER_PID" || rc=$?
    echo "demo: argen_server stopped (exit code $rc)"
  fi
}
trap stop_server EXIT

echo -n "demo: waiting for the server to be healthy"
deadline=$((SECONDS + HEALTH_TIMEOUT_S))
until "$CLIENT" --server "localhost:$PORT" health >/dev/null 2>&1; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo; echo "demo: argen_server exited during startup:" >&2; cat "$LOG" >&2; exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo; echo "demo: not healthy after ${HEALTH_TIMEOUT_S}s" >&2; cat "$LOG" >&2; exit 1
  fi
  echo -n "."; sleep 1
done
echo " SERVING"

"$CLIENT" --server "localhost:$PORT" info
echo "demo: generating \"$PROMPT\""
"$CLIENT" --server "localhost:$PORT" generate --prompt "$PROMPT" --count 1 --seed 1 \
  --request_id demo --out out --overwrite   # the demo's own file, replaced on every run
if command -v curl >/dev/null && command -v python3 >/dev/null; then
  echo "demo: the same through the OpenAI-compatible HTTP API:"
  echo "  curl -s http://localhost:$HTTP_PORT/v1/images/generations -H 'Content-Type: application/json' \\"
  echo "    -d '{\"prompt\": \"$PROMPT\", \"n\": 1, \"seed\": 1, \"response_format\": \"b64_json\"}'"
  curl -sS --fail-with-body "http://localhost:$HTTP_PORT/v1/images/generations" -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"$PROMPT\", \"n\": 1, \"seed\": 1, \"response_format\": \"b64_json\"}" >out/demo_http.json
  python3 -c 'import base64, json, sys; d = json.load(open("out/demo_http.json")); open("out/demo_http_0.png", "wb").write(base64.b64decode(d["data"][0]["b64_json"])); print("demo: HTTP API wrote out/demo_http_0.png (seed", d["argen"]["seed"], "- the same image as out/demo_0.png)")'
fi
echo "demo: load test ($LOAD_REQUESTS requests, concurrency $LOAD_CONCURRENCY, dense vs diagonal)"
"$CLIENT" --server "localhost:$PORT" load --requests "$LOAD_REQUESTS" \
  --concurrency "$LOAD_CONCURRENCY" --policies dense,diagonal:0.9
if command -v curl >/dev/null; then
  echo "demo: a few Prometheus metrics from http://localhost:$METRICS_PORT/metrics"
  curl -s "http://localhost:$METRICS_PORT/metrics" | grep -E '^argen_(requests_total|images_total|tokens_total|kv_cache_budget_bytes|build_info)' || true
fi
echo "demo: done; the images are out/demo_0.png (gRPC) and out/demo_http_0.png (HTTP)"
