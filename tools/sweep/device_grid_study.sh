#!/usr/bin/env bash
# Issue 17's measurement as one device call (docs/quality.md, "Grid-aware policies"): the full
# benchmark (tools/sweep/benchmark_prompts.jsonl, all categories, 4 images a prompt, paired
# seeds, cfg 3: the full sweep's settings) for the new policies next to diagonal at N_r = 64,
# with dense in the same run for PSNR, scored by report.py and merged with the committed full
# sweep (sliding_window, diagonal at the paper's N_r = 288 and the others, per image); then
# argen_bench's GPU step time and exact KV bytes of every policy at 7B / 64 images (random
# weights; ssd with a third of the heads semantic, the shipped model's share), overlapping the
# scoring.
#
#   ARGEN_BIN=/tmp/b/bin ARGEN_SOURCE_DIR=$PWD tools/sweep/device_grid_study.sh
#
# Environment (defaults in brackets):
#   GRID_POLICIES     argen_sweep --policies [dense,diagonal:64,grid_window,diagonal_grid,ssd]
#                     (RERUN_BASELINES=1 adds sliding_window,diagonal: every cell in this run)
#   GRID_SPARSITIES   percent [80,90,92.5,95,96]
#   GRID_BASELINE     per-image results merged in [tools/sweep/results/h200-2026-11-29/report.json.gz];
#                     "none": no merge
#   GRID_TIME_LIMIT   seconds this script may take in all [470]
#   GRID_REPORT_RESERVE  seconds kept for scoring after generation stops [150]
#   GRID_BENCH        argen_bench policies, "" to skip
#                     [dense,sliding_window:0.95,diagonal:0.95,diagonal:0.95:64,grid_window:0.95,
#                      diagonal_grid:0.95,ssd:0.95,diagonal:0.9:64,grid_window:0.9,diagonal_grid:0.9,ssd:0.9]
#   ARGEN_PYTHON      [python3, or the repo's .venv]
#   GRID_MODEL, ARGEN_SWEEP_BACKEND, GRID_MAX_BATCH_ROWS, GRID_SWEEP_ARGS (more argen_sweep options)
#                     [models/argen-scenes-v1, cuda, 1024, none]: the CPU test runs the tiny model
# Writes to $OUT (or ./device-out), 7 files: report.md (this run), merged.md (this run + the
# baseline: the table docs/quality.md takes), report.json.gz (this run, per image),
# quality_vs_sparsity.png (merged), bench.txt (argen_bench), sweep.log (argen_sweep and
# report.py's messages), status.txt.
# Exit 0 when every step ran (also when generation stopped at its deadline: status.txt says so),
# 1 when one failed, 2 for usage errors.
set -uo pipefail

start=$SECONDS
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${ARGEN_BIN:-/tmp/b/bin}"
out="${OUT:-$PWD/device-out}"
policies="${GRID_POLICIES:-dense,diagonal:64,grid_window,diagonal_grid,ssd}"
if [[ "${RERUN_BASELINES:-0}" == 1 ]]; then policies="$policies,sliding_window,diagonal"; fi
sparsities="${GRID_SPARSITIES:-80,90,92.5,95,96}"
baseline="${GRID_BASELINE:-$root/tools/sweep/results/h200-2026-11-29/report.json.gz}"
time_limit="${GRID_TIME_LIMIT:-470}"
reserve="${GRID_REPORT_RESERVE:-150}"
bench_policies="${GRID_BENCH-dense,sliding_window:0.95,diagonal:0.95,diagonal:0.95:64,grid_window:0.95,diagonal_grid:0.95,ssd:0.95,diagonal:0.9:64,grid_window:0.9,diagonal_grid:0.9,ssd:0.9}"
work="${GRID_WORK:-/tmp/argen-grid-study}"
model="${GRID_MODEL:-$root/models/argen-scenes-v1}"
backend="${ARGEN_SWEEP_BACKEND:-cuda}"
rows="${GRID_MAX_BATCH_ROWS:-1024}"
read -r -a sweep_args <<< "${GRID_SWEEP_ARGS:-}"

for v in time_limit reserve; do
  if ! [[ "${!v}" =~ ^[0-9]+$ ]]; then echo "device_grid_study.sh: $v must be a whole number, got ${!v}" >&2; exit 2; fi
done
for b in argen_sweep argen_bench; do
  if [[ ! -x "$bin/$b" && ( "$b" == argen_sweep || -n "$bench_policies" ) ]]; then
    echo "device_grid_study.sh: $bin/$b not found (set ARGEN_BIN to the bundle's bin folder)" >&2
    exit 2
  fi
done
if [[ ",$policies," == *,ssd,* && ! -f "$model/ssd_heads.json" ]]; then
  echo "device_grid_study.sh: $model/ssd_heads.json missing (ssd's head classification)" >&2
  exit 2
