#!/usr/bin/env bash
# The README's quick start, run as written (issue 34, item 8): the server line
# of "Using it" with the shipped config, then every argen_client and
# argen_generate line of that block and the curl lines of the HTTP block, each
# as printed, checking that it exits 0 and makes what it says.
#
# Two things differ from a user's run, so that CI stays quick and isolated:
# everything runs in a scratch folder where build/ and configs/ are the
# repository's and models/argen-scenes-v1 is the tiny checkpoint
# (tests/goldens/tiny/tiny-mha: noise images in milliseconds, the same Janus
# layout), so the server (with the shipped config, every setting its own) and
# argen_generate run as printed but fast; and the server listens on free
# loopback ports (the client lines reach it through ARGEN_SERVER, the curl
# lines have localhost:8080 replaced). grpcurl lines run where grpcurl is
# installed (Debian 12 does not package it).
#
# usage: readme_quickstart_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
SRC=${1:?source dir}
BUILD=${2:?build dir}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/argen-readme.XXXXXX")
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "readme_quickstart_test: $*" >&2
  exit 1
}

# The fenced block after the first line matching $1: its commands, with
# continuation lines joined and trailing "# comments" removed.
block_after() {
  awk -v start="$1" '
    index($0, start) == 1 { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' "$SRC/README.md" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | sed -E 's/[[:space:]]+#[[:space:]].*$//'
}

USING=$(block_after "## Using it")
HTTP=$(block_after "The HTTP API (")
[ -n "$USING" ] || fail "no code block after '## Using it' in README.md"
[ -n "$HTTP" ] || fail "no code block after 'The HTTP API (' in README.md"

cd "$WORK" || exit 2
ln -s "$BUILD" build
ln -s "$SRC/configs" configs
mkdir models
ln -s "$SRC/tests/goldens/tiny/tiny-mha" models/argen-scenes-v1

server_line=$(grep -E '^build/server/argen_server ' <<<"$USING" | head -1)
[ -n "$server_line" ] || fail "the 'Using it' block starts no argen_server"
grep -q -- '--http_port 8080' <<<"$server_line" || fail "the server line does not turn the HTTP API on: $server_line"
# Free loopback ports instead of 8080 / 50051 / 9464.
server_cmd="${server_line/--http_port 8080/--http_port 0} --listen_address 127.0.0.1 --port 0 --http_address 127.0.0.1"
server_cmd+=" --metrics_port -1"
echo "+ $server_cmd"
eval "exec $server_cmd" 2>"$WORK/server.log" &
SERVER_PID=$!
port="" http_port=""
for _ in $(seq 1 600); do
  if [[ $(cat "$WORK/server.log") =~ serving\ gRPC\ on\ [0-9.]+:([0-9]+),\ HTTP\ API\ on\ [0-9.]+:([0-9]+) ]]; then
    port=${BASH_REMATCH[1]}
    http_port=${BASH_REMATCH[2]}
    break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || fail "argen_server did not start: $(cat "$WORK/server.log")"
export ARGEN_SERVER="127.0.0.1:$port"

ran=0
while IFS= read -r line; do
  case "$line" in
    build/client/argen_client* | build/tools/generate/argen_generate*) ;;
    *) continue ;;
  esac
  echo "+ $line"
  if ! eval "$line" >"$WORK/out.txt" 2>&1; then
    cat "$WORK/out.txt" >&2
    fail "failed: $line"
  fi
  ran=$((ran + 1))
done <<<"$USING"
[ "$ran" -ge 4 ] || fail "only $ran client lines in 'Using it'"
# What the lines say they make.
[ "$(ls out/*.png 2>/dev/null | wc -l)" -eq 4 ] || fail "generate --count 4 --out out/ made: $(ls out 2>&1)"
[ -s stars.png ] || fail "generate -o stars.png made no stars.png"
[ -s sq.png ] || fail "argen_generate --out sq.png made no sq.png"

while IFS= read -r line; do
  case "$line" in
    curl*) line=${line//localhost:8080/127.0.0.1:$http_port} ;;
    grpcurl*)
      command -v grpcurl >/dev/null || { echo "(grpcurl not installed: skipped) $line"; continue; }
      line=${line//localhost:50051/127.0.0.1:$port}
      ;;
    *) continue ;;
  esac
  echo "+ $line"
  eval "$line" >"$WORK/out.txt" 2>&1 || fail "failed: $line: $(head -c 2000 "$WORK/out.txt")"
  case "$line" in
    *'"stream": true'*)
      grep -q 'event: image_generation.completed' "$WORK/out.txt" ||
        fail "no completed event from: $line: $(head -c 2000 "$WORK/out.txt")"
      ;;
    curl*)
      grep -q '"b64_json"' "$WORK/out.txt" || fail "no image from: $line: $(head -c 2000 "$WORK/out.txt")"
      ;;
  esac
done <<<"$HTTP"

kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
rc=$?
SERVER_PID=""
[ "$rc" -eq 0 ] || fail "argen_server exited $rc after SIGTERM"
echo "readme_quickstart_test: the README's quick start ran as written"
