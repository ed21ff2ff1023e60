#!/usr/bin/env bash
# Replays deploy/Dockerfile.cpu's runtime stage without a Docker engine, to show
# that its package list and user are enough for the binaries to run:
#   1. debootstrap --variant=minbase bookworm (what debian:bookworm-slim is
#      built from), cached as a tarball under the deploy tools folder;
#   2. the build stage's /out steps (strip + copy binaries, world-readable
#      model and config) replayed from the repository with built binaries;
#   3. the runtime stage's RUN instructions executed verbatim in a chroot and
#      its COPY --from=build lines applied;
#   4. argen_server started in the chroot as uid 10001 with the image's CMD
#      (loopback ports instead of 0.0.0.0), the image's HEALTHCHECK command run
#      in the chroot must print SERVING, one image generated, SIGTERM exits 0.
# Needs root, debootstrap and Debian's mirror (a minute or two), so it is not
# part of deploy/check.sh; run it after changing the runtime stage.
# usage: deploy/checks/runtime-rootfs.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=$(realpath "${1:-build}")
TOOLS=${ARGEN_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/argen-deploy-check}
PY="$TOOLS/venv/bin/python"
[ -x "$PY" ] || { echo "run deploy/check.sh once first (it installs $PY)"; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (chroot)"; exit 2; }
[ -x "$BUILD_DIR/server/argen_server" ] || { echo "$BUILD_DIR/server/argen_server not built"; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap

WORK=$(mktemp -d "${TMPDIR:-/tmp}/argen-rootfs.XXXXXX")
ROOTFS="$WORK/rootfs"
OUT="$WORK/out"
SERVER_PID=""
cleanup() {
  [ -z "$SERVER_PID" ] || kill -KILL "$SERVER_PID" 2>/dev/null || true
  umount "$ROOTFS/proc" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export ROOTFS OUT BUILD_DIR

tarball="$TOOLS/bookworm-minbase.tar"
if ! [ -s "$tarball" ]; then
  echo "debootstrap --variant=minbase bookworm (once; cached in $tarball)"
  debootstrap --variant=minbase bookworm "$WORK/base" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log"; exit 1; }
  tar -C "$WORK/base" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$WORK/base"
fi
mkdir -p "$ROOTFS" "$OUT"
tar -C "$ROOTFS" -xf "$tarball"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"

echo "== build stage /out steps (deploy/Dockerfile.cpu)"
"$PY" deploy/checks/deploy_checks.py build-out-script Dockerfile.cpu >"$WORK/build-out.sh"
bash "$WORK/build-out.sh"
echo "== runtime stage (deploy/Dockerfile.cpu) in a chroot"
"$PY" deploy/checks/deploy_checks.py runtime-script Dockerfile.cpu >"$WORK/runtime.sh"
bash "$WORK/runtime.sh" >"$WORK/runtime.log" 2>&1 || { tail -30 "$WORK/runtime.log"; echo "runtime stage failed"; exit 1; }
grep -E '^\+ RUN' "$WORK/runtime.log"
mount -t proc proc "$ROOTFS/proc"

passed=0
failed=0
result() { if [ "$1" = 0 ]; then passed=$((passed + 1)); echo "PASS  $2"; else failed=$((failed + 1)); echo "FAIL  $2"; fi; }

missing=$(chroot "$ROOTFS" ldd /usr/local/bin/argen_server /usr/local/bin/argen_client | grep -c 'not found' || true)
result "$([ "$missing" = 0 ] && echo 0 || echo 1)" "every shared library of both binaries resolves in the runtime rootfs ($missing missing)"

# The image's CMD, with loopback addresses and free ports.
mapfile -t cmd < <("$PY" - <<'EOF'
import json, re, sys
sys.path.insert(0, "deploy/checks")
import deploy_checks as dc
stages, _ = dc.parse_dockerfile("deploy/Dockerfile.cpu")
rt = stages[-1]["instr"]
print("\n".join(json.loads([r for i, r in rt if i == "ENTRYPOINT"][-1]) + json.loads([r for i, r in rt if i == "CMD"][-1])))
EOF
)
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mport=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cmd=("${cmd[@]//0.0.0.0/127.0.0.1}")
cmd=("${cmd[@]/--port=50051/--port=$port}")
cmd=("${cmd[@]/--metrics_port=9464/--metrics_port=$mport}")
echo "== chroot --userspec=10001:10001 ${cmd[*]}"
chroot --userspec=10001:10001 "$ROOTFS" "${cmd[@]}" --threads=1 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

"$PY" deploy/checks/deploy_checks.py dockerfiles --healthcheck-out "$WORK/hc" >/dev/null || true
mapfile -t hc <"$WORK/hc"
hc=("${hc[@]//127.0.0.1:50051/127.0.0.1:$port}")
status=1
for _ in $(seq 1 60); do
  if [ "$(chroot --userspec=10001:10001 "$ROOTFS" "${hc[@]}" 2>/dev/null)" = SERVING ]; then status=0; break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.5
done
[ "$status" = 0 ] || cat "$WORK/server.log"
result "$status" "HEALTHCHECK (${hc[*]}) prints SERVING as uid 10001"

chroot --userspec=10001:10001 "$ROOTFS" /usr/local/bin/argen_client --server="127.0.0.1:$port" \
  generate --prompt "a red circle" --count 1 --out /tmp/images --quiet >"$WORK/generate.log" 2>&1 ||
  cat "$WORK/generate.log"
pngs=$(find "$ROOTFS/tmp/images" -name '*.png' 2>/dev/null | wc -l)
result "$([ "$pngs" = 1 ] && echo 0 || echo 1)" "generate in the runtime rootfs wrote $pngs PNG"
curl -fsS "http://127.0.0.1:$mport/metrics" >"$WORK/scrape.txt" || true
status=0
grep -q '^argen_images_total 1' "$WORK/scrape.txt" || status=1
result "$status" "/metrics counts the image"

kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
result "$rc" "SIGTERM: drained and exited $rc"
tail -n 4 "$WORK/server.log"
du -sh --exclude=proc "$ROOTFS" | sed 's/^/runtime rootfs size: /'
echo "runtime-rootfs: $passed passed, $failed failed"
[ "$failed" = 0 ]
