# One kernel under Nsight Compute (ncu, on the device's Firecracker machines: docs/PERFORMANCE.md's
# "Profiling"): argen_bench's attention micro for PROFILE_MODEL at PROFILE_BATCHES images
# (PROFILE_POLICY), the first PROFILE_COUNT launches whose mangled name matches each regex of
# PROFILE_KERNELS (space-separated; default: the two-pass kernel's 256-thread and 128-thread
# instances for 4 query heads a KV head, bf16, no shared prompt: Emu3's sparse and dense launches),
# with the speed-of-light, memory, warp-state, scheduler and source-counter sections: where a launch's
# time goes (stall reasons, the hottest instructions), not how long it takes (micro does that).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none: counters of one launch each (BASE_BUNDLE's argen_bench first, when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i k n=0 ncu rep
  ncu=$(command -v ncu || find /opt/nvidia -maxdepth 3 -name ncu -type f 2>/dev/null | sort | tail -1)
  [ -n "$ncu" ] || { echo "profile: no ncu on this machine"; return 1; }
  local kernels=${PROFILE_KERNELS:-"AttentionKernelILi128ELi4ELb0ELb0ELi256E AttentionKernelILi128ELi4ELb0ELb0ELi128E"}
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    for k in $kernels; do
      n=$((n + 1))
      rep=$LAB_WORK/profile-$n
      stamp "${AB_NAMES[$i]}: ncu, kernel $k"
      guarded 120 "$ncu" --clock-control none --kernel-name-base mangled -k "regex:$k" -c "${PROFILE_COUNT:-1}" \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section LaunchStats --section SourceCounters -f -o "$rep" \
        "$b/argen_bench" --attention-micro --model "${PROFILE_MODEL:-emu3}" --batches "${PROFILE_BATCHES:-16}" \
        --policies "${PROFILE_POLICY:-diagonal:0.95:455}" >/dev/null
      [ -f "$rep.ncu-rep" ] || { echo "profile: no report for $k"; continue; }
      # The sections with their tables (stall reasons by type), then the SASS lines with the most stall samples.
      guarded 60 "$ncu" --import "$rep.ncu-rep" --print-details all
      guarded 60 "$ncu" --import "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" &&
        "$PYTHON" bench/gpu/lib/top_stalls.py "$rep.csv" 40
    done
  done
}
summarize() {
  grep -h -E "^== |^attention |^top [0-9]+ of|^ *[0-9]+\.[0-9]%  |Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|One or More|Block Size|Grid Size" "$1" |
    cut -c1-200
}
