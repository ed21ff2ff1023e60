// The generation path's weights on the device: matrices in bf16 (q|k|v and
// gate|up fused, as the CPU backend fuses them), norms and biases in f32, all
// in one allocation. The text embedding table stays on the host (prefill reads
// a few rows through the CPU weights' TextEmbeddings).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_weights.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/backend.h"

namespace argen::cuda {

using bf16 = __nv_bfloat16;

struct DeviceLayer {
  const float* input_norm = nullptr;
  const bf16* qkv = nullptr;      // [(heads + 2 kv_heads) * head_dim, hidden]
  const bf16* o = nullptr;        // [hidden, heads * head_dim]
  const float* post_norm = nullptr;
  const bf16* gate_up = nullptr;  // [2 * intermediate, hidden]
  const bf16* down = nullptr;     // [hidden, intermediate]
};

struct DeviceWeights {
  DeviceBuffer storage;
  std::vector<DeviceLayer> layers;
  const float* final_norm = nullptr;
  const bf16* gen_embed = nullptr;                    // [image_vocab, image_embed_dim]
  const bf16* fc1_w = nullptr; const float* fc1_b = nullptr;  // [hidden, image_embed_dim]
  const bf16* fc2_w = nullptr; const float* fc2_b = nullptr;  // [hidden, hidden]
  const bf16* head_proj_w = nullptr; const float* head_proj_b = nullptr;  // [head_embed, hidden]
  const bf16* head_out_w = nullptr; const float* head_out_b = nullptr;    // [image_vocab, head_embed]
  int64_t bytes = 0;
};

// Converts the CPU backend's f32 weights (already shape-checked) and uploads them.
absl::StatusOr<DeviceWeights> UploadWeights(const cpu::CpuWeights& w, const model::ModelDims& dims);

// Random weights generated on the device (benchmarks): matrices uniform with
// standard deviation `scale`, norms 1, biases 0. Nothing crosses the bus.
absl::StatusOr<DeviceWeights> RandomDeviceWeights(const model::ModelDims& dims, uint64_t seed,
                                                  float scale);

}  // namespace argen::cuda
