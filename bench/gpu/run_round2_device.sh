#!/usr/bin/env bash
# Device run of 2026-11-29 (second session): GPU VQ decoder tests and bench, the server on the
# CUDA backend with the GPU VQ decoder, then bench/gpu/run_fused_device.sh (kernel tests, memcheck,
# attention A/B, end-to-end lines). Bundle .gpubundle/lead.tar.xz (carried), logs in $OUT.
set -u
B=/tmp/b/bin
mkdir -p /tmp/b && tar -xJf .gpubundle/lead.tar.xz -C /tmp/b || exit 1
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$OUT/vq_server.log
t0=$(date +%s)
step() { echo "== $(( $(date +%s) - t0 )) s: $*" >>"$L"; timeout "$@" >>"$L" 2>&1; echo "rc=$?" >>"$L"; }
step 120 $B/cuda_vq_decoder_test
step 30 $B/argen_vq_bench --model models/argen-scenes-v1 --backend cpu --batches 1,8 --runs 3
step 40 $B/argen_vq_bench --model models/argen-scenes-v1 --backend cuda --batches 1,8,64,256 --runs 5
step 40 $B/argen_vq_bench --backend cuda --batches 1,8,64 --runs 3
step 40 $B/argen_vq_bench --backend cuda --batches 1,8,64 --runs 3 --tf32 1
step 40 $B/argen_vq_bench --backend cpu --batches 1 --runs 1

# The server on the GPU (LLM and VQ), as a user runs it.
$B/argen_server --config configs/argen.yaml --backend cuda --port 50061 --metrics_port 9470 >/tmp/server.log 2>&1 &
SP=$!
for i in $(seq 60); do $B/argen_client --server localhost:50061 health >/dev/null 2>&1 && break; sleep 1; done
step 60 $B/argen_client --server localhost:50061 generate --prompt "a photo of a red circle above a blue square" --count 4 --seed 3 --out /tmp/gen
step 120 $B/argen_client --server localhost:50061 load --requests 256 --concurrency 64 --policies dense,diagonal:0.9
python3 -c "import urllib.request;print('\n'.join(l for l in urllib.request.urlopen('http://localhost:9470/metrics').read().decode().splitlines() if l.startswith('argen_') and not l.startswith('argen_request_seconds_bucket')))" >>"$L" 2>&1
kill -TERM $SP; timeout 60 tail --pid=$SP -f /dev/null; wait $SP; echo "server exit rc=$?" >>"$L"
tail -20 /tmp/server.log >>"$L"
python3 -c "
from PIL import Image; import numpy as np, glob
for f in sorted(glob.glob('/tmp/gen/*.png')):
    a=np.asarray(Image.open(f)).astype(int); r,g,b=a[...,0],a[...,1],a[...,2]
    print(f, a.shape, 'red', int(((r>170)&(g<90)&(b<90)).sum()), 'blue', int(((b>150)&(r<90)&(g<140)).sum()))" >>"$L" 2>&1
echo "== $(( $(date +%s) - t0 )) s: vq + server done" >>"$L"
grep -E "PASSED|FAILED|rc=|ok|images/s|exit" "$L" | head -40
bash bench/gpu/run_fused_device.sh
