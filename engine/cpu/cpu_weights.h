// The generation path's weights in f32, converted once at load. Projections
// that read the same input are fused so each is one GEMM: q|k|v and gate|up.
// The text embedding table is never materialised: rows are read on demand
// through a TextEmbeddings source (the checkpoint's ReadRowsF32).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/model/backend.h"

namespace argen::cpu {

struct LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> qkv;         // [(heads + 2 kv_heads) * head_dim, hidden]
  std::vector<float> o;           // [hidden, heads * head_dim]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_up;     // [2 * intermediate, hidden]
  std::vector<float> down;        // [hidden, intermediate]
};

// Fills out[n x hidden] with the embeddings of text token ids (already range-checked).
using TextEmbeddings = std::function<absl::Status(const int32_t* ids, int64_t n, float* out)>;

struct CpuWeights {
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;                    // [hidden]
  std::vector<float> gen_embed;                     // [image_vocab, image_embed_dim]
  std::vector<float> aligner_fc1_w, aligner_fc1_b;  // [hidden, image_embed_dim], [hidden]
  std::vector<float> aligner_fc2_w, aligner_fc2_b;  // [hidden, hidden], [hidden]
  std::vector<float> head_proj_w, head_proj_b;      // output_mlp_projector [head_embed, hidden]
  std::vector<float> head_out_w, head_out_b;        // vision_head [image_vocab, head_embed]
  TextEmbeddings text_embeddings;
};

// Loads and checks every tensor the generation path uses (errors name the
// tensor and the shapes). Keeps `checkpoint` alive for embedding lookups.
absl::StatusOr<CpuWeights> LoadCpuWeights(std::shared_ptr<const checkpoint::Checkpoint> checkpoint,
                                          const model::ModelDims& dims);

// Random weights of the right shapes (benchmarks): uniform with standard
// deviation `scale`, norms 1, embeddings hashed from the id (no table).
CpuWeights RandomCpuWeights(const model::ModelDims& dims, uint64_t seed, float scale);

}  // namespace argen::cpu
