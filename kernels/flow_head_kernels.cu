// The device flow head's small kernels (kernels/flow_head_kernels.h), in the
// CPU reference's order of operations (engine/families/nextstep/flow_head.cc):
// LayerNorm statistics accumulate in double, as the CPU's do.
#include "kernels/flow_head_kernels.h"
#include "kernels/pdl.cuh"
#include "kernels/sampling_rng.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr float kLayerNormEps = 1e-6f;

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }

// Block-wide double sum (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ double BlockSumDouble(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Row r's LayerNorm mean and 1 / sqrt(var + eps) (biased variance), as the CPU's LayerNormRows.
__device__ void RowStats(const float* in, int width, double* scratch, float* mean_out, float* inv_out) {
  double sum = 0;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sum += in[i];
  const double mean = BlockSumDouble(sum, scratch) / width;
  double sq = 0;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sq += (in[i] - mean) * (in[i] - mean);
  const double var = BlockSumDouble(sq, scratch) / width;
  *inv_out = static_cast<float>(1.0 / sqrt(var + kLayerNormEps));
  *mean_out = static_cast<float>(mean);
}

__global__ void SiluConditionKernel(const float* temb, const float* c_emb, int64_t total, int64_t per_time, int width,
                                    bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t k = i / per_time, r = i % per_time;  // time k; element r of c_emb
  out[i] = __float2bfloat16(Silu(temb[k * width + r % width] + c_emb[r]));
}

__global__ void PairRowsKernel(const float* x, int64_t total, int dim, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over pairs * dim
  if (i >= total) return;
  const int64_t p = i / dim, j = i % dim;
  const bf16 v = __float2bfloat16(x[i]);
  out[(2 * p) * dim + j] = v;
  out[(2 * p + 1) * dim + j] = v;
}

__global__ void BiasSiluKernel(const float* x, const float* bias, int64_t total, int n, bf16* out) {
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) out[i] = __float2bfloat16(Silu(x[i] + bias[i % n]));
}

// Up to kResidualNormPerThread * kThreads wide: each thread holds its elements in registers, and everything
// that does not come from the kernels just before is read before the wait. The modulations come from the
// side stream's GEMM, a full (event) dependency of the chain's first kernel, so they are complete whenever a
// kernel of the chain runs; the biases and norm weights are constants. Loads are issued together, not one
// element at a time behind each store (the stores to h could alias every input).
constexpr int kResidualNormPerThread = 8;

__global__ void __launch_bounds__(kThreads) ResidualNormKernel(FlowResidualNormArgs a) {
  __shared__ double scratch[32];
  extern __shared__ float row[];  // width floats: h after the residual
  pdl::AllowDependents();
  constexpr int kPer = kResidualNormPerThread;
  const int64_t r = blockIdx.x;
  const float* mod = a.mod + r * a.mod_stride;
  const bool residual = a.y != nullptr, norm = a.hn != nullptr, affine = a.ln_weight != nullptr;
  float gate[kPer] = {}, y_bias[kPer] = {}, scale[kPer] = {}, shift[kPer] = {}, lw[kPer] = {}, lb[kPer] = {};
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= a.width) continue;
    if (residual) {
      gate[j] = mod[a.gate_at + i] + a.mod_bias[a.gate_at + i];
      y_bias[j] = a.y_bias[i];
    }
    if (norm) {
      scale[j] = mod[a.scale_at + i] + a.mod_bias[a.scale_at + i];
      shift[j] = mod[a.shift_at + i] + a.mod_bias[a.shift_at + i];
      if (affine) {
        lw[j] = a.ln_weight[i];
        lb[j] = a.ln_bias[i];
      }
    }
  }
  pdl::WaitForPrerequisites();
  float* h = a.h + r * a.width;
  float v[kPer] = {}, y[kPer] = {};
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= a.width) continue;
    v[j] = h[i];
    if (residual) y[j] = a.y[r * a.width + i];
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= a.width) continue;
    if (residual) {
      v[j] += gate[j] * (y[j] + y_bias[j]);
      h[i] = v[j];
    }
    row[i] = v[j];
  }
  __syncthreads();
  if (!norm) return;
  float mean, inv;
  RowStats(row, a.width, scratch, &mean, &inv);
  bf16* o = a.hn + r * a.width;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= a.width) continue;
    float n = (v[j] - mean) * inv;
    if (affine) n = n * lw[j] + lb[j];
    o[i] = __float2bfloat16(n * (1.0f + scale[j]) + shift[j]);
  }
}

