#!/usr/bin/env bash
# The lab driver on the CPU, so that it cannot rot unseen: every scenario of
# bench/gpu/scenarios runs through bench/gpu/lab.sh against stub binaries (each
# prints a line of the real one's format and exits 0; the stub server stays up
# until SIGTERM, the stub python writes a checkpoint folder) and must leave its
# header, its baseline, its summary lines and no MISSING binary in summary.txt.
#   bash bench/gpu/tests/lab_stub_test.sh       (ctest: bench_lab_stub_test)
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "${KEEP_LAB_OUT:-}" ] && trap - EXIT
stub=$tmp/bin
mkdir -p "$stub"
fail=0
check() {  # DESCRIPTION PATTERN FILE
  if ! grep -q -E -- "$2" "$3"; then echo "FAIL: $1 (no /$2/ in $(basename "$3"))"; fail=1; fi
}

# argen_bench: one line per model, policy (and weight dtype) and batch, in argen_bench's columns.
cat >"$stub/argen_bench" <<'STUB'
#!/usr/bin/env bash
[ -n "${STUB_ARGS_LOG:-}" ] && echo "argen_bench $*" >>"$STUB_ARGS_LOG"
model=7b batches=16 policies=dense dtypes=auto proj=""
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift ;;
    --batches) batches=$2; shift ;;
    --policies) policies=$2; shift ;;
    --weight-dtype) dtypes=$2; shift ;;
    --project-bounded) proj=$2; shift ;;
    --max-batch) batches=100 ;;
    --gemm-micro) echo "gemm qkv 2 rows bf16 41.0 us fp8 42.1 us"; exit 0 ;;
    --attention-micro) echo "attention diagonal:0.95 64 images two-pass 1.0 ms staged 1.1 ms"; exit 0 ;;
    --vae-micro) echo "vae $model fp32 images=1 (512 px, 1 a chunk): 30.0 ms, 30.00 ms/image, 33.3 img/s"; exit 0 ;;
  esac
  shift
done
echo "model policy images prefill_s decode_s step_ms last_ms img/s | embed plan qkv attention observe apply o_proj ffn head indexing kv_MB/img keys"
for d in ${dtypes//,/ }; do
  for p in ${policies//,/ }; do
    [ "$d" = fp8 ] && p=$p+fp8w
    [ -n "$proj" ] && [ "${p%%:*}" != dense ] && p=$p+proj$proj
    for b in ${batches//,/ }; do
      ips=$([ "${p%%:*}" = dense ] && echo 4.00 || echo 8.00)
      att=$([ "${p%%:*}" = dense ] && echo 2.0 || echo 0.2)
      echo "$model $p $b 0.1 10.0 5.0 5.0 $ips | 0.1 0.1 1.0 $att 0 0 0.5 2.0 0.1 0.1 100.0 30.0"
      [ "${model#nextstep}" != "$model" ] && echo "split $model $p images=$b: step 5.000 ms (graphs), head alone 1.250 ms (graph; eager 2.000 ms) = 25.0% of the step, decoder 3.750 ms; stage timer (eager, 4 steps): decoder 4.000 ms, head 2.000 ms = 33.3%; tokens finite"
    done
  done
done
STUB
# argen_server: up until SIGTERM; its step log has a busy step past step 60 and one past 600 (emu3's FROM).
cat >"$stub/argen_server" <<'STUB'
#!/usr/bin/env bash
[ -n "${STUB_ARGS_LOG:-}" ] && echo "argen_server $*" >>"$STUB_ARGS_LOG"
for a in "$@"; do
  case $a in --step_log=*) printf 'step start_s interval_ms step_ms loop_ms rows_decoded rows_prefilled prefill_tokens groups_prefilled running_rows queue_depth\n70 1.0 50.0 49.0 0.1 2000 0 0 0 2000 10\n700 35.0 50.0 49.0 0.1 2000 0 0 0 2000 10\n' >"${a#--step_log=}" ;; esac
done
trap 'exit 0' TERM
while :; do sleep 0.1; done
STUB
cat >"$stub/argen_client" <<'STUB'
#!/usr/bin/env bash
sw=0
while [ $# -gt 0 ]; do
  case $1 in
    health) exit 0 ;;
    load) [ -n "${STUB_ARGS_LOG:-}" ] && echo "argen_client $*" >>"$STUB_ARGS_LOG"
      echo "ok 2400, failed by status: none; wall 90.0 s, images/s 26.00, p50 40 s"; exit 0 ;;
    generate) ;;
    --speculative_window) sw=$2; shift ;;
    --out) mkdir -p "$2"; touch "$2/0.png"; shift ;;
  esac
  shift
