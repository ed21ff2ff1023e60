// Decode attention (dense and sparse), split-K partial softmax and its combine.
//
// One block of 128 threads per (token, kv_head, split). A key is handled by
// head_dim/8 lanes holding 8 dims each (16-byte loads), so a block walks
// 128/(head_dim/8) keys at a time; the G query heads sharing the kv head reuse
// each loaded key. Scores live in shared memory between the two passes.
#include <algorithm>

#include "kernels/attention.h"
#include "kernels/common.cuh"

namespace argen::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

struct WorkspaceView {
  float* m;       // [tokens][heads][splits]
  float* l;       // [tokens][heads][splits]
  float* acc;     // [tokens][heads][splits][head_dim]
  float* logits;  // [tokens][heads][probs_stride] (probs requested and splits > 1)
};

__host__ __device__ inline WorkspaceView View(void* ws, int tokens, int heads, int head_dim,
                                               int splits) {
  WorkspaceView v;
  float* f = static_cast<float*>(ws);
  const int64_t part = static_cast<int64_t>(tokens) * heads * splits;
  v.m = f;
  v.l = f + part;
  v.acc = f + 2 * part;
  v.logits = v.acc + part * head_dim;
  return v;
}

// Region position of virtual key j, or -1 when a slot index is out of the region.
__device__ __forceinline__ int KeyPosition(int j, const TokenMeta& m, const int32_t* idx) {
  if (j < m.prefix_len) return j;
  const int e = j - m.prefix_len;
  const int pos = m.decode_base + (idx ? idx[e] : e);
  return (pos >= 0 && pos < m.capacity) ? pos : -1;
}

struct MinEntry {
  float v;
  int e;
};

__device__ __forceinline__ MinEntry Smaller(MinEntry a, MinEntry b) {
  return (b.v < a.v || (b.v == a.v && b.e < a.e)) ? b : a;
}

// Block-wide argmin; returns the winning entry to every thread.
__device__ MinEntry BlockArgmin(MinEntry x, MinEntry* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MinEntry y;
    y.v = __shfl_xor_sync(0xffffffffu, x.v, o);
    y.e = __shfl_xor_sync(0xffffffffu, x.e, o);
    x = Smaller(x, y);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = x;
  __syncthreads();
  MinEntry best = scratch[0];
  for (int w = 1; w < kWarps; ++w) best = Smaller(best, scratch[w]);
  return best;
}

