#!/usr/bin/env bash
# One archive for an A/B whose two bundles together pass the run tool's 64 MiB:
#   bash bench/gpu/pair_bundles.sh CAND BASE   # .gpubundle/CAND.tar.xz and BASE.tar.xz (make_bundle.sh)
# writes .gpubundle/pair-CAND.tar.xz: CAND/{bin,lib,rev.txt} whole and BASE/{bin/argen_bench,rev.txt}
# (an A/B scenario runs the baseline's argen_bench only, with the candidate's lib/). The two
# argen_bench binaries go first, so that xz's window (256 MiB) holds both; a candidate with kernel
# tests and a baseline took ~51 MB paired where the two bundles took ~70. On the device, unpack it
# where bench/gpu/bundle_env.sh's use_bundle looks, then run the lab as usual:
#   xz -dc .gpubundle/pair-CAND.tar.xz | tar -xf - -C /tmp && BUNDLE=CAND BASE_BUNDLE=BASE bash bench/gpu/lab.sh ...
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash bench/gpu/pair_bundles.sh CAND BASE" >&2; exit 2; }
cand=$1 base=$2
cd "$(dirname "$0")/../.."
for b in "$cand" "$base"; do
  [ -f ".gpubundle/$b.tar.xz" ] || { echo "pair_bundles: no .gpubundle/$b.tar.xz (bench/gpu/make_bundle.sh $b)" >&2; exit 1; }
done
[ "$cand" != "$base" ] || { echo "pair_bundles: the candidate and the baseline are the same bundle" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/$cand" "$work/$base/bin" "$work/base-full"
xz -dc ".gpubundle/$cand.tar.xz" | tar -xf - -C "$work/$cand"
xz -dc ".gpubundle/$base.tar.xz" | tar -xf - -C "$work/base-full"
[ -x "$work/base-full/bin/argen_bench" ] || { echo "pair_bundles: $base has no bin/argen_bench" >&2; exit 1; }
cp "$work/base-full/bin/argen_bench" "$work/$base/bin/"
cp "$work/base-full/rev.txt" "$work/$base/" 2>/dev/null || true
out=".gpubundle/pair-$cand.tar.xz"
# (the candidate's argen_bench is listed twice: the second copy costs xz next to nothing)
(cd "$work" && tar -cf - "$cand/bin/argen_bench" "$base" "$cand") |
  xz -T1 --lzma2=preset=9,dict=256MiB >"$out"
echo "$out: $(du -h "$out" | cut -f1) ($cand with $base's argen_bench)"
