// The tensors the VQ-16 decoder reads, by their official names
// (gen_vision_model.*: janus/models/vq_model.py) with the shapes its config
// implies: codebook, post_quant_conv and the decoder. The encoder, quant_conv
// and codebook_used are never needed. A family lists these in its tensor map
// so a checkpoint is validated in full before anything loads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/vq/vq_config.h"

namespace argen::vq {

struct VqTensor {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<VqTensor> VqDecoderTensors(const Vq16Config& vq);

}  // namespace argen::vq
