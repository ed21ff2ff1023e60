#include "kernels/query_groups.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;

// Element i of the grouped layout [groups][kv_heads * size * group][head_dim]
// -> the same element of its member token in [tokens][heads][head_dim], or -1
// for an empty slot.
__device__ __forceinline__ int64_t MemberElement(int64_t i, const int32_t* members, int size, int heads, int kv_heads,
                                                 int head_dim) {
  const int group = heads / kv_heads, per_kv = size * group, grouped_heads = kv_heads * per_kv;
  const int d = static_cast<int>(i % head_dim);
  const int64_t gh = i / head_dim;
  const int64_t g = gh / grouped_heads;
  const int within_group = static_cast<int>(gh % grouped_heads);
  const int kvh = within_group / per_kv, within_kv = within_group % per_kv;
  const int slot = within_kv / group, head = kvh * group + within_kv % group;
  const int token = members[g * size + slot];
  return token < 0 ? -1 : (static_cast<int64_t>(token) * heads + head) * head_dim + d;
}

__global__ void GatherKernel(const float* q, const int32_t* members, int size, int heads, int kv_heads, int head_dim,
                             int64_t total, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t e = MemberElement(i, members, size, heads, kv_heads, head_dim);
  out[i] = e < 0 ? 0.f : q[e];
}

__global__ void ScatterKernel(const __nv_bfloat16* grouped, const int32_t* members, int size, int heads, int kv_heads,
                              int head_dim, int64_t total, __nv_bfloat16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t e = MemberElement(i, members, size, heads, kv_heads, head_dim);
  if (e >= 0) out[e] = grouped[i];
}

bool Valid(int32_t groups, int32_t size, int32_t heads, int32_t kv_heads, int32_t head_dim) {
  return groups >= 0 && size > 0 && kv_heads > 0 && heads % kv_heads == 0 && head_dim > 0;
}

}  // namespace

cudaError_t GatherQueryGroups(const float* q, const int32_t* members, int32_t groups, int32_t size, int32_t heads,
                              int32_t kv_heads, int32_t head_dim, float* out, cudaStream_t stream) {
  if (!Valid(groups, size, heads, kv_heads, head_dim)) return cudaErrorInvalidValue;
  const int64_t total = static_cast<int64_t>(groups) * size * heads * head_dim;
  if (total == 0) return cudaSuccess;
  GatherKernel<<<static_cast<int>((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      q, members, size, heads, kv_heads, head_dim, total, out);
  return cudaGetLastError();
}

cudaError_t ScatterQueryGroups(const __nv_bfloat16* grouped, const int32_t* members, int32_t groups, int32_t size,
                               int32_t heads, int32_t kv_heads, int32_t head_dim, __nv_bfloat16* out,
                               cudaStream_t stream) {
  if (!Valid(groups, size, heads, kv_heads, head_dim)) return cudaErrorInvalidValue;
  const int64_t total = static_cast<int64_t>(groups) * size * heads * head_dim;
  if (total == 0) return cudaSuccess;
  ScatterKernel<<<static_cast<int>((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      grouped, members, size, heads, kv_heads, head_dim, total, out);
  return cudaGetLastError();
}

}  // namespace argen::kernels
