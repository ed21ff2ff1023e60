// A continuous-token model's tokens (NextStep-1: each drawn as token_dim
// floats by the family's token head, engine/model/token_head.h) ride in the
// same [image][token] int32 arrays as code ids (RequestProgress::tokens,
// GroupState::tokens, Engine::DecodeImages), token_dim words per token, each
// word one float's bits. The arrays, the scheduler and the tools stay one
// type for both kinds of model, and the floats pass through unchanged (a bit
// copy, no rounding).
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace argen::engine {

// Whether `info`'s model makes continuous tokens: it has no codes to sample
// (image_vocab 0: the generic engine takes it from the backend's spec, where
// a vector model has no logits). Its progress then holds token vectors
// (below), and the code-sampling knobs and parallel decoding do not apply.
inline bool MakesContinuousTokens(const ModelInfo& info) { return info.image_vocab == 0; }

// What stands for a continuous token not made yet (a preview's rows still to
// come, scheduler/preview.h): every float 0. A continuous token is its VAE's
// latent in normalized form (NextStep-1: latent = unpatchify(token) /
// scaling_factor + shift_factor, each token LayerNormed without affine: mean
// 0, unit variance), so the zero token is the tokens' mean, the latent
// shift_factor everywhere: the VAE's mean latent, with no content of its own.
// The decoder being convolutional, it pulls the made rows' border pixels
// toward no continuation (a repeated last row, the code models' fill, would
// invent one). Its bits are the int32 word 0.
inline constexpr float kNeutralTokenValue = 0.0f;

// Appends `vector`'s floats to `words`, one word each.
inline void AppendTokenVector(std::span<const float> vector, std::vector<int32_t>* words) {
  for (float v : vector) words->push_back(std::bit_cast<int32_t>(v));
}

// The floats whose bits `words` holds.
inline std::vector<float> TokenVectorFloats(std::span<const int32_t> words) {
  std::vector<float> out(words.size());
  for (size_t i = 0; i < words.size(); ++i) out[i] = std::bit_cast<float>(words[i]);
  return out;
}

}  // namespace argen::engine
