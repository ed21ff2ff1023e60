// Where a row lives in the CUDA backend's one device pool (kv_budget_bytes):
// one contiguous range holding its K/V region
// [K, V][layer][kv_head][prompt_len + n_slots][head_dim] in bf16 (kv_cache_dtype
// fp8: e4m3 codes and their scales, kernels/kv_fp8.h), then its
// sparsity policy state (ints, then floats; dense rows have none), then for
// a vector model (spec.output.token_dim > 0) the token vectors its pair's
// output stage made ([l_dec][token_dim] f32: kMadeVector inputs), each part
// 256-byte aligned. The KV manager (engine/kv/kv_manager.h) carves the pool in
// bytes, so the bytes a row takes (RowLayout::total) are exactly what the
// ledger counts.
// Host arithmetic only (tested on the host).
#pragma once

#include <cstdint>

#include "engine/model/backend.h"
#include "engine/model/model_spec.h"
#include "kernels/sparse/policy.h"

namespace argen::cuda {

inline constexpr int64_t kPoolAlignment = 256;

struct RowLayout {
  int64_t kv_bytes = 0;       // aligned
  int64_t ints_bytes = 0;     // aligned; 0 for dense rows
  int64_t floats_bytes = 0;   // aligned; 0 when the policy keeps no floats
  int64_t hidden_bytes = 0;   // aligned; a prompt row's last hidden state (f32), 0 otherwise
  int64_t vectors_bytes = 0;  // aligned; a vector model's made token vectors (f32), 0 otherwise
  int64_t total() const { return kv_bytes + ints_bytes + floats_bytes + hidden_bytes + vectors_bytes; }
};

// token_dim: spec.output.token_dim (0: a code model, no vectors).
RowLayout CudaRowLayout(const model::StackConfig& stack, int32_t prompt_len, const sparse::ResolvedPolicy& policy,
                        int32_t token_dim = 0);
// A prompt row (engine/model/backend.h): the prompt's K/V in `format`, then
// its last position's hidden state.
RowLayout CudaPromptRowLayout(const model::StackConfig& stack, int32_t prompt_len, sparse::KvFormat format);

// The CUDA device's row sizes (what the KV manager places): the totals above;
// a row sharing another's prompt KV holds its decode slots only.
class CudaRowSizer final : public model::RowSizer {
 public:
  explicit CudaRowSizer(const model::StackConfig& stack, int32_t token_dim = 0)
      : stack_(stack), token_dim_(token_dim) {}
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return CudaRowLayout(stack_, prompt_len, policy, token_dim_).total();
  }
  int64_t SharingRowBytes(int32_t /*prompt_len*/, const sparse::ResolvedPolicy& policy) const override {
    return CudaRowLayout(stack_, 0, policy, token_dim_).total();
  }
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override {
    return CudaPromptRowLayout(stack_, prompt_len, format).total();
  }

 private:
  model::StackConfig stack_;
  int32_t token_dim_ = 0;
};

}  // namespace argen::cuda
