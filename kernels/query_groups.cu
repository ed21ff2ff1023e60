#include "kernels/query_groups.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;

// Grouped head h' of a group -> (member slot, the member's own head).
struct GroupedHead {
  int slot, head;
};
__device__ __forceinline__ GroupedHead Ungroup(int grouped_head, int size, int group) {
  const int per_kv = size * group;  // grouped heads a KV head has
  const int kvh = grouped_head / per_kv, within = grouped_head % per_kv;
  return {within / group, kvh * group + within % group};
}

__global__ void GatherKernel(const float* q, const int32_t* members, int size, int heads, int kv_heads, int head_dim,
                             int64_t total, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int group = heads / kv_heads, grouped_heads = kv_heads * size * group;
  const int d = static_cast<int>(i % head_dim);
  const int64_t gh = i / head_dim;
  const int g = static_cast<int>(gh / grouped_heads);
  const GroupedHead h = Ungroup(static_cast<int>(gh % grouped_heads), size, group);
  const int token = members[static_cast<int64_t>(g) * size + h.slot];
  out[i] = token < 0 ? 0.f : q[(static_cast<int64_t>(token) * heads + h.head) * head_dim + d];
}

__global__ void ScatterKernel(const __nv_bfloat16* grouped, const int32_t* members, int size, int heads, int kv_heads,
                              int head_dim, int64_t total, __nv_bfloat16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int group = heads / kv_heads, grouped_heads = kv_heads * size * group;
  const int d = static_cast<int>(i % head_dim);
  const int64_t gh = i / head_dim;
  const int g = static_cast<int>(gh / grouped_heads);
  const GroupedHead h = Ungroup(static_cast<int>(gh % grouped_heads), size, group);
  const int token = members[static_cast<int64_t>(g) * size + h.slot];
  if (token >= 0) out[(static_cast<int64_t>(token) * heads + h.head) * head_dim + d] = grouped[i];
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
