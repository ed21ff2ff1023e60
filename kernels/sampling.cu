// CFG + sampling: exact thresholds found by a bitwise search over the ordered
// float bits (32 counting passes over shared memory), so no sort is needed;
// temperature 0 is the argmax.
#include <cfloat>

#include "kernels/common.cuh"
#include "kernels/sampling.h"
#include "kernels/sampling_rng.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 1024;

// Monotonic map float -> uint32 (larger float, larger key) and back.
__device__ __forceinline__ uint32_t OrderedKey(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float FromOrderedKey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ int BlockSumInt(int v, int* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  int total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

__device__ double BlockSumDouble(double v, double* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

__global__ void __launch_bounds__(kThreads)
    CfgSampleKernel(const float* logits, int vocab, const PairSampling* params, int32_t* tokens) {
  extern __shared__ float vals[];  // [vocab]: logits, then probabilities
  __shared__ float fscratch[32];
  __shared__ int iscratch[32];
  __shared__ double dscratch[32];
  __shared__ int found, last_kept;
  const int pair = blockIdx.x, tid = threadIdx.x;
  const PairSampling sp = params[pair];
  const float* cond = logits + static_cast<int64_t>(2 * pair) * vocab;
  const float* uncond = cond + vocab;
  if (sp.temperature == 0.0f) {
    // Greedy (uniform per block): the first index of the largest guided logit,
    // rounded as on the host (no FMA contraction); NaNs never win, all
    // -inf/NaN gives 0, as engine/model/sampler.cc.
    float best = -INFINITY;
    int best_at = vocab;
    for (int v = tid; v < vocab; v += kThreads) {
      const float l = __fadd_rn(uncond[v], __fmul_rn(sp.cfg_weight, __fsub_rn(cond[v], uncond[v])));
      if (l > best) {
        best = l;
        best_at = v;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, o);
      const int other_at = __shfl_xor_sync(0xffffffffu, best_at, o);
      if (other > best || (other == best && other_at < best_at)) {
        best = other;
        best_at = other_at;
      }
    }
    __shared__ float warp_best[kThreads / 32];
    __shared__ int warp_at[kThreads / 32];
    if ((tid & 31) == 0) {
      warp_best[tid >> 5] = best;
      warp_at[tid >> 5] = best_at;
    }
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < kThreads / 32; ++w) {
        if (warp_best[w] > best || (warp_best[w] == best && warp_at[w] < best_at)) {
          best = warp_best[w];
          best_at = warp_at[w];
        }
      }
      tokens[pair] = best_at < vocab ? best_at : 0;
    }
    return;
  }
  const float inv_t = 1.0f / sp.temperature;
  for (int v = tid; v < vocab; v += kThreads) vals[v] = (uncond[v] + sp.cfg_weight * (cond[v] - uncond[v])) * inv_t;
  if (tid == 0) {
    found = vocab;
    last_kept = 0;
  }
  __syncthreads();

  // Top-k floor: the largest key x with count(logit >= x) >= k is the k-th largest logit.
  float floor_logit = -INFINITY;
  if (sp.top_k > 0 && sp.top_k < vocab) {
    uint32_t cur = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = cur | (1u << bit);
      int count = 0;
      for (int v = tid; v < vocab; v += kThreads) count += OrderedKey(vals[v]) >= cand;
      if (BlockSumInt(count, iscratch) >= sp.top_k) cur = cand;
    }
    floor_logit = FromOrderedKey(cur);
  }

  float mx = -INFINITY;
  for (int v = tid; v < vocab; v += kThreads)
    if (vals[v] >= floor_logit) mx = fmaxf(mx, vals[v]);
  mx = detail::BlockMax(mx, fscratch);
  double total = 0.0;
  for (int v = tid; v < vocab; v += kThreads) {
    const float p = vals[v] >= floor_logit ? expf(vals[v] - mx) : 0.0f;
    vals[v] = p;
    total += p;
  }
  total = BlockSumDouble(total, dscratch);
  const float inv_total = static_cast<float>(1.0 / total);
  for (int v = tid; v < vocab; v += kThreads) vals[v] *= inv_total;
  __syncthreads();

  // Top-p floor: the largest probability p* whose kept mass (p >= p*) reaches top_p.
  if (sp.top_p < 1.0f) {
    uint32_t cur = 0;  // probabilities are >= 0: their raw bits order like the values
    for (int bit = 30; bit >= 0; --bit) {
      const uint32_t cand = cur | (1u << bit);
      const float x = __uint_as_float(cand);
      double mass = 0.0;
      for (int v = tid; v < vocab; v += kThreads)
        if (vals[v] >= x) mass += vals[v];
      if (BlockSumDouble(mass, dscratch) >= sp.top_p) cur = cand;
    }
    const float floor_p = __uint_as_float(cur);
    double kept = 0.0;
    for (int v = tid; v < vocab; v += kThreads) {
      if (vals[v] < floor_p) vals[v] = 0.0f;
      kept += vals[v];
    }
    kept = BlockSumDouble(kept, dscratch);
    const float inv_kept = static_cast<float>(1.0 / kept);
    for (int v = tid; v < vocab; v += kThreads) vals[v] *= inv_kept;
    __syncthreads();
  }

  // Inverse CDF in vocabulary order: each thread owns a contiguous range.
  const int per = (vocab + kThreads - 1) / kThreads;
  const int lo = min(vocab, tid * per), hi = min(vocab, lo + per);
  double own = 0.0;
  int own_last = -1;
  for (int v = lo; v < hi; ++v) {
    own += vals[v];
    if (vals[v] > 0.0f) own_last = v;
  }
  // Exclusive prefix over threads (double, like the host's running sum).
  __shared__ double prefix[kThreads];
  prefix[tid] = own;
  __syncthreads();
  for (int o = 1; o < kThreads; o <<= 1) {
    const double add = tid >= o ? prefix[tid - o] : 0.0;
    __syncthreads();
    prefix[tid] += add;
    __syncthreads();
  }
  const double mass = prefix[kThreads - 1];
  const double target = static_cast<double>(kernels::SampleUniform(sp.seed, static_cast<uint32_t>(sp.image_index),
                                                                   static_cast<uint32_t>(sp.step))) *
                        mass;
  double cumulative = prefix[tid] - own;
  if (own_last >= 0) atomicMax(&last_kept, own_last);
  if (cumulative + own > target) {
    for (int v = lo; v < hi; ++v) {
      if (vals[v] <= 0.0f) continue;
      cumulative += vals[v];
      if (cumulative > target) {
        atomicMin(&found, v);
        break;
      }
    }
  }
  __syncthreads();
  if (tid == 0) tokens[pair] = found < vocab ? found : last_kept;
}

}  // namespace

cudaError_t CfgSample(const float* logits, int32_t pairs, int32_t vocab, const PairSampling* params, int32_t* tokens,
                      cudaStream_t stream) {
  if (pairs <= 0) return cudaSuccess;
  if (vocab <= 0 || vocab > kMaxSampleVocab) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(CfgSampleKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(kMaxSampleVocab * sizeof(float)));
  if (attr != cudaSuccess) return attr;
  CfgSampleKernel<<<pairs, kThreads, vocab * sizeof(float), stream>>>(logits, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace argen::kernels
