// NaN/Inf checks on weights and logits.
//
// A checkpoint whose tensors hold NaN or Inf (a failed conversion, a corrupt
// download, a diverged fine-tune) would otherwise load and then sample from
// NaN logits: garbage images served as if they were fine. The checkpoint
// weight source (engine/model/weight_source.h, the one place a family's
// tensor map is read) checks every tensor once converted to f32; the image
// decoder reads its own tensors through FiniteWeightsView; each device checks
// the output stage's logits per step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "engine/checkpoint/checkpoint.h"

namespace argen::model {

// The index of the first NaN/Inf in `values` (by bit pattern, so compiler
// flags such as -ffast-math cannot fold it away), or -1.
int64_t FirstNonFinite(std::span<const float> values);

// INVALID_ARGUMENT "<file>: tensor '<name>': N of M values are NaN or Inf
// (first at index i): the checkpoint is corrupt" when any value is not finite.
absl::Status CheckFiniteTensor(const checkpoint::TensorInfo& tensor, std::span<const float> values);

// For rows read at request time (embedding rows at prefill): DATA_LOSS naming
// the tensor and the row id, since the server's data is at fault, not the
// request. `values` holds n_rows x width.
absl::Status CheckFiniteRows(const checkpoint::TensorInfo& tensor, const int32_t* rows, int64_t n_rows,
                             std::span<const float> values);

// `inner` with every LoadF32 / ReadRowsF32 checked as above (for readers
// outside the tensor map: the family's image decoder).
std::shared_ptr<const checkpoint::Checkpoint> FiniteWeightsView(std::shared_ptr<const checkpoint::Checkpoint> inner);

}  // namespace argen::model
