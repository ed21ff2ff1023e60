// Per-token description of where a token's K/V live and what it attends,
// shared by the RoPE/KV-append and the attention kernels. One entry per query
// token: a decode row contributes one token a step, a prefill prompt one per
// prompt token. Built on the host, copied to the device once per step.
#pragma once

#include <cstdint>

namespace argen::kernels {

// The KV pool holds, per row, a region laid out as
//   K: [layer][kv_head][capacity][head_dim], then V with the same shape,
// capacity = L_p + n_slots (prompt positions first, then the policy's slots).
//
// Prompt-KV sharing: a row whose first `shared_prompt` prompt positions live
// in another row's region (its prompt owner: the same prompt, one copy) reads
// them there, at prompt_kv_offset / prompt_capacity; its own region then holds
// only what follows (capacity = L_p - shared_prompt + n_slots). Key positions
// the kernels compute are virtual: p < shared_prompt is position p of the
// prompt region, p >= shared_prompt position p - shared_prompt of the row's
// own region. kv_index and decode_base are own-region positions.
struct TokenMeta {
  int64_t kv_offset = 0;         // element offset of the row's region in the pool
  int32_t capacity = 0;          // positions per (layer, kv_head) of the row's region
  int32_t rope_pos = 0;          // row of the rotary table: the position (2-D RoPE: RopePosition)
  int32_t kv_index = 0;          // own-region position its K/V are written to; < 0: not written
  int32_t prefix_len = 0;        // virtual positions [0, prefix_len) are always attended
  int32_t decode_base = 0;       // own-region position of decode slot 0 (= L_p - shared_prompt)
  int32_t decode_count = 0;      // dense: slots [0, count) attended; sparse: index-list length
  int32_t flags = 0;             // kTokenSparse / kTokenListed: attend a slot list, not [0, decode_count)
  int32_t shared_prompt = 0;     // leading prompt positions read from the prompt owner's region
  int32_t prompt_capacity = 0;   // positions per (layer, kv_head) of the owner's region
  int32_t list_offset = 0;       // kTokenListed: its slot list at AttentionArgs::token_lists + list_offset
  int64_t prompt_kv_offset = 0;  // element offset of the owner's region (shared_prompt > 0)
};
static_assert(sizeof(TokenMeta) == 56, "TokenMeta is copied as a flat array");

// The token attends the policy's slot list (per kv head: AttentionArgs::decode_idx
// and, when given, AttentionArgs::counts) and writes its K/V to the policy's slot
// (RopeAppendArgs::write_slots) instead of kv_index.
constexpr int32_t kTokenSparse = 1;
// The token attends the decode slots listed at AttentionArgs::token_lists +
// list_offset (decode_count of them, the same for every layer and kv head)
// and writes its K/V to kv_index like a dense token: a dense row decoding out
// of order (parallel decoding, engine/model/step_plan.h), whose written slots
// have holes.
constexpr int32_t kTokenListed = 8;
// The row's region is in fp8 (kernels/kv_fp8.h): e4m3 codes and per-vector
// scales instead of bf16; kv_offset is still in bf16 elements (2 bytes).
constexpr int32_t kTokenKvFp8 = 2;

// Which KV formats a launch's tokens use (AttentionArgs / RopeAppendArgs::kv_formats);
// 0 means bf16 only.
constexpr int32_t kKvFormatsBf16 = 1;
constexpr int32_t kKvFormatsFp8 = 2;
// ... and whether any of them reads its prompt from another row's region
// (shared_prompt > 0): only then does the launch take the attention kernels
// that can, which hold two regions' bases (more registers; attention.cu's
// WarpMinBlocks keeps the warp kernel's occupancy for MHA bf16 rows); the
// others ignore shared_prompt.
constexpr int32_t kKvSharedPrompts = 4;

}  // namespace argen::kernels
