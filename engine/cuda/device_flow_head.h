// A flow-matching token head on the device (engine/model/flow_matching_head.h:
// NextStep-1's SimpleMLPAdaLN and its SDE sampler; the CPU reference is
// engine/families/nextstep/flow_head.cc): bf16 weight matrices, f32 biases,
// norms and activations, fp32 accumulation. Every pair of a call runs
// together, in chunks of at most kChunkPairs pairs (fixed workspaces,
// whatever the batch): per chunk one cond_embed GEMM, then per sampler step
// the net over the pairs' cond and uncond rows and one step kernel.
//
// The net is a chain 12 blocks deep that runs 51 times a token, on a few
// rows: its time is launches and latency, not arithmetic. So the chain is
// the fused GEMMs of kernels/flow_head_gemm.h (bias and SiLU in the
// epilogue; cuBLAS above kFusedMaxRows rows) and one residual-and-norm
// kernel between blocks, each a
// programmatic dependent of the one before (its launch and weight prefetch
// overlap it): 3 kernels a block. The adaLN modulations of every block
// depend on the time and the condition only, not on x, so they are made
// ahead of the chain: by default for as many sampler steps at once as fill
// kGroupRows rows (all 51 for one image, 4 at 64 images), one cuBLAS GEMM
// (no bias: the consumers add it) that reads the 170 MB of modulation
// weights once for the group instead of once a step; or (the A/B options) a
// side stream computes step k + 1's while the chain runs step k, or each
// step's in line.
//
// The time embeddings of the grid are the host's (made once by the family).
// Everything is enqueued on the caller's stream (forking to the side stream
// and joining back through events) without a sync or an allocation, so a
// step that contains it can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"
#include "engine/model/flow_matching_head.h"
#include "kernels/flow_head_gemm.h"
#include "kernels/flow_head_kernels.h"
#include "kernels/sampling.h"

namespace argen::cuda {

// How the net's GEMMs and modulations run (the defaults are the measured
// best; the others stay for the benchmark's A/B, argen_bench --head-micro).
struct FlowHeadTuning {
  enum class Gemms {
    kAuto,    // up to DeviceFlowHead::kFusedMaxRows rows: the fused kernels; more: cuBLAS for fc1, fc2, final
    kFused,   // the fused kernels at any row count
    kCublas,  // cuBLAS everywhere, bias and SiLU as kernels of their own
  };
  enum class Modulations {
    kGrouped,  // a group of sampler steps' modulations in one GEMM before their chains
    kSide,     // step k + 1's on a side stream while step k's chain runs
    kInline,   // each step's just before its chain
  };
  Gemms gemms = Gemms::kAuto;
  Modulations modulations = Modulations::kGrouped;
  // The fused GEMMs' warp-per-column kernel up to this many rows, their tiles above
  // (kernels::FlowGemmArgs::gemv_max_rows). With 16-row tiles the tiles win from 2 rows (argen_bench
  // --head-micro, 2026-12-04: 6.86 against 7.08 ms a token at one image, 7.84 against 13.77 at four images),
  // so the kernel stays an A/B option (with 32-row tiles it had won at 2 and 4 rows).
  int32_t gemv_max_rows = 0;
  // The fused GEMMs' 16-row tiles up to 32 rows (kernels::FlowGemmArgs::small_tiles); false: 32-row tiles.
  bool small_tiles = true;
};

class DeviceFlowHead {
 public:
  static constexpr int32_t kChunkPairs = 128;
  // Rows of one grouped modulation GEMM at most (sampler steps x rows; the side
  // stream's two buffers of 2 kChunkPairs rows, the same memory).
  static constexpr int32_t kGroupRows = 4 * kChunkPairs;
  // kAuto's fused GEMMs up to this many rows (16-row tiles), cuBLAS above: at 12 / 16 images (24 / 32 rows)
  // the 32-row tiles already took a token's head 1.12x / 1.06x faster than cuBLAS and the 16-row ones 1.34x /
  // 1.30x; at 32 images (64 rows) the 32-row tiles were 0.99x, at 64 images 0.60x (argen_bench --head-micro,
  // 2026-12-04).
  static constexpr int32_t kFusedMaxRows = 32;

  // Checks the description's shapes (InvalidArgument naming the tensor),
  // uploads its weights and makes the workspaces.
  static absl::StatusOr<std::unique_ptr<DeviceFlowHead>> Create(const model::FlowMatchingHeadDesc& desc);
  ~DeviceFlowHead();
  DeviceFlowHead(const DeviceFlowHead&) = delete;
  DeviceFlowHead& operator=(const DeviceFlowHead&) = delete;

  int32_t token_dim() const { return dims_.token_dim; }
  int32_t cond_dim() const { return dims_.cond_dim; }
  int32_t steps() const { return static_cast<int32_t>(steps_.size()) + 1; }
  // Device memory held: weights, workspaces and the side stream's cuBLAS workspace.
  void set_tuning(const FlowHeadTuning& tuning) { tuning_ = tuning; }

