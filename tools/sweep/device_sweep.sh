#!/usr/bin/env bash
# The full quality sweep on a lent GPU machine, as one command that fits a
# time-limited device call: argen_sweep --backend cuda (with a deadline, so it
# stops cleanly and still leaves time to score), then report.py, then the
# compact results in $OUT (a later call starts on a fresh machine: the PNGs are
# not kept, the per-image verdicts are).
#
#   ARGEN_BIN=/tmp/b/bin ARGEN_SOURCE_DIR=$PWD tools/sweep/device_sweep.sh [options] [-- argen_sweep options]
#
# Options (defaults in brackets):
#   --shard i/n            this call's part of the grid: prompts whose line % n == i [0/1: all]
#   --continue-from FILE   a report.json(.gz) of an earlier call of the same part: its complete
#                          (config, prompt) pairs are skipped (argen_sweep --exclude), and the
#                          merged report (earlier + this call) goes to $OUT/merged/
#   --max-batch-rows R     rows decoded at once, 2 per image [1024]
#   --time-limit S         seconds this script may take in all [540]
#   --report-reserve S     seconds kept for scoring after generation stops [90]
#   --report-workers N     scorer processes [nproc]
#   --image-threads N      PNG writer threads [argen_sweep's default: nproc - 1]
#   --work DIR             images and manifest (large; not copied to $OUT) [/tmp/argen-sweep-work]
#   --model DIR            [models/argen-scenes-v1]
# Environment: ARGEN_BIN [/tmp/b/bin], OUT, ARGEN_PYTHON [python3, or the repo's .venv],
# ARGEN_SWEEP_BACKEND [cuda; the test runs it on cpu].
# Writes to $OUT (or ./device-out): report.md, report.json (report.json.gz when over 16 MB),
# quality_vs_sparsity.png, sweep.log, report.log, sweep_settings.json, status.txt (one line:
# "complete" or "partial: N requests left"). Exit 0 when both steps ran (also for a partial
# run), 1 when one failed, 2 for usage errors. Merge several calls' outputs with
#   python3 tools/sweep/report.py MERGED --merge A/report.json B/report.json.gz
set -uo pipefail

start=$SECONDS
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${ARGEN_BIN:-/tmp/b/bin}"
out="${OUT:-$PWD/device-out}"
shard="0/1"
continue_from=""
rows=1024
time_limit=540
reserve=90
workers="$(nproc)"
image_threads=""
work="/tmp/argen-sweep-work"
model="$root/models/argen-scenes-v1"
extra=()

usage() { sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
need() { if [[ $# -lt 2 ]]; then echo "device_sweep.sh: $1 needs a value" >&2; exit 2; fi; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shard) need "$@"; shard="$2"; shift 2 ;;
    --continue-from) need "$@"; continue_from="$2"; shift 2 ;;
    --max-batch-rows) need "$@"; rows="$2"; shift 2 ;;
    --time-limit) need "$@"; time_limit="$2"; shift 2 ;;
    --report-reserve) need "$@"; reserve="$2"; shift 2 ;;
    --report-workers) need "$@"; workers="$2"; shift 2 ;;
    --image-threads) need "$@"; image_threads="$2"; shift 2 ;;
    --work) need "$@"; work="$2"; shift 2 ;;
    --model) need "$@"; model="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra+=("$@"); break ;;
    *) echo "device_sweep.sh: unknown option $1 (argen_sweep options go after --)" >&2; exit 2 ;;
  esac
done
for v in rows time_limit reserve workers; do
  if ! [[ "${!v}" =~ ^[0-9]+$ ]]; then echo "device_sweep.sh: $v must be a whole number, got ${!v}" >&2; exit 2; fi
done
sweep_bin="$bin/argen_sweep"
if [[ ! -x "$sweep_bin" ]]; then
  echo "device_sweep.sh: $sweep_bin not found (set ARGEN_BIN to the bundle's bin folder)" >&2
  exit 2
fi
python="${ARGEN_PYTHON:-python3}"
if [[ -x "$root/.venv/bin/python" && -z "${ARGEN_PYTHON:-}" ]]; then python="$root/.venv/bin/python"; fi
if ! "$python" -c "import numpy, PIL, matplotlib" 2>/dev/null; then
  echo "device_sweep.sh: $python lacks numpy, pillow or matplotlib (set ARGEN_PYTHON)" >&2
  exit 2
