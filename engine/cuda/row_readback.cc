// Testing: a row's own K/V region copied back from the device pool
// (CudaBackend::CopyRowKv), so that tests can compare what steps wrote.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/kv_fp8.h"

namespace argen::cuda {

absl::StatusOr<std::vector<uint8_t>> CudaBackend::CopyRowKv(model::RowId id) {
  const model::RowState* state = lookup_(id);
  if (state == nullptr) return absl::InvalidArgumentError(absl::StrCat("CopyRowKv: row ", id, " is not a live row"));
  const Row& row = static_cast<const Row&>(*state);
  const model::StackConfig& d = spec_.stack;
  const int64_t vectors = int64_t{d.num_layers} * d.num_kv_heads * row.capacity;  // per K or V
  const int64_t bytes = row.policy.kv_format == sparse::KvFormat::kFp8E4m3
                            ? kernels::Fp8Region(d.num_layers, d.num_kv_heads, row.capacity, d.head_dim).total
                            : 2 * vectors * d.head_dim * int64_t{sizeof(bf16)};
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "copy row kv: the queued steps");
  ARGEN_CUDA_RETURN(cudaMemcpy(out.data(), pool_.as<char>() + row.kv_offset * int64_t{sizeof(bf16)}, out.size(),
                               cudaMemcpyDeviceToHost),
                    "copy row kv");
  return out;
}

}  // namespace argen::cuda