  int64_t bytes() const { return static_cast<int64_t>(weights_.bytes() + workspace_.bytes() + Gemm::kWorkspaceBytes); }

  // One token per pair: conditions [2 pairs x cond_dim] f32 (row 2p pair p's
  // cond row, 2p + 1 its uncond row), sampling[p] its guidance weight and
  // noise key (seed, image_index, step = the token index) -> tokens [pairs x
  // token_dim]; each token also to kept + kept_offsets[p] where that is >= 0
  // (kept null: nothing kept). *nonfinite = 1 when a token is not finite.
  // All device pointers, enqueued on `stream` through `gemm` (bound to it).
  absl::Status EnqueueSample(Gemm& gemm, cudaStream_t stream, const float* conditions,
                             const kernels::PairSampling* sampling, int32_t pairs, float* tokens, float* kept,
                             const int64_t* kept_offsets, int32_t* nonfinite);

  // The net's velocity for n rows at time t (tests; host memory, synchronous):
  // x [n x token_dim], c [n x cond_dim] -> v [n x token_dim].
  absl::Status Velocity(Gemm& gemm, cudaStream_t stream, const float* x, float t, const float* c, int32_t n, float* v);

 private:
  struct Dims {
    int32_t token_dim = 0, cond_dim = 0, width = 0, blocks = 0;
    int64_t mod_width = 0;  // (3 blocks + 2) width: every adaLN modulation of one row
  };
  struct Block {
    const float* ln_weight = nullptr;
    const float* ln_bias = nullptr;
    const bf16* fc1_w = nullptr;
    const float* fc1_b = nullptr;
    const bf16* fc2_w = nullptr;
    const float* fc2_b = nullptr;
  };

  DeviceFlowHead() = default;
  // c_emb_ of `rows` rows from bf16 conditions already in cond_bf16_.
  absl::Status EnqueueCondEmbed(Gemm& gemm, cudaStream_t stream, int32_t rows);
  // mod [rows x mod_width] = every adaLN modulation (no bias) of c_emb_ at time embedding `temb` [width].
  absl::Status EnqueueModulations(Gemm& gemm, cudaStream_t stream, int32_t rows, const float* temb, float* mod);
  // v_ of `rows` rows (bias added) from x_in_ (bf16) and the modulations `mod`.
  absl::Status EnqueueNet(Gemm& gemm, cudaStream_t stream, int32_t rows, const float* mod);
  // One of the net's Linears, g.x -> g's output and epilogue, fused or through cuBLAS (act_ as its f32 scratch
  // when the epilogue is SiLU) as the tuning says for g.rows rows; `big_fused`: fused above kFusedMaxRows in kAuto.
  absl::Status EnqueueLinear(Gemm& gemm, cudaStream_t stream, const kernels::FlowGemmArgs& g, bool big_fused,
                             const char* what);

  Dims dims_;
  FlowHeadTuning tuning_;
  std::vector<kernels::FlowStep> steps_;  // the Euler-Maruyama steps; the last grid time follows
  float last_step_size_ = 0;
  bool normalize_ = true;
  std::function<void(float, float*)> time_embedding_;

  DeviceBuffer weights_;
  const bf16* cond_embed_w_ = nullptr;
  const float* cond_embed_b_ = nullptr;
  const bf16* input_proj_w_ = nullptr;
  const float* input_proj_b_ = nullptr;
  const bf16* ada_w_ = nullptr;  // [mod_width x width]: block 0's shift, scale, gate, ..., the final shift, scale
  const float* ada_b_ = nullptr;
  std::vector<Block> blocks_;
  const bf16* final_w_ = nullptr;
  const float* final_b_ = nullptr;
  const float* time_table_ = nullptr;  // [steps x width]

  // Workspaces for 2 kChunkPairs rows; mod_[k % 2] holds sampler step k's modulations (side stream),
  // mod_[0] a group's (kGroupRows rows over both; silu_y_ kGroupRows rows too).
  DeviceBuffer workspace_;
  bf16 *cond_bf16_ = nullptr, *silu_y_ = nullptr, *x_in_ = nullptr, *hn_ = nullptr, *act_bf16_ = nullptr;
  float *c_emb_ = nullptr, *x_ = nullptr, *h_ = nullptr, *act_ = nullptr, *v_ = nullptr;
  float* mod_[2] = {nullptr, nullptr};
  float* temb_ = nullptr;  // [width]: Velocity's time embedding

  // The modulations' stream, its cuBLAS and the events between it and the caller's stream.
  cudaStream_t side_stream_ = nullptr;
  Gemm side_gemm_;
  cudaEvent_t c_emb_ready_ = nullptr;
  cudaEvent_t mod_ready_[2] = {nullptr, nullptr};
  cudaEvent_t mod_free_[2] = {nullptr, nullptr};
};

}  // namespace argen::cuda
