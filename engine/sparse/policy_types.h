// Plain policy types shared by host and device code. No absl, no std
// containers: this header is included by CUDA kernels through policy.h.
#pragma once

#include <cstdint>

namespace argen::sparse {

enum class PolicyKind : int32_t {
  kDense = 0,
  kSlidingWindow = 1,
  kStreamingLlm = 2,
  kH2O = 3,
  kTova = 4,
  kAlisa = 5,
  kDiagonal = 6,
  kDiagonalSink4 = 7,
};

// Parameters as requested. Zero/negative fields mean "derive the default".
struct PolicyParams {
  PolicyKind kind = PolicyKind::kDense;
  double sparsity = 0.0;   // fraction of decode KV NOT attended per step, in [0, 1)
  int32_t n_att = 0;       // decode keys attended per step; 0: round((1 - sparsity) * L_dec)
  int32_t n_recent = 0;    // diagonal's recent window N_r; 0: round(0.5 * L_dec)
  int32_t n_sink = -1;     // sink tokens; -1: the policy's default (4 for streaming_llm / diagonal_sink4)
};

// Parameters after defaults are applied and validated for a given decode length.
// See docs/policies.md for what each field means per policy.
struct ResolvedPolicy {
  PolicyKind kind = PolicyKind::kDense;
  int32_t l_dec = 0;       // decode tokens whose KV may be kept (image tokens per image)
  int32_t n_att = 0;       // decode keys attended per step (upper bound)
  int32_t n_slots = 0;     // decode KV slots resident per row, the memory bound
  int32_t n_sink = 0;      // first decode tokens kept and always attended (streaming_llm, diagonal_sink4)
  int32_t n_recent = 0;    // diagonal*: recent window N_r (sinks included);
                           // h2o/alisa: most recent positions protected from eviction
};

}  // namespace argen::sparse