done
drafts="\"steps\": 576"
[ "$sw" -gt 0 ] && drafts="\"steps\": 288, \"drafts_proposed\": 400, \"drafts_accepted\": 100"
echo "{\"images\": 1, \"seconds\": 3.0, \"status\": \"OK\", \"wall_seconds\": 3.0, \"metrics\": {\"decode_seconds\": 2.5, \"vq_decode_seconds\": 0.25, $drafts}}"
STUB
cat >"$stub/python3" <<'STUB'
#!/usr/bin/env bash
case ${1:-} in
  -c) exit 0 ;;
  tools/convert/make_janus_pro_bin.py)
    while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; [ "$1" = --format ] && fmt=$2; shift; done
    mkdir -p "$out"; echo "random tensors on cuda"
    if [ "${fmt:-bin}" = safetensors ]; then touch "$out/model.safetensors"; else touch "$out/pytorch_model.bin.index.json"; fi ;;
  tools/convert/make_emu3_gen_random.py | tools/convert/make_lumina_random.py)
    [ -n "${STUB_ARGS_LOG:-}" ] && echo "python3 $*" >>"$STUB_ARGS_LOG"
    while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
    mkdir -p "$out"; echo "random tensors on cuda"; touch "$out/model.safetensors" ;;
  bench/gpu/torch_janus_loop.py)
    model=7b batches=16,64,128
    while [ $# -gt 0 ]; do
      case $1 in --model) model=$2; shift ;; --batches) batches=$2; shift ;; esac
      shift
    done
    for m in ${model//,/ }; do
      for b in ${batches//,/ }; do echo "$m    torch-loop $b 0.1 10.0 8.0 2.00 | 0.1 20"; done
    done ;;
  bench/gpu/torch_nextstep_loop.py)
    [ -n "${STUB_ARGS_LOG:-}" ] && echo "python3 $*" >>"$STUB_ARGS_LOG"
    batches=1,16,64 tokens=1024
    while [ $# -gt 0 ]; do
      case $1 in --batches) batches=$2; shift ;; --tokens) tokens=$2; shift ;; esac
      shift
    done
    kind=measured
    [ "$tokens" -lt 1024 ] && kind=extrapolated
    for b in ${batches//,/ }; do
      echo "nextstep-14b torch-loop $b 0.1 20.1 19.6 7.8 2.00 | 39.8 3.00 60.0 $((tokens - 1))/1023 $kind"
      echo "split nextstep-14b torch-loop images=$b: step 19.600 ms = decoder 11.800 ms + head 7.800 ms (39.8% of the step; CUDA events around each graph, 1023 steps); one batch 20.20 s ($kind)"
    done ;;
  tools/sweep/report.py)
    while [ $# -gt 0 ]; do
      case $1 in --json) echo '{}' >"$2" ;; --md) printf '## Overall\nstub 0.80\n## Next\n' >"$2" ;; esac
      shift
    done ;;
  bench/gpu/torch_vq_bench.py) echo "torch-bf16 64 0.2 300.0 3.3" ;;
esac
exit 0
STUB
for t in gpu_faults_test kernels_attention_test kernels_policy_test; do
  printf '#!/usr/bin/env bash\necho "[  PASSED  ] 7 tests."\n' >"$stub/$t"
