// LlamaGen's GPT (gpt.py Transformer, c2i) as a model::ModelSpec: the class
// table cls_embedding.embedding_table is the prompt table (a prompt is one
// class row: the class, or num_classes for guidance); tok_embeddings is the
// input table; fused wqkv read as three row blocks; SwiGLU w1 (gate), w3
// (up), w2 (down); RMSNorm; untied `output`; 2-D RoPE on the image grid
// (model::RopeKind::kGrid2d).
#pragma once

#include "absl/status/statusor.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/model/model_spec.h"

namespace argen::llamagen {

absl::StatusOr<model::ModelSpec> LlamaGenSpec(const LlamaGenConfig& config);

}  // namespace argen::llamagen
