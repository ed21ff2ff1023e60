// A ModelSpec's weights in the CPU backend's layout: f32, converted once at
// load from a WeightSource (engine/model/weight_source.h). Projections that
// read the same input are fused so each is one GEMM: q|k|v and gate|up. The
// text embedding table is never materialised: prefill reads its rows through
// the source.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_spec.h"
#include "engine/model/weight_format.h"
#include "engine/model/weight_source.h"

namespace argen::cpu {

// A norm's weight, and its bias for LayerNorm (empty for RMSNorm).
struct NormWeights {
  std::vector<float> weight, bias;
};

struct LayerWeights {
  NormWeights input_norm;
  std::vector<float> qkv;       // [(heads + 2 kv_heads) * head_dim, hidden]
  std::vector<float> qkv_bias;  // [(heads + 2 kv_heads) * head_dim] (stack.qkv_bias), else empty
  std::vector<float> o;         // [hidden, heads * head_dim]
  NormWeights q_norm;           // [heads * head_dim] each (qk_norm only)
  NormWeights k_norm;           // [kv_heads * head_dim] each
  NormWeights post_norm;
  std::vector<float> gate_up;  // [2 * intermediate, hidden]
  std::vector<float> down;     // [hidden, intermediate]
};

// A Linear's weight [out, in] and bias [out] (empty: none).
struct LinearWeights {
  std::vector<float> weight, bias;
};

struct CpuWeights {
  model::WeightFormat format = model::WeightFormat::kAuto;
  std::vector<LayerWeights> layers;
  NormWeights final_norm;
  std::vector<float> input_table;                     // [input rows, input width]
  LinearWeights input_fc1, input_fc2;                 // empty: the table row is the input
  LinearWeights projector;                            // empty: none
  LinearWeights head;                                 // [logits, head_in]; empty: a vector model's
  LinearWeights vector_in, vector_out;                // vector models (model_spec.h); empty: none
  std::shared_ptr<const model::WeightSource> source;  // text embedding rows
};

// Loads every tensor the spec names for the CPU layout (errors name the
// tensor). With fp8 the layers' projections hold what their e4m3 codes give
// back (bf16, then per output channel through e4m3: the CUDA backend's fp8
// weights, dequantized).
absl::StatusOr<CpuWeights> LoadCpuWeights(const model::ModelSpec& spec,
                                          std::shared_ptr<const model::WeightSource> source,
                                          model::WeightFormat format = model::WeightFormat::kAuto);

}  // namespace argen::cpu