fi
if [[ -n "$continue_from" && ! -f "$continue_from" ]]; then
  echo "device_sweep.sh: --continue-from $continue_from not found" >&2
  exit 2
fi
mkdir -p "$out" "$work"
log() { echo "device_sweep: [$((SECONDS - start)) s] $*" | tee -a "$out/sweep.log" >&2; }
cd "$root"

# Generation stops admitting requests at the deadline; what runs then finishes
# and is written (a few seconds), and the reserve is left for scoring.
deadline=$((time_limit - reserve - 15 - (SECONDS - start)))
if (( deadline < 30 )); then
  echo "device_sweep.sh: --time-limit $time_limit leaves $deadline s to generate after the ${reserve} s reserve" >&2
  exit 2
fi
exclude_args=()
if [[ -n "$continue_from" ]]; then
  "$python" tools/sweep/report.py "$work/previous" --merge "$continue_from" --done-list "$work/done.txt" \
      --no-plot > /dev/null 2>> "$out/report.log" || { log "reading $continue_from failed (report.log)"; exit 1; }
  exclude_args=(--exclude "$work/done.txt")
  log "continuing: $(wc -l < "$work/done.txt") (config, prompt) pairs done in $continue_from are skipped"
fi
thread_args=()
if [[ -n "$image_threads" ]]; then thread_args=(--image-threads "$image_threads"); fi
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader >> "$out/sweep.log" 2>&1
fi
log "argen_sweep: shard $shard, max-batch-rows $rows, deadline ${deadline} s, work $work"
# --resume keeps what an earlier call on this same machine finished.
timeout --signal=TERM --kill-after=10 $((deadline + 60)) \
  "$sweep_bin" --model "$model" --backend "${ARGEN_SWEEP_BACKEND:-cuda}" --out "$work/sweep" --resume --shard "$shard" \
    --max-batch-rows "$rows" --deadline-seconds "$deadline" "${thread_args[@]}" "${exclude_args[@]}" \
    "${extra[@]}" 2>&1 | tee -a "$out/sweep.log" >&2
sweep_rc=${PIPESTATUS[0]}
log "argen_sweep exit $sweep_rc"
cp "$work/sweep/sweep_settings.json" "$out/" 2>/dev/null || true
left="$(grep -o 'stopped at deadline, [0-9]* requests left' "$out/sweep.log" | tail -1 | grep -o '[0-9]*' | head -1)"
if [[ $sweep_rc -ne 0 ]]; then
  status="failed: argen_sweep exit $sweep_rc (the report covers the images written)"
elif [[ -n "$left" ]]; then
  status="partial: $left requests left (run again with --continue-from this report.json)"
else
  status="complete"
fi

# Score what was written (all of it, or the part before the deadline), within the time left.
report_rc=1
if [[ -s "$work/sweep/manifest.jsonl" ]]; then
  budget=$((time_limit - (SECONDS - start) - 5))
  log "report.py: $(wc -l < "$work/sweep/manifest.jsonl") images, $workers workers, ${budget} s left"
  timeout --signal=TERM --kill-after=5 "$budget" "$python" tools/sweep/report.py "$work/sweep" \
      --workers "$workers" --md "$out/report.md" --json "$work/report.json" \
      --plot "$out/quality_vs_sparsity.png" > /dev/null 2>> "$out/report.log"
  report_rc=$?
  log "report.py exit $report_rc"
else
  log "no images written: nothing to score"
fi
if [[ $report_rc -eq 0 ]]; then
  if (( $(stat -c %s "$work/report.json") > 16 * 1024 * 1024 )); then
    gzip -c "$work/report.json" > "$out/report.json.gz"
  else
    cp "$work/report.json" "$out/report.json"
  fi
  if [[ -n "$continue_from" ]]; then
    mine="$out/report.json"; [[ -f "$mine" ]] || mine="$out/report.json.gz"
    "$python" tools/sweep/report.py "$out/merged" --merge "$continue_from" "$mine" --json "$work/merged.json" \
        > /dev/null 2>> "$out/report.log" && gzip -c "$work/merged.json" > "$out/merged/report.json.gz" \
        && log "merged with $continue_from into $out/merged/"
  fi
fi
echo "$status" > "$out/status.txt"
log "$status; $(du -sh "$out" | cut -f1) in $out"
if [[ $sweep_rc -ne 0 || $report_rc -ne 0 ]]; then exit 1; fi
exit 0