template <int HD, int G>
__global__ void __launch_bounds__(kThreads) AttentionKernel(AttentionArgs a) {
  constexpr int kLanesPerKey = HD / 8;
  constexpr int kKeysPerIter = kThreads / kLanesPerKey;
  extern __shared__ float smem[];
  float* scores = smem;                                          // [G][chunk]
  int* positions = reinterpret_cast<int*>(smem + G * a.chunk);   // [chunk]
  float* reduce = smem + (G + 1) * a.chunk;                      // [kWarps][G][HD]
  __shared__ float scratch[32];
  __shared__ MinEntry min_scratch[kWarps];
  __shared__ float s_m[G], s_l[G];

  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  TokenMeta m = a.meta[t];
  const bool sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
  if (sparse && a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
  m.decode_count = max(m.decode_count, 0);
  const int n = m.prefix_len + m.decode_count;
  const int begin = split * a.chunk;
  const int len = max(0, min(n, begin + a.chunk) - begin);
  const int tid = threadIdx.x, sub = tid % kLanesPerKey, slot = tid / kLanesPerKey;
  const int64_t layer_stride = static_cast<int64_t>(a.kv_heads) * m.capacity * HD;
  const bf16* k_base = a.kv_pool + m.kv_offset + a.layer * layer_stride +
                       static_cast<int64_t>(kvh) * m.capacity * HD;
  const bf16* v_base = k_base + static_cast<int64_t>(a.num_layers) * layer_stride;
  const int32_t* idx =
      sparse ? a.decode_idx + (static_cast<int64_t>(t) * a.kv_heads + kvh) * a.idx_stride
                   : nullptr;
  const bool want_probs = sparse && a.probs != nullptr && m.decode_count <= a.probs_stride;
  const bool split_logits = a.splits > 1 && want_probs;
  WorkspaceView ws = View(a.workspace, a.tokens, a.heads, HD, a.splits);

  float q[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qp = a.q + (static_cast<int64_t>(t) * a.heads + kvh * G + g) * HD + sub * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) q[g][i] = qp[i] * a.scale;
  }

  // Pass 1: scores of every key of the chunk.
  for (int base = 0; base < len; base += kKeysPerIter * kUnroll) {
    detail::Bf16x8 kv[kUnroll];
    int pos[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * kKeysPerIter + slot;
      pos[u] = j < len ? KeyPosition(begin + j, m, idx) : -1;
      if (pos[u] >= 0) kv[u] = detail::Load8(k_base + static_cast<int64_t>(pos[u]) * HD + sub * 8);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[8];
      if (pos[u] >= 0) {
        detail::Unpack8(kv[u], k);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) k[i] = 0.f;
      }
      const int j = base + u * kKeysPerIter + slot;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s += q[g][i] * k[i];
#pragma unroll
        for (int o = kLanesPerKey / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (sub == 0 && j < len) {
          const float logit = pos[u] >= 0 ? s : -INFINITY;
          scores[g * a.chunk + j] = logit;
          if (split_logits && begin + j >= m.prefix_len)
            ws.logits[(static_cast<int64_t>(t) * a.heads + kvh * G + g) * a.probs_stride +
                      (begin + j - m.prefix_len)] = logit;
        }
      }
      if (sub == 0 && j < len) positions[j] = pos[u];
    }
  }
  __syncthreads();

  // Pass 2: softmax statistics per query head; scores become exp(s - max).
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int j = tid; j < len; j += kThreads) mx = fmaxf(mx, scores[g * a.chunk + j]);
    mx = detail::BlockMax(mx, scratch);
    float sum = 0.f;
    for (int j = tid; j < len; j += kThreads) {
      const float s = scores[g * a.chunk + j];
      const float p = (mx == -INFINITY) ? 0.f : __expf(s - mx);
      scores[g * a.chunk + j] = p;
      sum += p;
    }
    sum = detail::BlockSum(sum, scratch);
    if (tid == 0) {
      s_m[g] = mx;
      s_l[g] = sum;
    }
  }
  __syncthreads();

  // Pass 3: probability-weighted values.
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.f;
  for (int base = 0; base < len; base += kKeysPerIter * kUnroll) {
    detail::Bf16x8 vv[kUnroll];
    int pos[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * kKeysPerIter + slot;
      pos[u] = j < len ? positions[j] : -1;
      if (pos[u] >= 0) vv[u] = detail::Load8(v_base + static_cast<int64_t>(pos[u]) * HD + sub * 8);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (pos[u] < 0) continue;
      const int j = base + u * kKeysPerIter + slot;
      float v[8];
      detail::Unpack8(vv[u], v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = scores[g * a.chunk + j];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] += p * v[i];
      }
    }
  }
  // Reduce over the key slots of a warp, then over warps through shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int o = 16; o >= kLanesPerKey; o >>= 1)
        acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
  const int warp = tid >> 5, lane = tid & 31;
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int i = 0; i < 8; ++i) reduce[(warp * G + g) * HD + sub * 8 + i] = acc[g][i];
  }
  __syncthreads();
  for (int e = tid; e < G * HD; e += kThreads) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += reduce[w * G * HD + e];
    const int g = e / HD, d = e % HD;
    const int h = kvh * G + g;
    if (a.splits == 1) {
      const float l = s_l[g];
      a.out[(static_cast<int64_t>(t) * a.heads + h) * HD + d] = __float2bfloat16(l > 0.f ? total / l : 0.f);
    } else {
      const int64_t part = (static_cast<int64_t>(t) * a.heads + h) * a.splits + split;
      ws.acc[part * HD + d] = total;
      if (d == 0) {
        ws.m[part] = s_m[g];
        ws.l[part] = s_l[g];
      }
    }
  }

  // Fused observe outputs when the whole key set is in this block.
  if (a.splits == 1 && want_probs) {
    float* probs = a.probs + (static_cast<int64_t>(t) * a.kv_heads + kvh) * a.probs_stride;
    MinEntry best{INFINITY, -1};
    for (int e = tid; e < m.decode_count; e += kThreads) {
      float p = 0.f;
#pragma unroll
      for (int g = 0; g < G; ++g) p += s_l[g] > 0.f ? scores[g * a.chunk + m.prefix_len + e] / s_l[g] : 0.f;
      p *= 1.f / G;
      probs[e] = p;
      best = Smaller(best, MinEntry{p, e});
    }
    best = BlockArgmin(best, min_scratch);
    if (a.argmin != nullptr && tid == 0)
      a.argmin[static_cast<int64_t>(t) * a.kv_heads + kvh] = best.e;
  }
}