// Wider rows: the same in a loop over the row.
__global__ void ResidualNormLoopKernel(FlowResidualNormArgs a) {
  __shared__ double scratch[32];
  extern __shared__ float row[];  // width floats: h after the residual
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const int64_t r = blockIdx.x;
  float* h = a.h + r * a.width;
  const float* mod = a.mod + r * a.mod_stride;
  for (int i = threadIdx.x; i < a.width; i += blockDim.x) {
    float v = h[i];
    if (a.y != nullptr) {
      const float gate = mod[a.gate_at + i] + a.mod_bias[a.gate_at + i];
      v += gate * (a.y[r * a.width + i] + a.y_bias[i]);
      h[i] = v;
    }
    row[i] = v;
  }
  __syncthreads();
  if (a.hn == nullptr) return;
  float mean, inv;
  RowStats(row, a.width, scratch, &mean, &inv);
  bf16* o = a.hn + r * a.width;
  for (int i = threadIdx.x; i < a.width; i += blockDim.x) {
    float y = (row[i] - mean) * inv;
    if (a.ln_weight != nullptr) y = y * a.ln_weight[i] + a.ln_bias[i];
    const float scale = mod[a.scale_at + i] + a.mod_bias[a.scale_at + i];
    const float shift = mod[a.shift_at + i] + a.mod_bias[a.shift_at + i];
    o[i] = __float2bfloat16(y * (1.0f + scale) + shift);
  }
}

// Four standard normals of quad q of pair p's draw `draw`: elements 4q .. 4q + 3.
__device__ __forceinline__ void Noise4(const PairSampling& s, uint32_t draw, int q, float out[4]) {
  SampleNormal4(s.seed, static_cast<uint32_t>(s.image_index), static_cast<uint32_t>(s.step), draw,
                static_cast<uint32_t>(q), out);
}

__global__ void StartNoiseKernel(const PairSampling* sampling, int pairs, int dim, float* x) {
  const int quads = (dim + 3) / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over pairs * quads
  if (i >= static_cast<int64_t>(pairs) * quads) return;
  const int p = static_cast<int>(i / quads), q = static_cast<int>(i % quads);
  float w[4];
  Noise4(sampling[p], 0u, q, w);
  for (int j = 0; j < 4 && 4 * q + j < dim; ++j) x[static_cast<int64_t>(p) * dim + 4 * q + j] = w[j];
}

// Pair p's guided velocity at element e.
__device__ __forceinline__ float GuidedVelocity(const float* v_rows, int p, int dim, int e, float cfg) {
  const float vc = v_rows[(2 * static_cast<int64_t>(p)) * dim + e];
  const float vu = v_rows[(2 * static_cast<int64_t>(p) + 1) * dim + e];
  return cfg > 1.0f ? vu + cfg * (vc - vu) : vc;
}

__global__ void EulerStepKernel(float* x, const float* v_rows, const PairSampling* sampling, int pairs, int dim,
                                FlowStep s, bf16* x_in) {
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const int quads = (dim + 3) / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(pairs) * quads) return;
  const int p = static_cast<int>(i / quads), q = static_cast<int>(i % quads);
  const PairSampling ps = sampling[p];
  float w[4];
  Noise4(ps, s.draw, q, w);
  for (int j = 0; j < 4 && 4 * q + j < dim; ++j) {
    const int e = 4 * q + j;
    float* xe = x + static_cast<int64_t>(p) * dim + e;
    const float v = GuidedVelocity(v_rows, p, dim, e, ps.cfg_weight);
    const float score = (s.t * v - *xe) / s.var;
    const float drift = v + s.sigma * score;
    *xe = (*xe + drift * s.dt) + s.diffusion * (w[j] * s.sqrt_dt);
    if (x_in != nullptr) {
      const bf16 in = __float2bfloat16(*xe);
      x_in[(2 * static_cast<int64_t>(p)) * dim + e] = in;
      x_in[(2 * static_cast<int64_t>(p) + 1) * dim + e] = in;
    }
  }
}

// One block per pair.
__global__ void FinishKernel(const float* x, const float* v_rows, const PairSampling* sampling, int dim,
                             float last_step_size, bool normalize, float* tokens, float* kept,
                             const int64_t* kept_offsets, int32_t* nonfinite) {
  __shared__ double scratch[32];
  extern __shared__ float row[];  // dim floats: x after the last step
  const int p = blockIdx.x;
  const float cfg = sampling[p].cfg_weight;
  for (int e = threadIdx.x; e < dim; e += blockDim.x) {
    row[e] = x[static_cast<int64_t>(p) * dim + e] + GuidedVelocity(v_rows, p, dim, e, cfg) * last_step_size;
  }
  __syncthreads();
  float mean = 0, inv = 1;
  if (normalize) RowStats(row, dim, scratch, &mean, &inv);
  const int64_t kept_at = kept != nullptr ? kept_offsets[p] : -1;
  for (int e = threadIdx.x; e < dim; e += blockDim.x) {
    const float y = normalize ? (row[e] - mean) * inv : row[e];
    tokens[static_cast<int64_t>(p) * dim + e] = y;
    if (kept_at >= 0) kept[kept_at + e] = y;
    if ((__float_as_uint(y) & 0x7f800000u) == 0x7f800000u) *nonfinite = 1;  // same value from every writer
  }
}

