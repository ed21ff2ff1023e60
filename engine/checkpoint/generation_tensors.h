// The tensors text-to-image generation reads, by their official Janus names
// (janus/models/modeling_vlm.py, projector.py, vq_model.py), with the shapes
// a config implies. vision_model.*, aligner.*, lm_head and the VQ encoder are
// never needed and never checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/janus_config.h"

namespace argen::checkpoint {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Llama decoder, gen_embed, gen_aligner and gen_head.
std::vector<ExpectedTensor> LanguageGenerationTensors(const JanusConfig& config);
// gen_vision_model: codebook, post_quant_conv and the decoder.
std::vector<ExpectedTensor> VqDecoderTensors(const GenVisionConfig& vq);
// Both lists.
std::vector<ExpectedTensor> GenerationTensors(const JanusConfig& config);

// Every generation tensor exists with its shape; the error names the tensor,
// its file, the expected and the actual shape. Touches no tensor data.
absl::Status ValidateForGeneration(const Checkpoint& checkpoint, const JanusConfig& config);

}  // namespace argen::checkpoint
