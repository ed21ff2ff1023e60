// Causal self-attention of one row's prompt during prefill, reading K/V from
// the row's KV block (already written for positions 0..len-1).
#pragma once

#include <cstdint>

namespace argen::cpu {

struct PrefillAttentionArgs {
  int32_t len = 0;  // prompt tokens of the row
  int32_t heads = 0, kv_heads = 0, head_dim = 0;
  const float* q = nullptr;  // token i, head h at q + i * q_stride + h * head_dim (RoPE applied)
  int64_t q_stride = 0;
  const float* k = nullptr;  // [kv_heads][kv_positions][head_dim]
  const float* v = nullptr;
  int64_t kv_positions = 0;  // positions per kv head in the block (prompt + slots)
  float scale = 0.0f;
  float* out = nullptr;  // token i, head h at out + i * out_stride + h * head_dim
  int64_t out_stride = 0;
  float* scratch = nullptr;  // len floats
};

void PrefillAttention(const PrefillAttentionArgs& a);

}  // namespace argen::cpu
