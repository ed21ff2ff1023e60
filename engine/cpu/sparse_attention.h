// CPU decode attention of one row and one layer, all heads, over the prompt
// KV plus a gathered list of decode slots (the policy's attended set). Cost is
// O((L_p + n_attended) * head_dim) per head: slots not attended are never read.
//
// KV layout of one row (the CPU backend follows it):
//   K, V: [layer][kv_head][L_p + n_slots][head_dim] f32, row-major.
//   Positions 0..L_p-1 hold the prompt, L_p + s holds decode slot s.
// This function receives the [kv_head][L_p + n_slots][head_dim] block of one
// layer.
//
// GQA: query head h uses kv head h / (heads / kv_heads). The attended list is
// per kv head; all query heads of a group attend the same slots.
#pragma once

#include <cstdint>

namespace argen::cpu {

struct DecodeAttentionShape {
  int32_t heads = 0;     // query heads
  int32_t kv_heads = 0;  // divides heads
  int32_t head_dim = 0;
  int32_t prompt_len = 0;  // L_p, always attended in full
  int32_t n_slots = 0;     // decode slots per kv head (policy n_slots)
};

struct DecodeAttentionIo {
  const float* q = nullptr;  // [heads][head_dim], RoPE applied
  const float* k = nullptr;  // [kv_heads][prompt_len + n_slots][head_dim]
  const float* v = nullptr;  // same layout as k
  // Optional (prompt-KV sharing): the prompt's K and V, [kv_heads] blocks of
  // prompt_head_stride floats, each [prompt_len][head_dim]; k and v then hold
  // the decode slots only, [kv_heads][n_slots][head_dim].
  const float* prompt_k = nullptr;
  const float* prompt_v = nullptr;
  int64_t prompt_head_stride = 0;
  // attended[kvh * attended_stride + i], i < counts[kvh]: decode slot indices.
  const int32_t* attended = nullptr;
  const int32_t* counts = nullptr;  // [kv_heads]
  int32_t attended_stride = 0;      // >= every count (the policy's max_attended)
  float scale = 0.0f;               // usually 1/sqrt(head_dim)

  float* out = nullptr;  // [heads][head_dim]
  // Optional: softmax weight of attended[kvh][i] over prompt + attended keys,
  // averaged over the group's query heads: [kv_heads][attended_stride].
  // This is what sparse::ObserveStep consumes.
  float* attended_probs = nullptr;
  // Optional: full per-query-head weights, prompt keys first then attended
  // slots in list order: [heads][prompt_len + attended_stride] (observers).
  float* head_probs = nullptr;
  // Required scratch of DecodeAttentionScratchFloats(shape, attended_stride) floats, so the
  // hot loop never allocates.
  float* scratch = nullptr;
};

// Scratch floats DecodeAttention needs.
int64_t DecodeAttentionScratchFloats(const DecodeAttentionShape& shape, int32_t attended_stride);

// Numerically stable softmax attention (max subtracted before exp, f32).
// Preconditions (checked by the caller once per request):
// shape fields positive except prompt_len >= 0, every attended slot in
// [0, n_slots), at least one key per head (prompt_len + count > 0).
void DecodeAttention(const DecodeAttentionShape& shape, const DecodeAttentionIo& io);

}  // namespace argen::cpu
