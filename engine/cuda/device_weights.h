// A ModelSpec's weights on the device: matrices and embedding tables in bf16
// (q|k|v and gate|up fused, one GEMM each), or with weight_dtype fp8 the
// layers' four projections as e4m3 codes and per-channel scales
// (kernels/fp8_linear.h, quantized on the device from the bf16 values); norms
// and biases in f32; all in one allocation. Loaded tensor by tensor from a WeightSource (no host copy of
// the whole model). The text embedding table stays on the host: prefill reads
// a few rows through the source.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gemm.h"
#include "engine/model/model_spec.h"
#include "engine/model/weight_format.h"
#include "engine/model/weight_source.h"

namespace argen::cuda {

using bf16 = __nv_bfloat16;

struct DeviceNorm {
  const float* weight = nullptr;
  const float* bias = nullptr;  // LayerNorm; null: RMSNorm
};

struct DeviceLayer {
  DeviceNorm input_norm;
  LinearWeight qkv;                 // [(heads + 2 kv_heads) * head_dim, hidden]
  const float* qkv_bias = nullptr;  // [(heads + 2 kv_heads) * head_dim] (stack.qkv_bias); null: none
  LinearWeight o;                   // [hidden, heads * head_dim]
  DeviceNorm q_norm, k_norm;        // [heads (kv_heads) * head_dim]; qk_norm only
  DeviceNorm post_norm;
  LinearWeight gate_up;  // [2 * intermediate, hidden]
  LinearWeight down;     // [hidden, intermediate]
};

struct DeviceWeights {
  DeviceBuffer storage;
  std::vector<DeviceLayer> layers;
  DeviceNorm final_norm;
  const bf16* input_table = nullptr;  // [input rows, input width]
  const bf16* fc1_w = nullptr;
  const float* fc1_b = nullptr;  // null: no input MLP
  const bf16* fc2_w = nullptr;
  const float* fc2_b = nullptr;
  const bf16* projector_w = nullptr;
  const float* projector_b = nullptr;  // null: no projector
  const bf16* head_w = nullptr;
  const float* head_b = nullptr;  // head_b null: no bias
  // Vector models (spec.output.token_dim > 0; no table or head when absent).
  const bf16* vector_in_w = nullptr;  // [hidden, token_dim]
  const float* vector_in_b = nullptr;
  const bf16* vector_out_w = nullptr;  // [vector_head_in, hidden] (the CUDA backend requires it)
  const float* vector_out_b = nullptr;
  model::WeightFormat format = model::WeightFormat::kAuto;
  int64_t bytes = 0;
};

// Converts the source's f32 tensors (shapes are the spec's) and uploads them.
absl::StatusOr<DeviceWeights> UploadWeights(const model::ModelSpec& spec, const model::WeightSource& source,
                                            model::WeightFormat format = model::WeightFormat::kAuto);

// Random weights generated on the device (benchmarks): matrices uniform with
// standard deviation `scale`, norm weights 1, biases 0. Nothing crosses the bus.
// With fp8 the same bf16 values are made, then quantized.
absl::StatusOr<DeviceWeights> RandomDeviceWeights(const model::ModelSpec& spec, uint64_t seed, float scale,
                                                  model::WeightFormat format = model::WeightFormat::kAuto);

// What fp8 needs of the spec: every layer projection's input width a multiple
// of 16 (the fp8 GEMM's alignment); an InvalidArgument naming the width if not.
absl::Status CheckFp8Shapes(const model::ModelSpec& spec);

}  // namespace argen::cuda
