#include "bench/gpu/flow_kernels_micro.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "bench/gpu/captured_graph.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gemm.h"
#include "kernels/flow_head_gemm.h"
#include "kernels/flow_head_kernels.h"

namespace argen::bench {
namespace {

constexpr int kChain = 96;     // launches in one graph
constexpr int kReplays = 5;    // timed replays (after two warm ones)
constexpr int kMaxRows = 256;  // the head's chunk: 2 x 128 pairs

using Enqueue = std::function<absl::Status(cudaStream_t)>;

// One launch's time in a chain of kChain captured in a graph.
absl::StatusOr<double> ChainMicroseconds(cudaStream_t stream, const Enqueue& enqueue) {
  ARGEN_STATUS_RETURN(enqueue(stream));  // warm-up outside the graph (cuBLAS picks its kernel)
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "kernel chain warm-up");
  absl::StatusOr<CapturedGraph> chain = CapturedGraph::Capture(
      stream,
      [&] {
        for (int i = 0; i < kChain; ++i) ARGEN_STATUS_RETURN(enqueue(stream));
        return absl::OkStatus();
      },
      "kernel chain graph");
  if (!chain.ok()) return chain.status();
  const auto replay = [&] { return chain->Launch(stream); };
  for (int i = 0; i < 2; ++i) ARGEN_STATUS_RETURN(replay());
  absl::StatusOr<double> ms = TimeCalls(stream, kReplays, replay);
  if (!ms.ok()) return ms.status();
  return 1e3 * *ms / kChain;
}

}  // namespace

absl::Status TimeFlowKernelChains(int width, const std::vector<int>& rows_list, std::vector<FlowKernelChainTime>* out) {
  const int W = width;
  const int64_t mod_width = 3 * int64_t{W};
  std::vector<cuda::DeviceBuffer> buffers;
  auto alloc = [&buffers](size_t bytes, const char* what) -> absl::StatusOr<char*> {
    absl::StatusOr<cuda::DeviceBuffer> b = cuda::DeviceBuffer::Allocate(bytes, what);
    if (!b.ok()) return b.status();
    ARGEN_CUDA_RETURN(cudaMemset(b->as(), 0x3c, bytes), what);  // finite bf16 and f32 values, never zeros
    buffers.push_back(*std::move(b));
    return buffers.back().as<char>();
  };
  absl::StatusOr<char*> x = alloc(size_t{2} * kMaxRows * W, "chain x"), w = alloc(size_t{2} * W * W, "chain w"),
                        y = alloc(size_t{4} * kMaxRows * W, "chain y"), h = alloc(size_t{4} * kMaxRows * W, "chain h"),
                        bias = alloc(size_t{4} * mod_width, "chain bias"),
                        mod = alloc(size_t{4} * kMaxRows * mod_width, "chain mod");
  for (const absl::StatusOr<char*>* p : {&x, &w, &y, &h, &bias, &mod}) {
    if (!p->ok()) return p->status();
  }
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(*x);
  const auto* wb = reinterpret_cast<const __nv_bfloat16*>(*w);
  auto* act = reinterpret_cast<__nv_bfloat16*>(*x);  // bf16 outputs overwrite the input: timing only
  float *yf = reinterpret_cast<float*>(*y), *hf = reinterpret_cast<float*>(*h), *bf = reinterpret_cast<float*>(*bias),
        *mf = reinterpret_cast<float*>(*mod);
  cudaStream_t stream = nullptr;
  ARGEN_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "chain stream");
  cuda::Gemm gemm;
  absl::Status status = gemm.Init(stream);
  for (int rows : rows_list) {
    if (!status.ok()) break;
    if (rows < 1 || rows > kMaxRows) {
      status = absl::InvalidArgumentError(absl::StrCat("kernel chains: ", rows, " rows, 1 to ", kMaxRows));
      break;
    }
    const kernels::FlowGemmArgs g = kernels::FlowLinearArgs(rows, xb, wb, W, W, bf, yf, nullptr);
    const kernels::FlowGemmArgs silu = kernels::FlowLinearArgs(rows, xb, wb, W, W, bf, nullptr, act);
    kernels::FlowResidualNormArgs rn;
    rn.h = hf;
    rn.rows = rows;
    rn.width = W;
    rn.y = yf;
    rn.y_bias = bf;
    rn.mod = mf;
    rn.mod_bias = bf;
    rn.mod_stride = mod_width;
    rn.gate_at = 2 * W;
    rn.shift_at = 0;
    rn.scale_at = W;
    rn.ln_weight = bf;
    rn.ln_bias = bf;
    rn.hn = act;
    const std::vector<std::pair<std::string, Enqueue>> kernels_to_time = {
        {rows <= kernels::kFlowGemvMaxRows ? "fc (fused: warp per column)" : "fc (fused: tensor-core tiles)",
         [&](cudaStream_t s) { return cuda::CudaStatus(kernels::FlowGemm(g, s), "fc"); }},
        {"fc + bias + SiLU (fused)",
         [&](cudaStream_t s) { return cuda::CudaStatus(kernels::FlowGemm(silu, s), "fc1"); }},
        {"fc (cuBLAS)", [&](cudaStream_t) { return gemm.Linear(xb, wb, rows, W, W, yf, 0.f, "fc cublas"); }},
        {"bias + SiLU",
         [&](cudaStream_t s) { return cuda::CudaStatus(kernels::FlowBiasSilu(yf, bf, rows, W, act, s), "silu"); }},
        {"residual + norm", [&](cudaStream_t s) { return cuda::CudaStatus(kernels::FlowResidualNorm(rn, s), "norm"); }},
    };
    for (const auto& [what, enqueue] : kernels_to_time) {
      absl::StatusOr<double> us = ChainMicroseconds(stream, enqueue);
      if (!us.ok()) {
        status = us.status();
        break;
      }
      out->push_back({what, rows, *us});
    }
  }
  cudaStreamSynchronize(stream);
  gemm.Reset();
  cudaStreamDestroy(stream);
  return status;
}

}  // namespace argen::bench
