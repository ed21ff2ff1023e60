// The CPU backend (the reference for every other backend): the decoder stack
// of a ModelSpec with every switch (engine/model/model_spec.h) and its input
// and output stages, in f32 with OpenBLAS GEMMs. Implements
// engine/model/backend.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/attention_observer.h"
#include "engine/cpu/cpu_weights.h"
#include "engine/cpu/kv_rows.h"
#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "engine/model/sampler.h"
#include "engine/model/step_checks.h"
#include "engine/parallel/thread_pool.h"

namespace argen::cpu {

class CpuBackend final : public model::Backend {
 public:
  CpuBackend(const model::ModelSpec& spec, CpuWeights weights, const model::BackendOptions& options);
  ~CpuBackend() override;

  const model::ModelSpec& spec() const override { return spec_; }
  std::string name() const override { return "cpu"; }
  int64_t KvBytesPerTokenRow() const override { return kv_.sizer().BytesPerTokenRow(); }
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return kv_.sizer().RowBytes(prompt_len, policy);
  }
  int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return kv_.sizer().SharingRowBytes(prompt_len, policy);
  }
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override {
    return kv_.sizer().PromptRowBytes(prompt_len, format);
  }
  // kv_budget_bytes 0: unbounded.
  int64_t PoolBytes() const override;
  int32_t MaxBatchRows() const override { return options_.max_batch_rows; }
  model::KvPool Pool() const override;
  void SetRowTable(const model::RowTable* rows) override { kv_.SetTable(rows); }
  std::unique_ptr<model::RowState> NewRow() const override { return std::make_unique<KvRow>(); }
  absl::Status RowPlaced(model::RowState& row, const model::RowState* prompt_source) override {
    kv_.Init(static_cast<KvRow&>(row), static_cast<const KvRow*>(prompt_source));
    return absl::OkStatus();
  }
  void RowFreed(model::RowState& /*row*/) override {}  // every call has returned

  absl::Status Forward(const model::StepPlan& plan, const model::StepOutputs& out) override;
  bool SupportsRewind() const override { return true; }

  // Characterization hook (nullptr: off). While set, Decode reports every
  // query head's attention weights.
  void SetAttentionObserver(AttentionObserver observer) { observer_ = std::move(observer); }

  // Below this much attention work per layer (multiply-adds over all rows of
  // a call) rows run on the calling thread, since waking the workers costs
  // more; tests set 0 to exercise the parallel path on tiny models.
  static constexpr int64_t kDefaultMinParallelWork = int64_t{1} << 20;
  void set_min_parallel_work(int64_t multiply_adds) { min_parallel_work_ = multiply_adds; }

  model::RowState* FindLiveRow(model::RowId id) override { return kv_.Find(id); }
  // A row's KV and policy state as stored (tests: what a step wrote); nullptr if unknown.
  const KvRow* InspectRow(model::RowId id) const { return kv_.FindAny(id); }
  model::BatchLimits Limits() const override { return limits_; }

 private:
  struct Activations;
  // A row decoding in this step: its queries are x rows [first_x, first_x +
  // queries), the plan's queries[first_query ...] (decode indices in order;
  // consecutive when in_order, else out of order: step_plan.h).
  struct DecodeEntry {
    KvRow* row;
    model::RowId id;
    int32_t entry;  // in the plan's rows
    int32_t first_x, queries;
    const model::Query* first_query;
    bool in_order;
  };
  // Attention scratch of one thread-pool participant.
  struct RowScratch {
    std::vector<int32_t> attended, counts, decode_positions;
    std::vector<float> attended_probs, head_probs, scratch;
  };

  // Tokens [first, first + n) of x in place through all decoder layers;
  // `attend(layer)` fills their attention output from their qkv (RoPE is
  // applied there).
  template <typename AttendFn>
  void RunLayers(int64_t first, int64_t n, AttendFn&& attend);
  // The input stage of each pair query (Activations::pair_inputs: an id
  // through the table, a token vector through vector_in), into
  // Activations::input.
  void InputStage(const model::StepPlan& plan);
  // Ids alone: the table rows, then the input MLP (if any).
  void IdInputStage(std::span<const int32_t> ids);
  // A step's prompt queries (each row holding its prompt, one row at a time),
  // then the hidden states the step's token-0 output points sample from.
  absl::Status RunPromptQueries(const model::StepPlan& plan, const model::PlannedStep& step, float* head_hidden,
                                int32_t* token_index);
  // A step's decode queries, batched, each row's in raster order; then the
  // hidden states of their output points.
  void RunDecodeQueries(const model::StepPlan& plan, const model::PlannedStep& step, float* head_hidden,
                        int32_t* token_index);
  // The output stage on `n` hidden rows, then CFG sampling of each pair;
  // INTERNAL when the logits hold NaN/Inf.
  absl::Status HeadAndSample(const float* hidden, int64_t n_rows, std::span<const model::SamplingSpec> sampling,
                             const int32_t* steps, const model::StepOutputs& out);
  // A vector model's output stage: final norm, vector_out, the token head;
  // keeps each drawn vector on its pair's cond row (Activations::output_rows).
  absl::Status HeadAndDraw(const float* hidden, int64_t n_rows, std::span<const model::SamplingSpec> sampling,
                           const int32_t* steps, const model::StepOutputs& out);
  // Every kMadeVector query's vector was made by an earlier step (else InvalidArgument).
  absl::Status CheckMadeVectors(const model::StepPlan& plan, const model::PlannedStep& step) const;
  // Per row (in parallel over rows), each of its queries in order: RoPE, K/V
  // write into the policy's slot, attention over prompt + attended slots,
  // policy observation.
  void DecodeAttendLayer(int32_t layer, std::span<const DecodeEntry> entries);
  void DecodeAttendRow(int32_t layer, KvRow& row, int64_t r, model::RowId row_id, const model::Query& query,
                       bool in_order, RowScratch& scratch);
  // Hands the attention weights DecodeAttention just wrote to the observer.
  void ReportAttention(int32_t layer, KvRow& row, model::RowId row_id, int32_t t, RowScratch& scratch);
  void ReserveRowScratch(int32_t max_prompt, int32_t max_stride);

  model::ModelSpec spec_;
  model::BatchLimits limits_;
  CpuWeights w_;
  model::BackendOptions options_;
  KvRows kv_;
  // The stack's RoPE (model::RopeKind): a query's angles from its kind and
  // index (prompt position, or decode index t of a row with prompt_len), and
  // their application to `heads` heads of q or k.
  void QueryRope(bool prompt, int32_t index, int32_t prompt_len, float* cos_sin) const;
  void ApplyQueryRope(float* x, int32_t heads, const float* cos_sin) const;
  std::vector<float> inv_freq_;  // per pair (1-D), per pair of a half (2-D)
  std::unique_ptr<Activations> act_;
  std::unique_ptr<parallel::ThreadPool> pool_;
  model::HostSampler sampler_;
  AttentionObserver observer_;
  int64_t min_parallel_work_ = kDefaultMinParallelWork;
};

}  // namespace argen::cpu