fi
if [[ "$baseline" != none && ! -f "$baseline" ]]; then
  echo "device_grid_study.sh: GRID_BASELINE $baseline not found (\"none\": no merge)" >&2
  exit 2
fi
python="${ARGEN_PYTHON:-python3}"
if [[ -x "$root/.venv/bin/python" && -z "${ARGEN_PYTHON:-}" ]]; then python="$root/.venv/bin/python"; fi
if ! "$python" -c "import numpy, PIL, matplotlib" 2>/dev/null; then
  echo "device_grid_study.sh: $python lacks numpy, pillow or matplotlib (set ARGEN_PYTHON)" >&2
  exit 2
fi
rm -rf "$work"  # a fresh sweep every call (PSNR needs this run's dense twins)
mkdir -p "$out" "$work"
log() { echo "device_grid_study: [$((SECONDS - start)) s] $*" | tee -a "$out/sweep.log" >&2; }
cd "$root"

# 1. Generation, with a deadline that leaves the reserve for scoring.
deadline=$((time_limit - reserve - 15))
if (( deadline < 30 )); then
  echo "device_grid_study.sh: GRID_TIME_LIMIT $time_limit leaves $deadline s to generate" >&2
  exit 2
fi
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader >> "$out/sweep.log" 2>&1
fi
log "argen_sweep --policies $policies --sparsities $sparsities, deadline ${deadline} s"
timeout --signal=TERM --kill-after=10 $((deadline + 60)) \
  "$bin/argen_sweep" --model "$model" --backend "$backend" --out "$work/sweep" --policies "$policies" \
    --sparsities "$sparsities" --cfg 3 --max-batch-rows "$rows" --skip-invalid --deadline-seconds "$deadline" \
    "${sweep_args[@]}" 2>&1 | tee -a "$out/sweep.log" >&2
sweep_rc=${PIPESTATUS[0]}
log "argen_sweep exit $sweep_rc"
left="$(grep -o 'stopped at deadline, [0-9]* requests left' "$out/sweep.log" | tail -1 | grep -o '[0-9]*' | head -1)"
if [[ $sweep_rc -ne 0 ]]; then
  status="failed: argen_sweep exit $sweep_rc (the report covers the images written)"
elif [[ -n "$left" ]]; then
  status="partial: $left requests left at the deadline"
else
  status="complete"
fi

# 2. argen_bench on the GPU (now free) while report.py scores on the CPU cores.
bench_pid=""
if [[ -n "$bench_policies" ]]; then
  log "argen_bench --model 7b --batches 64 --policies $bench_policies"
  ( timeout --signal=TERM --kill-after=5 $((time_limit - (SECONDS - start) - 10)) \
      "$bin/argen_bench" --model 7b --batches 64 --policies "$bench_policies" --ssd-semantic-share 0.333 \
      > "$out/bench.txt" 2>&1
    echo "argen_bench exit $?" >> "$out/bench.txt" ) &
  bench_pid=$!
fi

# 3. Scoring (all cores but one, the bench's), then the merge with the baseline.
report_rc=1
workers=$(( $(nproc) > 2 ? $(nproc) - 1 : 1 ))
if [[ -s "$work/sweep/manifest.jsonl" ]]; then
  budget=$((time_limit - (SECONDS - start) - 10))
  log "report.py: $(wc -l < "$work/sweep/manifest.jsonl") images, $workers workers, ${budget} s left"
  timeout --signal=TERM --kill-after=5 "$budget" "$python" tools/sweep/report.py "$work/sweep" --workers "$workers" \
      --md "$out/report.md" --json "$work/report.json.gz" --no-plot > /dev/null 2>> "$out/sweep.log"
  report_rc=$?
  log "report.py exit $report_rc"
fi
if [[ $report_rc -eq 0 ]]; then
  cp "$work/report.json.gz" "$out/report.json.gz"
  merge=("$work/report.json.gz")
  if [[ "$baseline" != none ]]; then merge=("$baseline" "$work/report.json.gz"); fi  # later wins: this run's dense
  "$python" tools/sweep/report.py "$work/merged" --merge "${merge[@]}" --md "$out/merged.md" \
      --json "$work/merged.json.gz" --plot "$out/quality_vs_sparsity.png" \
      --title "Quality against decode KV sparsity: grid-aware policies" > /dev/null 2>> "$out/sweep.log" \
    || { log "merge failed (sweep.log)"; report_rc=1; }
fi
if [[ -n "$bench_pid" ]]; then
  wait "$bench_pid"
  log "$(tail -1 "$out/bench.txt")"
fi
echo "$status" > "$out/status.txt"
log "$status; $(du -sh "$out" | cut -f1) in $out"
if [[ $sweep_rc -ne 0 || $report_rc -ne 0 ]]; then exit 1; fi
exit 0
