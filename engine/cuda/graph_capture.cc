#include "engine/cuda/graph_capture.h"

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace argen::cuda {

absl::StatusOr<cudaGraphExec_t> CaptureGraph(cudaStream_t stream, const std::function<absl::Status()>& enqueue,
                                             const char* what) {
  ARGEN_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                    absl::StrCat("begin capture of ", what));
  const absl::Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return enqueued;
  }
  ARGEN_CUDA_RETURN(ended, absl::StrCat("end capture of ", what));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  ARGEN_CUDA_RETURN(made, absl::StrCat("instantiate ", what));
  return exec;
}

}  // namespace argen::cuda
