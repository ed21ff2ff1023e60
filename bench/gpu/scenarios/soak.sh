# Reliability on the GPU: the GPU soak (tests/soak/soak.sh --backend cuda, tiny model, 2,000 requests) after gpu_faults_test.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none: pass / fail (argen_soak's outcomes, RSS growth <= 64 MiB after warm-up, gauges back to 0, exit 0)"
NEEDS="argen_server argen_soak gpu_faults_test"
run_scenario() {
  export ARGEN_SERVER_BIN=$BIN/argen_server
  stamp gpu_faults_test
  guarded 120 "$BIN/gpu_faults_test" --gtest_brief=1
  echo "rc(gpu_faults_test)=$?"
  stamp "soak (cuda, 2000 requests)"
  mkdir -p "$OUT/soak"
  SERVER_BIN=$BIN/argen_server SOAK_BIN=$BIN/argen_soak guarded 240 bash "${SOAK_SCRIPT:-tests/soak/soak.sh}" --backend cuda \
    --requests 2000 --concurrency 16 --max-rss-growth-mib 64 --out "$OUT/soak" \
    -- --vq_backend=cuda --kv_budget_bytes=2GiB --max_batch_rows=64
  echo "soak rc=$?"
}
summarize() {
  grep -h -E "^== |PASSED|FAILED|^rc\(|^soak rc" "$1" | cut -c1-200
  grep -h -E "argen_soak:|outcome|unexpected|RSS|gauge" "$OUT/soak/soak.log" 2>/dev/null | sort -u | cut -c1-200
}