__global__ void GatherTokenVectorsKernel(const float* kept, const float* given, const int64_t* sources, int64_t total,
                                         int dim, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t p = i / dim, e = i % dim, src = sources[p];
  out[i] = __float2bfloat16(src >= 0 ? kept[src + e] : given[(-1 - src) * dim + e]);
}

}  // namespace

cudaError_t FlowSiluCondition(const float* temb, int times, const float* c_emb, int rows, int width, bf16* out,
                              cudaStream_t stream) {
  const int64_t per_time = static_cast<int64_t>(rows) * width, total = per_time * times;
  if (total <= 0) return cudaSuccess;
  SiluConditionKernel<<<Blocks(total), kThreads, 0, stream>>>(temb, c_emb, total, per_time, width, out);
  return cudaGetLastError();
}

cudaError_t FlowPairRows(const float* x, int pairs, int dim, bf16* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(pairs) * dim;
  if (total <= 0) return cudaSuccess;
  PairRowsKernel<<<Blocks(total), kThreads, 0, stream>>>(x, total, dim, out);
  return cudaGetLastError();
}

cudaError_t FlowBiasSilu(const float* x, const float* bias, int rows, int n, bf16* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total <= 0) return cudaSuccess;
  return pdl::Launch(BiasSiluKernel, dim3(Blocks(total)), dim3(kThreads), 0, stream, x, bias, total, n, out);
}

cudaError_t FlowResidualNorm(const FlowResidualNormArgs& args, cudaStream_t stream) {
  if (args.rows <= 0) return cudaSuccess;
  if (args.width <= 0 || args.width > 8192 || args.h == nullptr || args.mod == nullptr || args.mod_bias == nullptr ||
      (args.y != nullptr && args.y_bias == nullptr) || (args.ln_weight == nullptr) != (args.ln_bias == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const auto kernel = args.width <= kResidualNormPerThread * kThreads ? ResidualNormKernel : ResidualNormLoopKernel;
  return pdl::Launch(kernel, dim3(args.rows), dim3(kThreads), sizeof(float) * args.width, stream, args);
}

cudaError_t FlowStartNoise(const PairSampling* sampling, int pairs, int dim, float* x, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(pairs) * ((dim + 3) / 4);
  if (total <= 0) return cudaSuccess;
  StartNoiseKernel<<<Blocks(total), kThreads, 0, stream>>>(sampling, pairs, dim, x);
  return cudaGetLastError();
}

cudaError_t FlowEulerStep(float* x, const float* v_rows, const PairSampling* sampling, int pairs, int dim,
                          const FlowStep& step, bf16* x_in, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(pairs) * ((dim + 3) / 4);
  if (total <= 0) return cudaSuccess;
  return pdl::Launch(EulerStepKernel, dim3(Blocks(total)), dim3(kThreads), 0, stream, x, v_rows, sampling, pairs, dim,
                     step, x_in);
}

cudaError_t FlowFinish(const float* x, const float* v_rows, const PairSampling* sampling, int pairs, int dim,
                       float last_step_size, bool normalize, float* tokens, float* kept, const int64_t* kept_offsets,
                       int32_t* nonfinite, cudaStream_t stream) {
  if (pairs <= 0) return cudaSuccess;
  if (dim <= 0 || dim > 8192 || (kept != nullptr && kept_offsets == nullptr)) return cudaErrorInvalidValue;
  const int threads = dim >= 256 ? 256 : ((dim + 31) / 32) * 32;
  FinishKernel<<<pairs, threads, sizeof(float) * dim, stream>>>(x, v_rows, sampling, dim, last_step_size, normalize,
                                                                tokens, kept, kept_offsets, nonfinite);
  return cudaGetLastError();
}

cudaError_t GatherTokenVectors(const float* kept, const float* given, const int64_t* sources, int pairs, int dim,
                               bf16* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(pairs) * dim;
  if (total <= 0) return cudaSuccess;
  GatherTokenVectorsKernel<<<Blocks(total), kThreads, 0, stream>>>(kept, given, sources, total, dim, out);
  return cudaGetLastError();
}

}  // namespace argen::kernels
