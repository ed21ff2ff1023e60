// Counter-based random numbers for image-token sampling, identical on host and
// device. A draw is a pure function of (seed, image index, step): no state is
// carried between steps, so a request's image never depends on which other
// requests share its batch, on the batch order, or on the backend.
//
// Generator: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11), key = seed (64 bits), counter = (step, image_index, 0, 0).
// The uniform is the first output word's top 24 bits scaled to [0, 1).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ARGEN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ARGEN_HOST_DEVICE inline
#endif

namespace argen::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

ARGEN_HOST_DEVICE uint32_t MulHiLo32(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

// Ten Philox rounds over the 128-bit counter with a 64-bit key.
ARGEN_HOST_DEVICE Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = MulHiLo32(kMul0, counter.v[0], &hi0);
    const uint32_t lo1 = MulHiLo32(kMul1, counter.v[2], &hi1);
    counter = Philox4x32{{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// The uniform in [0, 1) that samples image token `step` (0-based, 0 is drawn
// from the prefill logits) of image `image_index` of a request seeded `seed`.
ARGEN_HOST_DEVICE float SampleUniform(uint64_t seed, uint32_t image_index, uint32_t step) {
  const Philox4x32 out = Philox4x32_10(Philox4x32{{step, image_index, 0u, 0u}}, static_cast<uint32_t>(seed),
                                       static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(out.v[0] >> 8) * (1.0f / 16777216.0f);
}

// Four standard normals for continuous-token sampling (NextStep-1's flow head):
// quad `quad` of noise draw `draw` for image token `step` of image
// `image_index`. Counter (step, image_index, 1 + draw, quad): word 2 >= 1
// keeps these apart from SampleUniform's counters. Box-Muller on the four
// outputs' top 24 bits, the first of each pair shifted into (0, 1] for the log.
ARGEN_HOST_DEVICE void SampleNormal4(uint64_t seed, uint32_t image_index, uint32_t step, uint32_t draw, uint32_t quad,
                                     float out[4]) {
  const Philox4x32 r = Philox4x32_10(Philox4x32{{step, image_index, draw + 1u, quad}}, static_cast<uint32_t>(seed),
                                     static_cast<uint32_t>(seed >> 32));
  constexpr float kInv24 = 1.0f / 16777216.0f, kTwoPi = 6.283185307179586f;
  for (int pair = 0; pair < 2; ++pair) {
    const float u1 = static_cast<float>((r.v[2 * pair] >> 8) + 1u) * kInv24;  // (0, 1]
    const float u2 = static_cast<float>(r.v[2 * pair + 1] >> 8) * kInv24;     // [0, 1)
    const float radius = sqrtf(-2.0f * logf(u1));
    out[2 * pair] = radius * cosf(kTwoPi * u2);
    out[2 * pair + 1] = radius * sinf(kTwoPi * u2);
  }
}

}  // namespace argen::kernels
