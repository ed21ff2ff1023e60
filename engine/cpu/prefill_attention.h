// Causal self-attention of one row's prompt (or a chunk of it) during prefill,
// reading K/V from the row's KV block (already written for positions
// 0..first + len - 1).
#pragma once

#include <cstdint>

namespace argen::cpu {

struct PrefillAttentionArgs {
  int32_t len = 0;    // prompt tokens of the row in this call (a chunk)
  int32_t first = 0;  // the position of the first of them (chunked prefill); query i attends 0..first + i
  int32_t heads = 0, kv_heads = 0, head_dim = 0;
  const float* q = nullptr;  // token i, head h at q + i * q_stride + h * head_dim (RoPE applied)
  int64_t q_stride = 0;
  const float* k = nullptr;  // [kv_heads][kv_positions][head_dim]
  const float* v = nullptr;
  int64_t kv_positions = 0;  // positions per kv head in the block (prompt + slots)
  float scale = 0.0f;
  float* out = nullptr;  // token i, head h at out + i * out_stride + h * head_dim
  int64_t out_stride = 0;
  float* scratch = nullptr;  // first + len floats
};

void PrefillAttention(const PrefillAttentionArgs& a);

}  // namespace argen::cpu
