// The small kernels of the device flow-matching head (engine/cuda/
// device_flow_head.h; the math of engine/model/flow_matching_head.h, the CPU
// reference engine/families/nextstep/flow_head.cc): the AdaLN pieces between
// its GEMMs (kernels/flow_head_gemm.h) and the sampler's steps. Rows are pair-interleaved: row 2p
// is pair p's cond row, 2p + 1 its uncond row. All on `stream`, no
// allocation, no sync (capturable).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sampling.h"

namespace argen::kernels {

using bf16 = __nv_bfloat16;

// out[k][r][i] = bf16(SiLU(temb[k][i] + c_emb[r][i])) for `times` time embeddings
// temb [times x width]: what every adaLN_modulation reads, for `times` sampler steps.
cudaError_t FlowSiluCondition(const float* temb, int times, const float* c_emb, int rows, int width, bf16* out,
                              cudaStream_t stream);

// out rows 2p and 2p + 1 = bf16(x[p]) (both branches at the same x), x [pairs x dim].
cudaError_t FlowPairRows(const float* x, int pairs, int dim, bf16* out, cudaStream_t stream);

// out = bf16(SiLU(x + bias)), x [rows x n]: fc1's epilogue when a cuBLAS
// GEMM made x. A programmatic dependent.
cudaError_t FlowBiasSilu(const float* x, const float* bias, int rows, int n, bf16* out, cudaStream_t stream);

// What runs between two GEMMs of the net, one CUDA block per row: the
// residual of the block just run, h += gate (y + y_bias) (skipped when y is
// null), then the next block's (or the final layer's) input: hn =
// bf16(LN(h) * (1 + scale) + shift), LN over `width` with eps 1e-6 (biased
// variance), affine when ln_weight is set (ln_bias too). gate, shift and scale
// of row r are mod[r * mod_stride + at + i] + mod_bias[at + i] at gate_at,
// shift_at, scale_at: the adaLN modulations, whose GEMM adds no bias.
// Launched as a programmatic dependent (kernels/pdl.cuh).
struct FlowResidualNormArgs {
  float* h = nullptr;  // [rows x width]
  int rows = 0, width = 0;
  const float* y = nullptr;       // [rows x width]: the block's fc2 output, or null
  const float* y_bias = nullptr;  // [width]
  const float* mod = nullptr;     // [rows x mod_stride]
  const float* mod_bias = nullptr;
  int64_t mod_stride = 0, gate_at = 0, shift_at = 0, scale_at = 0;
  const float* ln_weight = nullptr;  // [width], with ln_bias, or both null
  const float* ln_bias = nullptr;
  bf16* hn = nullptr;  // [rows x width]
};
cudaError_t FlowResidualNorm(const FlowResidualNormArgs& args, cudaStream_t stream);

// x[p] = draw 0 of pair p's noise (SampleNormal4 keyed seed, image_index,
// token index = sampling[p].step): the sampler's start.
cudaError_t FlowStartNoise(const PairSampling* sampling, int pairs, int dim, float* x, cudaStream_t stream);

// One Euler-Maruyama step at time t (the CPU's float coefficients).
struct FlowStep {
  float t = 0, dt = 0, sigma = 0, var = 0, sqrt_dt = 0, diffusion = 0;
  uint32_t draw = 0;  // the noise draw of this step (k + 1)
};
// Per pair: v = cfg > 1 ? v_u + cfg (v_c - v_u) : v_c from v_rows [2 pairs x
// dim]; score = (t v - x) / var; drift = v + sigma score; x = (x + drift dt) +
// diffusion (w sqrt_dt), w the step's draw; x_in (when set) = the new x as
// FlowPairRows writes it, the next step's input. A programmatic dependent.
cudaError_t FlowEulerStep(float* x, const float* v_rows, const PairSampling* sampling, int pairs, int dim,
                          const FlowStep& step, bf16* x_in, cudaStream_t stream);

// The last step: x += v last_step_size (v guided as above), then a
// non-affine LayerNorm (eps 1e-6) of each pair's token when `normalize`,
// into tokens [pairs x dim]; pair p's token also to kept + kept_offsets[p]
// when kept_offsets[p] >= 0 (kept may be null: nothing kept); *nonfinite = 1
// when a token holds a NaN or Inf.
cudaError_t FlowFinish(const float* x, const float* v_rows, const PairSampling* sampling, int pairs, int dim,
                       float last_step_size, bool normalize, float* tokens, float* kept, const int64_t* kept_offsets,
                       int32_t* nonfinite, cudaStream_t stream);

// out[p] (bf16 [pairs x dim]) = the token vector of pair p: from `kept` at
// sources[p] >= 0 (floats into kept), else row -1 - sources[p] of `given` [n x dim].
cudaError_t GatherTokenVectors(const float* kept, const float* given, const int64_t* sources, int pairs, int dim,
                               bf16* out, cudaStream_t stream);

}  // namespace argen::kernels
