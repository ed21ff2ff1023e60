// A flow-matching token head alone on the device (engine/cuda/device_flow_head.h):
// one token per pair for `pairs` pairs, the head's whole launch sequence (the
// cond embedding, every sampler step's net and step kernel) captured as one
// CUDA graph, timed with CUDA events over replays. The share of a decode step
// the head takes is this time over the step's (argen_bench prints both).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_flow_head.h"
#include "engine/cuda/gemm.h"
#include "engine/model/flow_matching_head.h"

namespace argen::bench {

struct FlowHeadTiming {
  double graph_ms = 0;  // one call (every pair's token) replayed from a graph
  double eager_ms = 0;  // the same launches enqueued one by one
  bool finite = false;  // every drawn token finite
};

class FlowHeadMicro {
 public:
  // Uploads the head (its own copy: the backend's is private) for up to max_pairs pairs.
  static absl::StatusOr<std::unique_ptr<FlowHeadMicro>> Create(const model::FlowMatchingHeadDesc& desc,
                                                               int32_t max_pairs);
  ~FlowHeadMicro();

  // How the head runs its GEMMs and modulations (default: the head's default).
  void SetTuning(const cuda::FlowHeadTuning& tuning) { head_->set_tuning(tuning); }

  // Random conditions of the scale a random decoder gives (~1.4), guidance cfg_weight.
  absl::StatusOr<FlowHeadTiming> Time(int32_t pairs, float cfg_weight);

 private:
  FlowHeadMicro() = default;

  std::unique_ptr<cuda::DeviceFlowHead> head_;
  cudaStream_t stream_ = nullptr;
  cuda::Gemm gemm_;
  int32_t max_pairs_ = 0;
  cuda::DeviceBuffer conditions_, sampling_, tokens_, nonfinite_;
};

}  // namespace argen::bench
