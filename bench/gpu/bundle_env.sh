# shellcheck shell=bash disable=SC2034  # BIN is for the scripts that source this
# Sourced by bench/gpu/lab.sh (run from the repository root): `use_bundle
# NAME` unpacks .gpubundle/NAME.tar.xz (bin/, lib/ and rev.txt, made by
# bench/gpu/make_bundle.sh) into /tmp/NAME unless it is there already, and
# sets BIN (its bin/), LD_LIBRARY_PATH (its lib/ and the toolkit's),
# ARGEN_SOURCE_DIR (this tree) and OUT (default /tmp/out, created).
use_bundle() {
  local dir=/tmp/$1
  if [ ! -d "$dir/bin" ]; then
    mkdir -p "$dir" && xz -dc ".gpubundle/$1.tar.xz" | tar -xf - -C "$dir" || return 1
  fi
  BIN=$dir/bin
  export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
  export ARGEN_SOURCE_DIR=$PWD
  OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT"
}
