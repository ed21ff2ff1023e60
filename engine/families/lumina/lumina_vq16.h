// The Chameleon VQGAN's decoder is taming-transformers' decoder, the same
// network as VQ-16's (LlamaGen / Janus): codebook rows, post_quant_conv,
// conv_in, a middle block (ResNet, attention, ResNet), levels of ResNet blocks
// each followed by a nearest x2 upsample and a 3x3 conv, GroupNorm(32, 1e-6) +
// swish, conv_out, the same pixel conversion. So its weights, re-labelled into
// vq::VqDecoderWeights, run on engine/vq_cuda's GPU decoder (bf16 NHWC tensor
// cores, or fp32): square grids (that decoder's limit), attention in the
// middle block and wherever the levels have it, the codebook as stored (no l2
// normalisation). lumina_vq16_test checks the re-labelling on the CPU against
// engine/vqgan's decoder; lumina_cuda_test the GPU decoder against it.
#pragma once

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_weights.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::lumina {

// grid_side: codes per side of the (square) grids decoded. Errors (the
// network has no VQ-16 equivalent): attention off, upsampling without its
// conv, tanh output, a grid side over what the GPU decoder plans for.
absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> AsVq16(const vqgan::VqganDecoderWeights& weights,
                                                                       const vqgan::VqganConfig& config,
                                                                       int32_t grid_side);

}  // namespace argen::lumina
