#!/usr/bin/env bash
# Soak: argen_server (the CPU tiny model by default) under argen_soak's mixed
# workload, then SIGTERM. Passes when argen_soak saw only expected outcomes,
# RSS stayed flat after warm-up, every in-flight gauge came back to 0, the
# server drained and exited 0, and its log has no sanitizer report (run it
# with the ASan/LSan build of scripts/sanitize.sh: --build-dir build-asan).
# Writes server.log, soak.log, rss.csv (and rss.png when matplotlib exists)
# to --out. docs/reliability.md has the documented runs.
#
#   tests/soak/soak.sh --build-dir build-asan --requests 10000 --out /tmp/soak
#   tests/soak/soak.sh --backend cuda --requests 10000 --out $OUT   # device
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=build
OUT=/tmp/argen_soak
REQUESTS=10000
CONCURRENCY=4
BACKEND=cpu
MODEL=tests/goldens/tiny/tiny-mha
MAX_RSS_GROWTH_MIB=16
SEED=1
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --requests) REQUESTS=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --backend) BACKEND=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --max-rss-growth-mib) MAX_RSS_GROWTH_MIB=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
SERVER_BIN=${SERVER_BIN:-$BUILD/server/argen_server}
SOAK_BIN=${SOAK_BIN:-$BUILD/tests/soak/argen_soak}
mkdir -p "$OUT"
# A smaller ASan quarantine lets RSS settle within the warm-up.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:quarantine_size_mb=${SOAK_ASAN_QUARANTINE_MB:-32}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

threads=1
gpu_cmd=()
if [ "$BACKEND" = cuda ]; then
  threads=0
  gpu_cmd=(--gpu_memory_cmd "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0")
fi
"$SERVER_BIN" --config "$ROOT/configs/argen.yaml" --model_dir "$MODEL" --backend="$BACKEND" \
  --listen_address=127.0.0.1 --port=0 --metrics_address=127.0.0.1 --metrics_port=0 --threads=$threads \
  "${EXTRA[@]}" 2>"$OUT/server.log" &
pid=$!
port="" mport=""
for _ in $(seq 1 1200); do
  line=$(grep -m1 "serving gRPC on" "$OUT/server.log" 2>/dev/null || true)
  if [ -n "$line" ]; then
    port=$(echo "$line" | sed -E 's/.*serving gRPC on [^ ,]*:([0-9]+).*/\1/')
    mport=$(echo "$line" | sed -E 's/.*\/metrics on [^ ,]*:([0-9]+).*/\1/')
    break
  fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "soak.sh: the server did not start:" >&2
  cat "$OUT/server.log" >&2
  kill -KILL $pid 2>/dev/null
  exit 1
fi

"$SOAK_BIN" --server 127.0.0.1:$port --metrics 127.0.0.1:$mport --pid $pid --requests "$REQUESTS" \
  --concurrency "$CONCURRENCY" --seed "$SEED" --csv "$OUT/rss.csv" --max_rss_growth_mib "$MAX_RSS_GROWTH_MIB" \
  "${gpu_cmd[@]}" | tee "$OUT/soak.log"
soak_rc=${PIPESTATUS[0]}

kill -TERM $pid
wait $pid
server_rc=$?
failed=0
if [ $soak_rc -ne 0 ]; then echo "soak.sh: FAIL: argen_soak exited $soak_rc"; failed=1; fi
if [ $server_rc -ne 0 ]; then echo "soak.sh: FAIL: argen_server exited $server_rc (a leak report exits 23)"; failed=1; fi
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$OUT/server.log"; then
  echo "soak.sh: FAIL: sanitizer report in $OUT/server.log:"
  grep -E -A20 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$OUT/server.log" | head -60
  failed=1
fi
grep -q "drained, exiting" "$OUT/server.log" || { echo "soak.sh: FAIL: no clean drain in server.log"; failed=1; }
for py in "$ROOT/.venv/bin/python" /usr/bin/python3 python3; do
  if "$py" -c "import matplotlib" 2>/dev/null; then
    "$py" "$ROOT/tests/soak/plot_rss.py" "$OUT/rss.csv" "$OUT/rss.png" || echo "soak.sh: no plot"
    break
  fi
done
echo "soak.sh: requests $REQUESTS, backend $BACKEND, server exit $server_rc, out $OUT: $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
exit $failed
