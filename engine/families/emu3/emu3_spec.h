// The Emu3 decoder's tensor map: plain Llama (RMSNorm pre-norm, RoPE, GQA,
// SwiGLU, no biases), by each layout's names:
//   BAAI                      model.{embed_tokens, layers.{i}.*, norm}, lm_head
//   transformers (as saved)   text_model.model.*, text_model.lm_head, vqmodel.*
//   transformers (in memory)  model.text_model.*, lm_head, model.vqmodel.*
// The input stage is the embedding table itself (sampled logit v is token
// first_visual + v), the output stage lm_head's visual-token rows only.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/emu3/emu3_config.h"
#include "engine/model/model_spec.h"

namespace argen::emu3 {

struct Emu3TensorNames {
  std::string decoder;  // prefix of embed_tokens, layers, norm: "model.", "text_model.model.", "model.text_model."
  std::string lm_head;  // "lm_head.weight" or "text_model.lm_head.weight"
  std::string vq;       // the vision tokenizer's prefix in this checkpoint ("" for BAAI's own file)
};

// Which names the checkpoint uses, told by where its embedding table is
// (metadata only). NotFound naming the candidates when none is there.
absl::StatusOr<Emu3TensorNames> FindEmu3TensorNames(const checkpoint::Checkpoint& checkpoint, Emu3Layout layout);

// visual tokens: ids [first_visual, first_visual + codes).
absl::StatusOr<model::ModelSpec> Emu3Spec(const Emu3Config& config, const Emu3TensorNames& names, int32_t first_visual,
                                          int32_t codes);

}  // namespace argen::emu3
