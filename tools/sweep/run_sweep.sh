#!/usr/bin/env bash
# The quality sweep in one command: argen_sweep (images + manifest), then
# report.py (Table-2-style markdown, JSON and plot). The build is assumed.
#
#   tools/sweep/run_sweep.sh --model models/<name> --subsample 10 [argen_sweep options]
#
# Every option is passed to argen_sweep (tools/sweep/argen_sweep --help) except:
#   --build-dir DIR       where argen_sweep was built [$ARGEN_BUILD_DIR or build]
#   --report-workers N    scorer processes [2]
# --out defaults to sweep-out; --prompts is also the report's metadata.
# Python: .venv/bin/python where it exists (numpy, pillow, matplotlib), else python3.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${ARGEN_BUILD_DIR:-$root/build}"
workers=2
out=""
prompts="$root/tools/sweep/benchmark_prompts.jsonl"
sweep_args=()

need_value() {
  if [[ $# -lt 2 ]]; then
    echo "run_sweep.sh: $1 needs a value" >&2
    exit 2
  fi
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) need_value "$@"; build_dir="$2"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --report-workers) need_value "$@"; workers="$2"; shift 2 ;;
    --report-workers=*) workers="${1#*=}"; shift ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --prompts) need_value "$@"; prompts="$2"; shift 2 ;;
    --prompts=*) prompts="${1#*=}"; shift ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sweep_args+=("$1"); shift ;;
  esac
done
out="${out:-sweep-out}"

sweep_bin="$build_dir/tools/sweep/argen_sweep"
if [[ ! -x "$sweep_bin" ]]; then
  echo "run_sweep.sh: $sweep_bin not found; build it (ninja -C $build_dir argen_sweep) or pass --build-dir" >&2
  exit 2
fi
python="python3"
if [[ -x "$root/.venv/bin/python" ]]; then
  python="$root/.venv/bin/python"
fi

echo "+ $sweep_bin --out $out --prompts $prompts ${sweep_args[*]}" >&2
"$sweep_bin" --out "$out" --prompts "$prompts" "${sweep_args[@]}"
echo "+ $python $root/tools/sweep/report.py $out --metadata $prompts --workers $workers" >&2
"$python" "$root/tools/sweep/report.py" "$out" --metadata "$prompts" --workers "$workers"
