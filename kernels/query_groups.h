// Query groups: several decode queries of one row (a dense row decoding
// t, t+1, ... in one pass, or parallel decoding's rows in flight) attend
// nested key sets, so one attention launch can read the row's K/V once for
// all of them, as it does for the query heads sharing a KV head (GQA).
//
// A group of `size` member slots holds up to `size` queries (tokens) of one
// row; slot p's token is members[group * size + p], or -1 (an empty slot).
// Gathered, the group is one attention token with kv_heads * size * G query
// heads (G = heads / kv_heads): head kvh * size * G + p * G + g is head
// kvh * G + g of member p. Its TokenMeta is the member with the most keys,
// and AttentionArgs::key_limits (span G) gives member p its own key count,
// so member p attends exactly the keys it would alone (kernels/attention.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// q: [tokens][heads][head_dim] (RoPE applied); out: [groups][kv_heads * size * G][head_dim]
// (zeros for empty slots).
cudaError_t GatherQueryGroups(const float* q, const int32_t* members, int32_t groups, int32_t size, int32_t heads,
                              int32_t kv_heads, int32_t head_dim, float* out, cudaStream_t stream);

// The inverse for the attention output: grouped [groups][kv_heads * size * G][head_dim]
// to out[token][heads][head_dim] for every filled slot (empty slots are dropped).
cudaError_t ScatterQueryGroups(const __nv_bfloat16* grouped, const int32_t* members, int32_t groups, int32_t size,
                               int32_t heads, int32_t kv_heads, int32_t head_dim, __nv_bfloat16* out,
                               cudaStream_t stream);

}  // namespace argen::kernels
