#!/usr/bin/env bash
# Builds (here) what the device scenarios run and packs it for the device:
#   bench/gpu/make_bundle.sh NAME [REV]
# builds what the lab's scenarios run (argen_bench, argen_server,
# argen_client, argen_vq_bench, argen_emu3vq_bench, argen_sweep, argen_soak, argen_convert) and
# every gpu-labelled test of REV (default: the work tree; a commit is built in
# a temporary worktree, ccache shared) and writes .gpubundle/NAME.tar.xz
# (bin/, their non-CUDA libraries in lib/ (/work/shared/tools/gpu-bundle.sh,
# or GPU_BUNDLE), and rev.txt: the revision, which lab.sh records).
# BUNDLE_TARGETS overrides the target list (e.g. argen_bench alone for a
# small baseline bundle: a device call carries 64 MiB in all). BUILD_DIR (default
# build/) and CMAKE_ARGS configure another tree, e.g. for the profile scenario's
# source lines: BUILD_DIR=build-lineinfo CMAKE_ARGS=-DARGEN_CUDA_LINEINFO=ON
# BUNDLE_TARGETS=argen_bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
name=${1:?usage: make_bundle.sh NAME [REV]}
rev=${2:-}
src=$root
if [ -n "$rev" ]; then
  src=/tmp/argen-bundle-src-$name
  [ -d "$src" ] || git worktree add -q --detach "$src" "$rev"
fi
build=${BUILD_DIR:-$src/build}
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of -D flags
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
# The gpu-labelled tests' executables, as configure wrote them (CMakeLists.txt's argen_test).
gpu_tests=$(sort -u "$build/gpu_tests.txt" | tr '\n' ' ')
targets=${BUNDLE_TARGETS:-argen_bench argen_server argen_client argen_vq_bench argen_emu3vq_bench argen_sweep argen_soak argen_convert $gpu_tests}
# shellcheck disable=SC2086
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target $targets
bins=()
for t in $targets; do
  # The newest: a build tree may keep a stale copy from a target's old folder.
  f=$(find "$build" -type f -perm -u+x -name "$t" -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
  [ -n "$f" ] && bins+=("$f")
done
# The SentencePiece module (LlamaGen t2i's tokenizer, loaded at run time, not linked): beside the binaries,
# where the loader looks first, with its own libraries in lib/.
module=$(find "$build" -type f -name libargen_sentencepiece.so | head -1)
[ -n "$module" ] && bins+=("$module")
tmp=$(mktemp -d)
bundler=${GPU_BUNDLE:-$root/../shared/tools/gpu-bundle.sh}
bash "$bundler" "$tmp" "${bins[@]}" >/dev/null
mkdir -p "$root/.gpubundle"
strip "$tmp"/bin/*
if [ -n "$rev" ]; then git -C "$src" rev-parse --short HEAD; else git -C "$src" describe --always --dirty; fi >"$tmp/rev.txt"
# One xz stream with a 64 MiB window: the test binaries share most of their
# bytes (the kernels), which it stores once (64 MiB is all a call may carry).
tar -C "$tmp" -cf - bin lib rev.txt | xz -9 -T1 >"$root/.gpubundle/$name.tar.xz"
rm -rf "$tmp"
echo "$root/.gpubundle/$name.tar.xz: ${#bins[@]} binaries, $(du -h "$root/.gpubundle/$name.tar.xz" | cut -f1)"
