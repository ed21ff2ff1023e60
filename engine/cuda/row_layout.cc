#include "engine/cuda/row_layout.h"

#include "kernels/kv_fp8.h"

namespace argen::cuda {
namespace {

int64_t Aligned(int64_t bytes) { return (bytes + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment; }

}  // namespace

RowLayout CudaRowLayout(const model::StackConfig& d, int32_t prompt_len, const sparse::ResolvedPolicy& policy,
                        int32_t token_dim) {
  const int64_t heads = int64_t{d.num_layers} * d.num_kv_heads;
  RowLayout l;
  const int32_t capacity = prompt_len + policy.n_slots;
  l.kv_bytes = policy.kv_format == sparse::KvFormat::kFp8E4m3
                   ? Aligned(kernels::Fp8Region(d.num_layers, d.num_kv_heads, capacity, d.head_dim).total)
                   : Aligned(2 * heads * int64_t{capacity} * d.head_dim * 2);
  if (policy.kind != sparse::PolicyKind::kDense) {
    const sparse::PolicyLayout layout = sparse::LayoutFor(policy);
    l.ints_bytes = Aligned(heads * layout.ints_per_head * 4);
    l.floats_bytes = Aligned(heads * layout.floats_per_head * 4);
  }
  // Both rows of a pair take the room (the sizer cannot tell them apart); the cond row's is used.
  if (token_dim > 0) l.vectors_bytes = Aligned(int64_t{policy.l_dec} * token_dim * 4);
  return l;
}

RowLayout CudaPromptRowLayout(const model::StackConfig& d, int32_t prompt_len, sparse::KvFormat format) {
  sparse::ResolvedPolicy prompt_only;  // dense, no decode slots
  prompt_only.kv_format = format;
  RowLayout l = CudaRowLayout(d, prompt_len, prompt_only);
  l.hidden_bytes = Aligned(int64_t{d.hidden_size} * 4);
  return l;
}

}  // namespace argen::cuda
