#!/usr/bin/env bash
# gpu_faults_test on the device, three times over (2026-12-01: the PNG comparison
# across engine instances failed by chance while the VQ decode was bf16 with
# per-engine cuDNN algorithm timing; the test now decodes in fp32). $OUT/faults.log.
set -u
. bench/gpu/bundle_env.sh
use_bundle gf || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
timeout 300 $BIN/gpu_faults_test --gtest_repeat=3 --gtest_brief=1 >"$OUT/faults.log" 2>&1
echo "rc=$?" >>"$OUT/faults.log"
grep -E "PASSED|FAILED|wrong image|^rc=" "$OUT/faults.log"