// Merges the split partial softmaxes of one (token, kv_head): output, probs, argmin.
template <int HD, int G>
__global__ void __launch_bounds__(kThreads) CombineKernel(AttentionArgs a) {
  __shared__ float s_m[G], s_l[G];
  __shared__ MinEntry min_scratch[kWarps];
  const int t = blockIdx.x, kvh = blockIdx.y, tid = threadIdx.x;
  WorkspaceView ws = View(a.workspace, a.tokens, a.heads, HD, a.splits);
  if (tid < G) {
    const int64_t base = (static_cast<int64_t>(t) * a.heads + kvh * G + tid) * a.splits;
    float mx = -INFINITY;
    for (int s = 0; s < a.splits; ++s) mx = fmaxf(mx, ws.m[base + s]);
    float l = 0.f;
    if (mx != -INFINITY)
      for (int s = 0; s < a.splits; ++s) l += ws.l[base + s] * __expf(ws.m[base + s] - mx);
    s_m[tid] = mx;
    s_l[tid] = l;
  }
  __syncthreads();
  for (int e = tid; e < G * HD; e += kThreads) {
    const int g = e / HD, d = e % HD;
    const int h = kvh * G + g;
    const int64_t base = (static_cast<int64_t>(t) * a.heads + h) * a.splits;
    float total = 0.f;
    if (s_m[g] != -INFINITY)
      for (int s = 0; s < a.splits; ++s)
        total += ws.acc[(base + s) * HD + d] * __expf(ws.m[base + s] - s_m[g]);
    a.out[(static_cast<int64_t>(t) * a.heads + h) * HD + d] =
        __float2bfloat16(s_l[g] > 0.f ? total / s_l[g] : 0.f);
  }
  if (a.probs == nullptr) return;
  TokenMeta m = a.meta[t];
  if (!(m.flags & kTokenSparse) || a.decode_idx == nullptr) return;
  if (a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
  if (m.decode_count > a.probs_stride) return;
  float* probs = a.probs + (static_cast<int64_t>(t) * a.kv_heads + kvh) * a.probs_stride;
  MinEntry best{INFINITY, -1};
  for (int e = tid; e < m.decode_count; e += kThreads) {
    float p = 0.f;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float logit = ws.logits[(static_cast<int64_t>(t) * a.heads + kvh * G + g) * a.probs_stride + e];
      p += (s_l[g] > 0.f && logit != -INFINITY) ? __expf(logit - s_m[g]) / s_l[g] : 0.f;
    }
    p *= 1.f / G;
    probs[e] = p;
    best = Smaller(best, MinEntry{p, e});
  }
  best = BlockArgmin(best, min_scratch);
  if (a.argmin != nullptr && tid == 0) a.argmin[static_cast<int64_t>(t) * a.kv_heads + kvh] = best.e;
}

