#include "engine/cuda/row_layout.h"

namespace argen::cuda {
namespace {

int64_t Aligned(int64_t bytes) { return (bytes + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment; }

}  // namespace

RowLayout CudaRowLayout(const model::StackConfig& d, int32_t prompt_len, const sparse::ResolvedPolicy& policy) {
  const int64_t heads = int64_t{d.num_layers} * d.num_kv_heads;
  RowLayout l;
  l.kv_bytes = Aligned(2 * heads * (int64_t{prompt_len} + policy.n_slots) * d.head_dim * 2);
  if (policy.kind != sparse::PolicyKind::kDense) {
    const sparse::PolicyLayout layout = sparse::LayoutFor(policy);
    l.ints_bytes = Aligned(heads * layout.ints_per_head * 4);
    l.floats_bytes = Aligned(heads * layout.floats_per_head * 4);
  }
  return l;
}

}  // namespace argen::cuda
