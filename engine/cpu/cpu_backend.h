// The CPU backend (the reference for every other backend): the Llama decoder
// of Janus-Pro's language model plus gen_embed/gen_aligner and gen_head, in
// f32 with OpenBLAS GEMMs. Implements engine/model/backend.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/attention_observer.h"
#include "engine/cpu/cpu_weights.h"
#include "engine/cpu/kv_rows.h"
#include "engine/model/backend.h"
#include "engine/model/sampler.h"
#include "engine/parallel/thread_pool.h"

namespace argen::cpu {

class CpuBackend final : public model::Backend {
 public:
  CpuBackend(const model::ModelDims& dims, CpuWeights weights,
             const model::BackendOptions& options);
  ~CpuBackend() override;

  const model::ModelDims& dims() const override { return dims_; }
  std::string name() const override { return "cpu"; }
  int64_t KvBytesPerTokenRow() const override { return kv_.BytesPerTokenRow(); }

  absl::StatusOr<model::RowId> AllocateRow(int32_t prompt_len,
                                           const sparse::ResolvedPolicy& policy) override;
  void FreeRow(model::RowId row) override { kv_.Free(row); }
  int64_t KvBytesInUse() const override { return kv_.bytes_in_use(); }

  absl::Status Prefill(const model::PrefillBatch& batch, const model::StepOutputs& out) override;
  absl::Status Decode(const model::DecodeBatch& batch, const model::StepOutputs& out) override;

  // Characterization hook (nullptr: off). While set, Decode reports every
  // query head's attention weights.
  void SetAttentionObserver(AttentionObserver observer) { observer_ = std::move(observer); }

  // Below this much attention work per layer (multiply-adds over all rows of
  // a call) rows run on the calling thread, since waking the workers costs
  // more; tests set 0 to exercise the parallel path on tiny models.
  static constexpr int64_t kDefaultMinParallelWork = int64_t{1} << 20;
  void set_min_parallel_work(int64_t multiply_adds) { min_parallel_work_ = multiply_adds; }

 private:
  struct Activations;
  // Attention scratch of one thread-pool participant.
  struct RowScratch {
    std::vector<int32_t> attended, counts, decode_positions;
    std::vector<float> attended_probs, head_probs, scratch;
  };

  // x [n x hidden] in place through all decoder layers; `attend(layer)` fills
  // activations' attention output from its qkv (after RoPE).
  template <typename AttendFn>
  void RunLayers(int64_t n, AttendFn&& attend);
  // final norm + gen_head on `n` hidden rows, then CFG sampling of each pair.
  void HeadAndSample(const float* hidden, int64_t n_rows,
                     std::span<const model::SamplingSpec> sampling, const int32_t* steps,
                     const model::StepOutputs& out);
  // Per row (in parallel over rows): RoPE, K/V write into the policy's slot,
  // attention over prompt + attended slots, policy observation.
  void DecodeAttendLayer(int32_t layer, std::span<KvRow* const> rows,
                         std::span<const model::RowId> row_ids, const int32_t* steps);
  void DecodeAttendRow(int32_t layer, KvRow& row, int64_t r, model::RowId row_id, int32_t t,
                       RowScratch& scratch);
  // Hands the attention weights DecodeAttention just wrote to the observer.
  void ReportAttention(int32_t layer, KvRow& row, model::RowId row_id, int32_t t,
                       RowScratch& scratch);
  void ReserveRowScratch(int32_t max_prompt, int32_t max_stride);

  model::ModelDims dims_;
  CpuWeights w_;
  model::BackendOptions options_;
  KvRows kv_;
  std::vector<float> inv_freq_;
  std::unique_ptr<Activations> act_;
  std::unique_ptr<parallel::ThreadPool> pool_;
  model::HostSampler sampler_;
  AttentionObserver observer_;
  int64_t min_parallel_work_ = kDefaultMinParallelWork;
};

}  // namespace argen::cpu
