// A continuous-latent VAE decoder alone on the device (engine/vq_cuda/
// cuda_vae_decoder.h, NextStep-1's): a batch of latents of one size decoded
// to floats in one call, wall time around the call (it waits for its results,
// the floats copied back included), after a warm-up call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::bench {

struct VaeMicroRow {
  int32_t images = 0;
  double ms = 0;             // the batch's call
  int32_t chunk_images = 0;  // latents the decoder runs together (its workspace limit)
};

// side: the latent's side in latent pixels; z_channels latents of N(0, 1).
bool RunVaeMicro(const vqgan::VqganDecoderWeights& weights, const vqgan::VqganConfig& config, int32_t side,
                 const std::vector<int>& batches, bool tf32, std::vector<VaeMicroRow>* rows, std::string* error);

}  // namespace argen::bench
