// A CUDA graph of what a function enqueues on a stream, and the event timing
// the micro-benchmarks share: they replay graphs to time launches as the
// engine's graphed decode step runs them (no host enqueue between kernels).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::bench {

class CapturedGraph {
 public:
  // engine/cuda/graph_capture.h's CaptureGraph, owned.
  static absl::StatusOr<CapturedGraph> Capture(cudaStream_t stream, const std::function<absl::Status()>& enqueue,
                                               const char* what);
  CapturedGraph(CapturedGraph&& other) noexcept : exec_(other.exec_) { other.exec_ = nullptr; }
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph();

  absl::Status Launch(cudaStream_t stream) const;

 private:
  explicit CapturedGraph(cudaGraphExec_t exec) : exec_(exec) {}
  cudaGraphExec_t exec_ = nullptr;
};

// Milliseconds per call of `n` calls of `call` on `stream`, between two events.
absl::StatusOr<double> TimeCalls(cudaStream_t stream, int n, const std::function<absl::Status()>& call);

}  // namespace argen::bench
