// The flow head's kernels one at a time (kernels/flow_head_gemm.h,
// kernels/flow_head_kernels.h, the cuBLAS GEMM it uses for many rows): a
// chain of launches of one kernel captured in a CUDA graph, each launched as
// the head launches it (programmatic dependents where it does), timed over
// replays. The head runs ~40 such kernels 51 times a token one after
// another, so a kernel's time in a chain, not its bandwidth, is what the
// head's time is made of: these lines say which kernel the gap is in.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace argen::bench {

struct FlowKernelChainTime {
  std::string kernel;  // what ran, e.g. "fc gemv (fused)"
  int rows = 0;
  double us = 0;  // one launch, averaged over the chain
};

// width: the head's (1536 published), rows: the row counts to time (each <= 256).
absl::Status TimeFlowKernelChains(int width, const std::vector<int>& rows, std::vector<FlowKernelChainTime>* out);

}  // namespace argen::bench
