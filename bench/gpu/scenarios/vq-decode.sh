# The VQ-16 decoder (384 px) at batch 1/16/64: argen's fp32 / TF32 / bf16 paths against PyTorch + cuDNN's decoder;
# then Emu3's vision decoder (720 px, random weights at the published shape) at batch 1/4/16, fp32 against bf16.
# VQ_DECODE_STEPS: which of "vq16 emu3" (default both).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="bench/gpu/torch_vq_bench.py (PyTorch + cuDNN: fp32, tf32, bf16, bf16 channels-last), same call"
NEEDS=""
case " ${VQ_DECODE_STEPS:-vq16 emu3} " in *" vq16 "*) NEEDS="$NEEDS argen_vq_bench" ;; esac
case " ${VQ_DECODE_STEPS:-vq16 emu3} " in *" emu3 "*) NEEDS="$NEEDS argen_emu3vq_bench" ;; esac
run_scenario() {
  local step
  for step in ${VQ_DECODE_STEPS:-vq16 emu3}; do
    case $step in
      vq16)
        stamp "argen_vq_bench 384 px"
        guarded 150 "$BIN/argen_vq_bench" --backend cuda --precision fp32,tf32,bf16 --batches 1,16,64 --runs 3 \
          --chunk 64 --workspace_mib 40000 --profile 1
        stamp "PyTorch + cuDNN 384 px"
        guarded 100 "$PYTHON" bench/gpu/torch_vq_bench.py --batches 1,16,64 --precisions fp32,tf32,bf16,bf16-cl ;;
      emu3)
        stamp "argen_emu3vq_bench 720 px"
        guarded 200 "$BIN/argen_emu3vq_bench" --precision fp32,bf16 --batches 1,4,16 --runs 3 --grid 90x90 \
          --chunk 16 --workspace_mib 60000 ;;
      *) echo "vq-decode: no step $step (vq16 emu3)" ;;
    esac
  done
}
summarize() { grep -h -E "^== |^cuda-[a-z0-9]+: |^torch|^# VQ|^Emu3 vision" "$1" | cut -c1-240; }
