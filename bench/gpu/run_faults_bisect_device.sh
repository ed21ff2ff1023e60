#!/usr/bin/env bash
# gpu_faults_test on the merged main, alone and beside a build with the decode
# attention of b45bed0, to tell which change broke ACudaErrorInAPrefill... (2026-12-01).
set -u
B=/tmp/gf; mkdir -p $B && xz -dc .gpubundle/gf.tar.xz | tar -xf - -C $B || exit 1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD ARGEN_SERVER_BIN=$B/bin/argen_server
run() { echo "=== $*"; timeout 120 "$@" --gtest_brief=1 2>&1 | grep -E "OK|FAILED|PASSED|wrong image" | head -20; }
run $B/bin/gpu_faults_test_head
run $B/bin/gpu_faults_test_oldattn
run $B/bin/gpu_faults_test_head --gtest_filter=GpuFaultsTest.ACudaErrorInAPrefill*
run $B/bin/gpu_faults_test_head --gtest_filter=GpuFaultsTest.ACudaErrorInAGraph*:GpuFaultsTest.ACudaErrorInAPrefill*
run $B/bin/gpu_faults_test_head --gtest_repeat=2 --gtest_filter=GpuFaultsTest.A*:GpuFaultsTest.Nan*
