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
// (below), and the code-sampling knobs, parallel decoding and previews do not
// apply.
inline bool MakesContinuousTokens(const ModelInfo& info) { return info.image_vocab == 0; }

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
