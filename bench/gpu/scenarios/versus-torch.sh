# argen_bench 7B at 16/64/128 images against the careful PyTorch loop (torch_janus_loop.py, bf16) in the same call.
# The device's python3 holds torch (nothing can be installed there); PYTHON overrides it.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="bench/gpu/torch_janus_loop.py (bf16, one CUDA graph a step), same call, same GPU, after argen_bench"
NEEDS="argen_bench"
run_scenario() {
  stamp "argen_bench 7B 16/64/128, dense and diagonal 95% N_r 64, bf16 and fp8 weights"
  guarded 170 "$BIN/argen_bench" --model 7b --batches 16,64,128 --policies dense,diagonal:0.95:64 \
    --weight-dtype auto,fp8
  stamp "careful PyTorch loop (bf16), 7B 16/64/128"
  guarded 110 "$PYTHON" bench/gpu/torch_janus_loop.py --model 7b --batches 16,64,128
}
# Both print: model policy images prefill_s decode_s step_ms [last_ms] img/s | ...; img/s is the field before "|".
summarize() {
  grep -h -E "^== |^7b " "$1" | cut -c1-200
  awk '$1 == "7b" { for (i = 1; i <= NF; i++) if ($i == "|") { v = $(i - 1); break }
         if ($2 == "torch-loop") loop[$3] = v; else { argen[$2, $3] = v; pol[$2] = 1; n[$3] = 1 } }
       END { for (p in pol) { line = ""
               split("1 16 64 128 256", bs, " "); for (k = 1; k <= 5; k++) { b = bs[k]; if (!(b in n)) continue; if (loop[b] > 0 && argen[p, b] > 0) line = line sprintf(" %s images %.2fx", b, argen[p, b] / loop[b]) }
               if (line != "") print "against the loop, " p ":" line } }' "$1" | sort
}
