#!/usr/bin/env bash
# The diagonal policy's recent window N_r against quality (docs/quality.md, "N_r study"), on a lent
# GPU: for each N_r, argen_sweep --policies diagonal at 90/95/96% on the full benchmark (paired with
# the full sweep: same prompts, seeds and cfg), scored by report.py. Writes $OUT/nr_study.md (one
# overall table) and $OUT/nr_study.log. NR_SPARSITIES (percent, 3 values) and NR_TAG (file names)
# change the grid and the output names.
#   ARGEN_BIN=/tmp/b/bin ARGEN_SOURCE_DIR=$PWD tools/sweep/device_nr_study.sh [N_r ...]
set -uo pipefail
bin="${ARGEN_BIN:-/tmp/b/bin}"
out="${OUT:-$PWD/device-out}"
python="${ARGEN_PYTHON:-python3}"
values=("$@")
[[ ${#values[@]} -gt 0 ]] || values=(64 96 144 192 432)
sparsities="${NR_SPARSITIES:-90,95,96}"
tag="${NR_TAG:-nr_study}"
work="/tmp/argen-nr-study/$tag"
mkdir -p "$out" "$work"
log="$out/$tag.log"
table="$out/$tag.md"
{
  echo "| N_r | ${sparsities//,/% | }% |"
  sep="|---:|"; for _ in ${sparsities//,/ }; do sep+="---:|"; done; echo "$sep"
} >"$table"
for nr in "${values[@]}"; do
  dir="$work/nr$nr"
  echo "== N_r $nr" >>"$log"
  if ! "$bin/argen_sweep" --model models/argen-scenes-v1 --backend cuda --out "$dir" --policies diagonal \
       --sparsities "$sparsities" --cfg 3 --n-recent "$nr" --max-batch-rows 1024 >>"$log" 2>&1; then
    echo "| $nr | failed | | |" >>"$table"; continue
  fi
  "$python" tools/sweep/report.py "$dir" --workers "$(nproc)" --no-plot >>"$log" 2>&1 || {
    echo "| $nr | report failed | | |" >>"$table"; continue; }
  # The overall table's diagonal row: | diagonal | - | <90> | <95> | <96> |
  row=$(awk '/^## Overall/{o=1} o && /^\| diagonal \|/{print; exit}' "$dir/report.md")
  echo "$row" | awk -F'|' -v nr="$nr" '{printf "| %s |", nr; for (i = 3; i < NF; i++) printf "%s|", $i; print ""}' >>"$table"
  cp "$dir/report.md" "$work/report_nr$nr.md"
done
tar -czf "$out/${tag}_reports.tgz" -C "$work" $(cd "$work" && ls report_nr*.md 2>/dev/null)
cat "$table"
