#include "bench/gpu/captured_graph.h"

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/graph_capture.h"

namespace argen::bench {

absl::StatusOr<CapturedGraph> CapturedGraph::Capture(cudaStream_t stream, const std::function<absl::Status()>& enqueue,
                                                     const char* what) {
  absl::StatusOr<cudaGraphExec_t> exec = cuda::CaptureGraph(stream, enqueue, what);
  if (!exec.ok()) return exec.status();
  return CapturedGraph(*exec);
}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = other.exec_;
    other.exec_ = nullptr;
  }
  return *this;
}

CapturedGraph::~CapturedGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
}

absl::Status CapturedGraph::Launch(cudaStream_t stream) const {
  ARGEN_CUDA_RETURN(cudaGraphLaunch(exec_, stream), "graph launch");
  return absl::OkStatus();
}

absl::StatusOr<double> TimeCalls(cudaStream_t stream, int n, const std::function<absl::Status()>& call) {
  cudaEvent_t a = nullptr, b = nullptr;
  ARGEN_CUDA_RETURN(cudaEventCreate(&a), "event");
  if (cudaError_t e = cudaEventCreate(&b); e != cudaSuccess) {
    cudaEventDestroy(a);
    ARGEN_CUDA_RETURN(e, "event");
  }
  absl::Status s = absl::OkStatus();
  float ms = 0;
  if (cudaEventRecord(a, stream) != cudaSuccess) s = absl::InternalError("event record");
  for (int i = 0; s.ok() && i < n; ++i) s = call();
  if (s.ok() && cudaEventRecord(b, stream) != cudaSuccess) s = absl::InternalError("event record");
  if (s.ok() && cudaEventSynchronize(b) != cudaSuccess) s = absl::InternalError("event sync");
  if (s.ok()) cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!s.ok()) return s;
  return static_cast<double>(ms) / n;
}

}  // namespace argen::bench
