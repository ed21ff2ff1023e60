// Validation of a Prefill or Decode batch (engine/model/backend.h contract)
// against the CPU backend's live rows, before any state changes. Errors are
// InvalidArgument naming the field and index at fault.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/cpu/kv_rows.h"
#include "engine/model/backend.h"

namespace argen::cpu {

// On success `rows` holds the KvRow of every batch entry, in batch order.
absl::Status CheckPrefillBatch(const model::PrefillBatch& batch, const model::StepOutputs& out,
                               int32_t max_batch_rows, int32_t text_vocab, KvRows& kv,
                               std::vector<KvRow*>* rows);
absl::Status CheckDecodeBatch(const model::DecodeBatch& batch, const model::StepOutputs& out,
                              int32_t max_batch_rows, int32_t image_vocab, KvRows& kv,
                              std::vector<KvRow*>* rows);

}  // namespace argen::cpu
