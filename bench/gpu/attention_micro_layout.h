// The attention micro-benchmark's buffers (attention_micro.h), laid out as the
// CUDA backend lays out a decode step's (engine/cuda/cuda_backend_forward.cc):
// per row one KV region of K and V for every layer and KV head; per layer the
// sparse slot lists [rows][kv_heads][stride], their lengths [rows][kv_heads]
// and the observe probabilities [rows][kv_heads][stride] (probs_stride ==
// idx_stride). Host code, so that the layout and the byte count are tested on
// the CPU.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace argen::bench {

struct AttentionMicroShape {
  int32_t rows = 0;  // CFG rows (2 per image)
  int32_t heads = 0, kv_heads = 0, head_dim = 0;
  int32_t layers = 4;  // layers the launches rotate over (so that repeated launches miss in L2)
  int32_t prompt_len = 0, l_dec = 0;
  int32_t n_att = 0, n_slots = 0;  // the sparse policy's attended keys and resident slots
};

struct AttentionMicroLayout {
  int32_t capacity = 0;         // KV positions per row: L_p + L_dec (dense) or L_p + n_slots (sparse)
  int64_t region = 0;           // bf16 elements of one row's region: 2 x layers x kv_heads x capacity x head_dim
  int32_t stride = 0;           // idx_stride and probs_stride: max(n_att, 1)
  int64_t lists_per_layer = 0;  // slot lists of one layer: rows x kv_heads (also the counts and probs rows)
  int32_t keys = 0;             // keys of each (row, kv head): L_p + L_dec (dense) or L_p + n_att (sparse)
  // Bytes one launch moves: K and V of every key once per (row, KV head), as
  // bf16 (a KV head's query heads share them); sparse adds its slot list read
  // and probabilities written (4 bytes per attended entry each).
  double bytes = 0;
};

// INVALID_ARGUMENT naming the size when one is not positive, heads is not a
// multiple of kv_heads, or n_att exceeds n_slots.
absl::StatusOr<AttentionMicroLayout> LayOutAttentionMicro(const AttentionMicroShape& shape, bool sparse);

}  // namespace argen::bench