done
# compute-sanitizer: runs the program after its own flags, then its summary line.
cat >"$stub/compute-sanitizer" <<'STUB'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift 2; done
"$@"
echo "========= ERROR SUMMARY: 0 errors"
STUB
cat >"$stub/argen_sweep" <<'STUB'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = --out ] && { mkdir -p "$2"; echo '{"image": "0.png"}' >"$2/manifest.jsonl"; }; shift; done
STUB
for t in argen_vq_bench argen_emu3vq_bench argen_soak argen_convert; do
  printf '#!/usr/bin/env bash\necho "cuda-bf16: stub %s"\n' "$t" >"$stub/$t"
done
printf '#!/usr/bin/env bash\necho "argen_soak: 2000 requests, 0 unexpected outcomes"\n' >"$stub/soak.sh"
chmod +x "$stub"/*

scenarios=""
for f in "$root"/bench/gpu/scenarios/*.sh; do scenarios="$scenarios $(basename "$f" .sh)"; done
bash "$root/bench/gpu/lab.sh" --list >"$tmp/list.txt"
for s in $scenarios; do check "--list names $s" "^$s " "$tmp/list.txt"; done

out=$tmp/out
# shellcheck disable=SC2086
STUB_ARGS_LOG=$tmp/args.txt OUT=$out LAB_MAX_FILES=1000 PARALLEL_ENGINE=1 SOAK_SCRIPT=$stub/soak.sh COMPUTE_SANITIZER=$stub/compute-sanitizer LAB_BIN=$stub LAB_BASE_BIN=$stub PYTHON=$stub/python3 LAB_WORK=$tmp/work DEADLINE=120 \
  bash "$root/bench/gpu/lab.sh" $scenarios nonexistent >"$tmp/lab.log" 2>&1
echo "lab.sh rc=$?"
sum=$out/summary.txt
for s in $scenarios; do
  check "$s ran" "s: scenario $s\$" "$sum"
  [ -s "$out/$s.txt" ] || { echo "FAIL: $s wrote nothing to $s.txt"; fail=1; }
done
check "an unknown scenario is named" "no scenario nonexistent" "$sum"
check "the command is recorded" "bash bench/gpu/lab.sh" "$out/cmd.txt"
check "every scenario states its baseline" "^baseline: " "$sum"
if grep -q "baseline: none stated" "$sum"; then echo "FAIL: a scenario states no baseline"; fail=1; fi
if grep -q "^MISSING" "$sum"; then echo "FAIL: $(grep "^MISSING" "$sum" | head -1)"; fail=1; fi
if grep -q "SKIPPED (time guard)" "$out"/*.txt; then echo "FAIL: the stub run hit the time guard"; fail=1; fi
# What each summarize must pull out of its scenario's output.
check "engine-batches lines" "^7b dense\+fp8w 128 " "$sum"
check "engine-48g ratio" "diagonal / dense 2.00x" "$sum"
check "versus-torch ratio" "against the loop, dense: 16 images 2.00x" "$sum"
check "server-load ratio" "server / engine \(weight_dtype auto\): " "$sum"
check "single-image wall times" "client wall diagonal run 5" "$sum"
check "parallel-load ratios" "^dense concurrency 64 parallel_window 8: 1.00x sequential" "$sum"
check "parallel-load step lines" "^steps dense concurrency 64 parallel_window 8: " "$sum"
check "parallel-load server step log" "^argen_server .*--step_log=$out/parallel-load_steps_dense.txt" "$tmp/args.txt"
check "parallel-load engine steps" "^argen_bench --model 7b --batches 16,64 --policies dense,diagonal:0.95:64 --prompt-len 50 --parallel-window 8\$" \
  "$tmp/args.txt"
check "parallel-load diagonal windows" "^diagonal concurrency 64 parallel_window 8: 1.00x dense sequential" "$sum"
check "speculative per window" "speculative_window 8 \(runs 2-5\): wall .* 288 steps per image, drafts taken 25.0%, .*x sequential speed" "$sum"
check "speculative baseline" "speculative_window 0 \(runs 2-5\): .* 576 steps per image, drafts taken -, the baseline" "$sum"
check "lumina ratios" "attention 10.00x" "$sum"
check "family-engine ratios" "emu3, 1,16 images @16: diagonal:0.95:455: last-steps attention 10.00x" "$sum"
check "family-engine max batch" "llamagen-xl-512, 48 GB card, max batch: diagonal:0.95:160: .*img/s / dense 2.00x" "$sum"
check "family-torch LlamaGen ratios" "^llamagen-xl-256, 64 images: loop 10.10 s a batch \(2.00 img/s\); dense 10.10 s \(4.00 img/s, 1.00x the loop\), diagonal:0.95:80 10.10 s" "$sum"
check "family-torch published figures" "^published \(A100, not this GPU\): LlamaGen c2i GPT-XL \(775M\) 384 px, 8 images: .* 19.76 s, .* 4.84 s a batch \(4.08x\)" "$sum"
check "family-torch authors' batch beside" "^llamagen-xl-384, 8 images: loop .*diagonal:0.95:120" "$sum"
check "family-torch emu3" "^emu3, 1 images: loop 10.10 s a batch .* diagonal:0.95:455 " "$sum"
check "nextstep head share" "head share dense 64 images: 25.0% of the step \(target < 30%\): met" "$sum"
check "nextstep ratios" "nextstep-14b, 1,16,64 images, step split @64: diagonal:0.95: .*img/s / dense 2.00x" "$sum"
check "nextstep max batch" "nextstep-14b, whole card \([0-9]+G\), max batch: diagonal:0.95: .*img/s / dense 2.00x" "$sum"
check "nextstep one image" "one image dense: latency 10.10 s" "$sum"
check "nextstep vae" "^vae nextstep-14b fp32 images=1" "$sum"
check "emu3 lone image" "candidate dense 512px lone run 2: .*vision decode \+ PNG 0.250 s" "$sum"
check "emu3 ratios" "candidate 512px 16 concurrent: mean request wall dense / diagonal 1.00x" "$sum"
check "micro lines" "^gemm qkv" "$sum"
check "one-image ratio" "^7b @2: one batch 10.10 s \(cuBLAS\) -> 10.10 s \(skinny\): 1.00x; step 5.000 -> 5.000 ms" "$sum"
check "one-image runs every family" "--model emu3 --batches 1 --policies dense --prompt-len 50 --skinny-gemm on" "$tmp/args.txt"
check "one-image LlamaGen's prompt" "--model llamagen-xl-512 --batches 1,2 --policies dense --prompt-len 120 --skinny-gemm off" \
  "$tmp/args.txt"
check "micro runs NextStep's grouped-query attention" \
  "--attention-micro --model nextstep-14b --batches 1,16,64 --policies diagonal:0.95 --prompt-len 50" "$tmp/args.txt"
check "vq-decode lines" "^cuda-bf16: " "$sum"
check "gpu-tests ran the tests" "rc\(gpu_faults_test\)=0" "$sum"
check "quality-sweep ran" "device_sweep rc=0" "$sum"
check "soak ran" "soak rc=" "$sum"
check "memcheck ran the kernel tests" "rc\(memcheck kernels_attention_test\)=0" "$sum"
check "torch-checkpoint served both forms" "served safetensors: healthy" "$sum"

# family-engine on Anole-7b at 512 px: its policy (five 32-token rows) and prompt length reach argen_bench.
out2=$tmp/out-anole
FAMILY_MODELS=anole-512 STUB_ARGS_LOG=$tmp/anole-args.txt OUT=$out2 LAB_BIN=$stub LAB_BASE_BIN=$stub PYTHON=$stub/python3 \
  LAB_WORK=$tmp/work DEADLINE=60 bash "$root/bench/gpu/lab.sh" family-engine >"$tmp/lab-anole.log" 2>&1
echo "lab.sh family-engine (anole-512) rc=$?"
check "anole-512 micro" "--attention-micro --model anole-512 --batches 16 --policies diagonal:0.95:160 --prompt-len 32" \
  "$tmp/anole-args.txt"
check "anole-512 lone" "--model anole-512 --batches 1,16 --policies dense,diagonal:0.95:160 --prompt-len 32" \
  "$tmp/anole-args.txt"
check "anole-512 48g" "--model anole-512 --card-memory 48G --max-batch .*--policies dense,diagonal:0.95:160 --prompt-len 32" \
  "$tmp/anole-args.txt"
check "anole-512 ratios" "anole-512, 1,16 images @16: diagonal:0.95:160: last-steps attention 10.00x" "$out2/summary.txt"
check "anole-512 max batch" "anole-512, 48 GB card, max batch: diagonal:0.95:160: .*img/s / dense 2.00x" "$out2/summary.txt"
check "cmd.txt records the scenario settings" "^settings: .*FAMILY_MODELS=anole-512" "$out2/cmd.txt"

# family-torch on NextStep-1-14B: its 40 GB pool and prompt reach argen_bench, the loop gets the batches and
# tokens, and the summary pairs the loop with both policies (an extrapolated loop says so).
out3=$tmp/out-nextstep
TORCH_FAMILY_MODELS=nextstep-14b TORCH_FAMILY_NEXTSTEP_TOKENS=128 STUB_ARGS_LOG=$tmp/nextstep-args.txt OUT=$out3 \
  LAB_BIN=$stub LAB_BASE_BIN=$stub PYTHON=$stub/python3 LAB_WORK=$tmp/work DEADLINE=60 \
  bash "$root/bench/gpu/lab.sh" family-torch >"$tmp/lab-nextstep.log" 2>&1
echo "lab.sh family-torch (nextstep-14b) rc=$?"
check "nextstep argen_bench" "--model nextstep-14b --batches 1,16,64 --policies dense,diagonal:0.95 --prompt-len 50 --kv-budget 40G" \
  "$tmp/nextstep-args.txt"
check "nextstep loop" "^python3 bench/gpu/torch_nextstep_loop.py --batches 1,16,64 --prompt-len 50 --tokens 128" \
  "$tmp/nextstep-args.txt"
check "nextstep ratios" "^nextstep-14b, 64 images: loop 20.20 s a batch \(2.00 img/s, extrapolated from its timed steps\); dense 10.10 s \(4.00 img/s, 2.00x the loop\), diagonal:0.95 10.10 s" \
  "$out3/summary.txt"
check "nextstep one image" "^nextstep-14b, 1 images: loop 20.20 s" "$out3/summary.txt"
check "nextstep loop split" "^split nextstep-14b torch-loop images=64: step 19.600 ms = decoder 11.800 ms \+ head 7.800 ms" \
  "$out3/summary.txt"
check "nextstep argen split" "^split nextstep-14b dense images=64: " "$out3/summary.txt"

# emu3's full card at 720 px: the engine baseline (diagonal only, same N_r) once per bundle, the server with
# auto rows and KV under a load that outlasts the guard, its steady state at 8,193 tokens an image from step 600.
out4=$tmp/out-emu3
EMU3_STEPS="lone full" EMU3_PX=720 STUB_ARGS_LOG=$tmp/emu3-args.txt OUT=$out4 LAB_BIN=$stub LAB_BASE_BIN=$stub \
  PYTHON=$stub/python3 LAB_WORK=$tmp/work DEADLINE=60 bash "$root/bench/gpu/lab.sh" emu3 >"$tmp/lab-emu3.log" 2>&1
echo "lab.sh emu3 (full, 720 px) rc=$?"
check "emu3 full engine" "^argen_bench --model emu3 --auto-sizing --max-batch --policies diagonal:0.95:455 --prompt-len 50 --stage-steps 0 --project-bounded 1000\$" \
  "$tmp/emu3-args.txt"
check "emu3 full server" "^argen_server .*--default_policy.n_recent=455 --step_log=$out4/emu3_steps_diagonal.txt --queue_limit=4096 --connections.max_concurrent_streams=2048 --connections.max_threads=4096 --drain_timeout_s=5\$" \
  "$tmp/emu3-args.txt"
check "emu3 full load" "^argen_client load --requests 1100 --concurrency 1100 --prompts-file " "$tmp/emu3-args.txt"
if grep -E "^argen_server .*--step_log" "$tmp/emu3-args.txt" | grep -q -E -- "--(max_batch_rows|kv_budget_bytes)"; then
  echo "FAIL: emu3 full sizes rows or KV (auto expected)"; fail=1
fi
check "emu3 full needs argen_bench" "^baseline: .*full: argen_bench" "$out4/summary.txt"
check "emu3 still runs lone" "candidate dense 720px lone run 2: " "$out4/summary.txt"
check "emu3 full steady state" "^candidate diagonal 720px full card steady state: 2.44 img/s over 1 busy steps" "$out4/summary.txt"
check "emu3 full ratio" "^candidate 720px full card: server / engine \(diagonal\) 0.305 \(2.44 / 8.00 img/s\)" "$out4/summary.txt"
check "emu3 full baseline bundle" "^baseline 720px full card: steady-state img/s diagonal / dense 1.00x" "$out4/summary.txt"
check "emu3 full sizing lines" "^candidate dense 720px full card: (wall|ok)" "$out4/summary.txt"

# single-image on the random Lumina-mGPT-7B-768 (issue #28): its checkpoint maker, the family's own diagonal
# window (no n_recent), parallel windows on dense, SINGLE_RUNS runs.
out5=$tmp/out-lumina-single
SINGLE_MODEL=lumina-768 SINGLE_RUNS=3 SINGLE_WINDOWS="0 8" STUB_ARGS_LOG=$tmp/lumina-args.txt OUT=$out5 LAB_BIN=$stub \
  LAB_BASE_BIN=$stub PYTHON=$stub/python3 LAB_WORK=$tmp/work DEADLINE=60 bash "$root/bench/gpu/lab.sh" single-image \
  >"$tmp/lab-lumina-single.log" 2>&1
echo "lab.sh single-image (lumina-768) rc=$?"
check "lumina-768 checkpoint" "^python3 tools/convert/make_lumina_random.py --out $tmp/work/Lumina-mGPT-7B-768 --device cuda\$" \
  "$tmp/lumina-args.txt"
check "lumina-768 diagonal server" "^argen_server .*--model_dir=$tmp/work/Lumina-mGPT-7B-768 --default_policy.name=diagonal --default_policy.sparsity=0.95\$" \
  "$tmp/lumina-args.txt"
check "lumina-768 parallel runs" "client wall dense parallel_window 8 run 3" "$out5/summary.txt"
check "lumina-768 diagonal runs" "client wall diagonal run 3" "$out5/summary.txt"
if grep -q "client wall diagonal run 4" "$out5/summary.txt"; then echo "FAIL: SINGLE_RUNS=3 ran a fourth"; fail=1; fi

# server-load with SERVER_PARALLEL_WINDOWS: a server a window, each against the sequential engine.
out7=$tmp/out-server-pw
SERVER_PARALLEL_WINDOWS="0 8" STUB_ARGS_LOG=$tmp/pw-args.txt OUT=$out7 LAB_BIN=$stub PYTHON=$stub/python3 \
  LAB_WORK=$tmp/work DEADLINE=60 bash "$root/bench/gpu/lab.sh" server-load >"$tmp/lab-server-pw.log" 2>&1
echo "lab.sh server-load (parallel windows) rc=$?"
check "server-load window 8's load" "^argen_client .*load .*--parallel_window 8\$" "$tmp/pw-args.txt"
check "server-load window 8 ratio" "server / engine \(weight_dtype auto\+pw8\): " "$out7/summary.txt"
check "server-load window 0 ratio" "server / engine \(weight_dtype auto\): " "$out7/summary.txt"

# engine-full-card with FULL_CARD_WINDOWS and FULL_CARD_WEIGHTS: a run a window, the named weights only.
out8=$tmp/out-full-card-pw
FULL_CARD_WINDOWS="0 8" FULL_CARD_WEIGHTS=auto STUB_ARGS_LOG=$tmp/fc-args.txt OUT=$out8 LAB_BIN=$stub LAB_WORK=$tmp/work \
  DEADLINE=60 bash "$root/bench/gpu/lab.sh" engine-full-card >"$tmp/lab-full-card.log" 2>&1
echo "lab.sh engine-full-card (parallel windows) rc=$?"
check "engine-full-card window 8" "^argen_bench .*--max-batch .*--weight-dtype auto --parallel-window 8\$" "$tmp/fc-args.txt"
check "engine-full-card window 0" "^argen_bench .*--max-batch .*--weight-dtype auto --parallel-window 0\$" "$tmp/fc-args.txt"

# engine-batches with BENCH_KERNELS and BENCH_BATCHES: a run a kernel, the named batches.
out9=$tmp/out-batches-kernels
BENCH_KERNELS="two-pass auto" BENCH_BATCHES=1 STUB_ARGS_LOG=$tmp/bk-args.txt OUT=$out9 LAB_BIN=$stub LAB_WORK=$tmp/work \
  DEADLINE=60 bash "$root/bench/gpu/lab.sh" engine-batches >"$tmp/lab-batches.log" 2>&1
echo "lab.sh engine-batches (kernels) rc=$?"
check "engine-batches two-pass run" "^argen_bench --attention-kernel two-pass --model 7b --batches 1 " "$tmp/bk-args.txt"
check "engine-batches auto run" "^argen_bench --attention-kernel auto --model 7b --batches 1 " "$tmp/bk-args.txt"

# steady_state (lib/serve.sh): tokens made a step (tokens_sampled) over the step time when the log has
# them, else a token a step for each image in flight (rows / 2). 2 busy steps of 100 ms: 2,880 tokens
# made at 576 an image is 5 images in 0.2 s (25 img/s); by rows (1,000 rows: 500 images a step) 8.68.
printf 'step start_s interval_ms step_ms loop_ms rows_decoded rows_prefilled prefill_tokens groups_prefilled running_rows queue_depth tokens_sampled\n60 1.0 100.0 99.0 0.1 1000 0 0 0 1000 5 1440\n61 1.1 100.0 99.0 0.1 1000 0 0 0 1000 5 1440\n' >"$tmp/steps12.txt"
cut -d' ' -f1-11 "$tmp/steps12.txt" >"$tmp/steps11.txt"
(
  # shellcheck source=bench/gpu/lib/serve.sh
  . "$root/bench/gpu/lib/serve.sh"
  echo "tokens: $(steady_state "$tmp/steps12.txt")"
  echo "rows: $(steady_state "$tmp/steps11.txt")"
) >"$tmp/steady.txt"
check "steady state from tokens made" "^tokens: 25.00 img/s over 2 busy steps" "$tmp/steady.txt"
check "steady state from rows (older logs)" "^rows: 8.68 img/s over 2 busy steps" "$tmp/steady.txt"

# gpu-tests with GPU_TESTS runs the named executables alone; with more files than LAB_MAX_FILES
# (the run tool's 8) the lab packs all but cmd.txt and summary.txt into all.tgz.
out6=$tmp/out-gpu-tests
GPU_TESTS="kernels_policy_test gpu_faults_test" LAB_MAX_FILES=2 OUT=$out6 LAB_BIN=$stub LAB_WORK=$tmp/work DEADLINE=60 \
  bash "$root/bench/gpu/lab.sh" gpu-tests >"$tmp/lab-gpu-tests.log" 2>&1
echo "lab.sh gpu-tests (GPU_TESTS) rc=$?"
check "GPU_TESTS ran the named tests" "rc\(kernels_policy_test\)=0" "$out6/summary.txt"
if grep -q "rc(kernels_attention_test)" "$out6/summary.txt"; then echo "FAIL: GPU_TESTS ran an unnamed test"; fail=1; fi
check "GPU_TESTS is recorded" "GPU_TESTS=kernels_policy_test gpu_faults_test" "$out6/cmd.txt"
check "the files past LAB_MAX_FILES are packed" "files packed into all.tgz" "$out6/summary.txt"
tar tzf "$out6/all.tgz" >"$tmp/packed.txt" 2>&1
check "all.tgz holds the scenario's output" "gpu-tests.txt" "$tmp/packed.txt"
if [ "$(find "$out6" -type f | wc -l)" != 3 ]; then echo "FAIL: packed folder holds $(ls "$out6")"; fail=1; fi

if [ $fail != 0 ]; then
  echo "--- summary.txt"; cat "$sum"; echo "--- lab.log"; tail -40 "$tmp/lab.log"
  exit 1
fi
echo "lab stub run: $(echo "$scenarios" | wc -w) scenarios passed"
