// CPU-only hook for characterization (tools/characterize): receives every
// query head's attention distribution at every decode step.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/model/backend.h"

namespace argen::cpu {

struct AttentionObservation {
  int32_t layer = 0;
  int32_t head = 0;      // query head
  model::RowId row = 0;  // backend row (cond/uncond rows of a request are allocated in that order)
  int32_t step = 0;      // decode position t of the query token (image token t is its input)
  int32_t prompt_len = 0;
  // Softmax weights: the prompt keys (positions 0..prompt_len-1) first, then
  // the attended decode keys in the policy's order. Under the dense policy
  // these are all decode positions 0..t, oldest first.
  std::span<const float> probs;
  std::span<const int32_t> decode_positions;  // decode position of each attended decode key
};

// Called synchronously from Decode(); the spans are valid only during the call.
using AttentionObserver = std::function<void(const AttentionObservation&)>;

}  // namespace argen::cpu