size_t SharedBytes(int head_dim, int group, int chunk) {
  return (static_cast<size_t>(group + 1) * chunk + static_cast<size_t>(kWarps) * group * head_dim) *
         sizeof(float);
}

template <int HD, int G>
cudaError_t Launch(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = SharedBytes(HD, G, a.chunk);
  static const cudaError_t attr = cudaFuncSetAttribute(
      AttentionKernel<HD, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(SharedBytes(HD, G, kMaxAttentionChunk)));
  if (attr != cudaSuccess) return attr;
  dim3 grid(a.tokens, a.kv_heads, a.splits);
  AttentionKernel<HD, G><<<grid, kThreads, smem, stream>>>(a);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || a.splits == 1) return err;
  CombineKernel<HD, G><<<dim3(a.tokens, a.kv_heads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <int HD>
cudaError_t LaunchGroup(const AttentionArgs& a, int group, cudaStream_t stream) {
  switch (group) {
    case 1: return Launch<HD, 1>(a, stream);
    case 2: return Launch<HD, 2>(a, stream);
    case 4: return Launch<HD, 4>(a, stream);
    case 8: return Launch<HD, 8>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool AttentionShapeSupported(int32_t heads, int32_t kv_heads, int32_t head_dim) {
  if (kv_heads <= 0 || heads % kv_heads != 0) return false;
  const int group = heads / kv_heads;
  return (head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128) &&
         (group == 1 || group == 2 || group == 4 || group == 8);
}

void ChooseAttentionSplits(int32_t tokens, int32_t kv_heads, int32_t max_keys, int32_t sm_count,
                           int32_t* splits, int32_t* chunk) {
  const int64_t pairs = std::max<int64_t>(1, static_cast<int64_t>(tokens) * kv_heads);
  const int64_t target = 2 * static_cast<int64_t>(std::max(sm_count, 1));
  const int32_t keys = std::max(max_keys, 1);
  int64_t s = std::max<int64_t>(1, (target + pairs - 1) / pairs);
  s = std::min<int64_t>(s, std::max(1, keys / 64));  // chunks of at least 64 keys
  s = std::max<int64_t>(s, (keys + kMaxAttentionChunk - 1) / kMaxAttentionChunk);
  int64_t c = (keys + s - 1) / s;
  c = (c + 31) / 32 * 32;
  c = std::min<int64_t>(c, kMaxAttentionChunk);
  s = (keys + c - 1) / c;
  *splits = static_cast<int32_t>(s);
  *chunk = static_cast<int32_t>(c);
}

size_t AttentionWorkspaceBytes(int32_t tokens, int32_t heads, int32_t head_dim, int32_t splits,
                               int32_t probs_stride) {
  if (splits <= 1) return 0;
  const size_t part = static_cast<size_t>(tokens) * heads * splits;
  return (2 * part + part * head_dim + static_cast<size_t>(tokens) * heads * probs_stride) *
         sizeof(float);
}

cudaError_t DecodeAttention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tokens <= 0) return cudaSuccess;
  if (!AttentionShapeSupported(a.heads, a.kv_heads, a.head_dim)) return cudaErrorInvalidValue;
  if (a.splits < 1 || a.chunk <= 0 || a.chunk > kMaxAttentionChunk) return cudaErrorInvalidValue;
  if (a.splits > 1 && a.workspace == nullptr) return cudaErrorInvalidValue;
  if (a.decode_idx != nullptr && a.idx_stride <= 0) return cudaErrorInvalidValue;
  if (a.probs != nullptr && a.probs_stride <= 0) return cudaErrorInvalidValue;
  const int group = a.heads / a.kv_heads;
  switch (a.head_dim) {
    case 16: return LaunchGroup<16>(a, group, stream);
    case 32: return LaunchGroup<32>(a, group, stream);
    case 64: return LaunchGroup<64>(a, group, stream);
    case 128: return LaunchGroup<128>(a, group, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace argen::kernels
