// Capturing a CUDA graph: what `enqueue` puts on `stream`, captured
// thread-locally and instantiated. The engine's decode graphs, the
// micro-benchmarks and the GEMM tests all capture this way.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::cuda {

// The capture ends whatever `enqueue` returns (an error from it comes back
// as is); `what` names the graph in CUDA errors. The caller owns the
// executable graph (cudaGraphExecDestroy).
absl::StatusOr<cudaGraphExec_t> CaptureGraph(cudaStream_t stream, const std::function<absl::Status()>& enqueue,
                                             const char* what);

}  // namespace argen::cuda
