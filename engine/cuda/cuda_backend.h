// The CUDA backend (engine/model/backend.h): the same Janus-Pro generation
// path as engine/cpu, with bf16 weights and KV, fp32 accumulation, cuBLAS
// GEMMs and the kernels of kernels/. One device KV pool sized from the budget
// holds every row's bounded region [layer][kv_head][L_p + n_slots][head_dim];
// the sparse policies run on the device (kernels/policy_kernels.h); CFG and
// sampling run on the device, so a step returns one token per pair. A vector
// model (spec.output.token_dim > 0, NextStep-1) takes its decode inputs as
// token vectors through vector_in, and its output stage hands the conditions
// (vector_out of the final-normed rows) to the device flow head
// (device_flow_head.h), which draws every pair's token in the same launch
// sequence; the drawn vectors stay in the pair's cond row (kMadeVector).
// Nothing is allocated on the device inside a step, except the slot lists
// of out-of-order (parallel) decoding when a step first needs more of them.
#pragma once

#include <cublas_v2.h>

#include <map>
#include <memory>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_flow_head.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/row_layout.h"
#include "engine/cuda/stage_timer.h"
#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "engine/model/fault_guard.h"
#include "engine/model/step_checks.h"
#include "engine/model/weight_source.h"
#include "kernels/attention.h"
#include "kernels/policy_kernels.h"
#include "kernels/sampling.h"
#include "kernels/token_meta.h"

namespace argen::cuda {

using kernels::PlanBuffers;
using kernels::RowPlan;

class CudaBackend final : public model::Backend {
 public:
  // `source` gives the f32 rows of spec.text_embed (prefill inputs);
  // `head`: a vector model's token head on the device (required by one, refused otherwise).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const model::ModelSpec& spec, DeviceWeights weights,
                                                             std::shared_ptr<const model::WeightSource> source,
                                                             const model::BackendOptions& options,
                                                             std::unique_ptr<DeviceFlowHead> head = nullptr);
  ~CudaBackend() override;

  const model::ModelSpec& spec() const override { return spec_; }
  std::string name() const override { return "cuda"; }
  int64_t KvBytesPerTokenRow() const override;
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return sizer_.RowBytes(prompt_len, policy);
  }
  int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return sizer_.SharingRowBytes(prompt_len, policy);
  }
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override {
    return sizer_.PromptRowBytes(prompt_len, format);
  }
  int64_t PoolBytes() const override { return pool_bytes_; }
  int32_t MaxBatchRows() const override { return options_.max_batch_rows; }
  std::string MemorySizing() const override { return sizing_; }
  // One device allocation carved into byte ranges (row_layout.h).
  model::KvPool Pool() const override;
  void SetRowTable(const model::RowTable* rows) override { table_ = rows; }
  std::unique_ptr<model::RowState> NewRow() const override { return std::make_unique<Row>(); }
  // Derives the row's offsets from its range and inits its policy state on the device.
  absl::Status RowPlaced(model::RowState& row, const model::RowState* prompt_source) override;
  // Waits for the work queued on the stream, which may still read the row.
  void RowFreed(model::RowState& row) override;

  // An error after which the device no longer works (a sticky CUDA error)
  // comes back as engine::FatalDeviceError (engine/device_errors.h).
  absl::Status Forward(const model::StepPlan& plan, const model::StepOutputs& out) override;
  // Rewinding plans (speculative decoding) of dense rows: cuda_step.cc, CheckRewinds.
  bool SupportsRewind() const override { return true; }

  // Benchmarks: per-stage GPU times of Decode steps (events at stage boundaries).
  // Stage timing runs steps eagerly (no graph), so its times include launch gaps.
  void SetStageTiming(bool on) { timer_.Enable(on, stream_); }
  // Decode steps replay a captured CUDA graph per batch shape (default on).
  void SetGraphs(bool on) { use_graphs_ = on; }
  // Decode attention kernel choice (kernels/attention.h; default kAuto).
  void SetAttentionVariant(kernels::AttentionVariant v) {
    attention_variant_ = v;
    ClearGraphs();
  }
  // Diagonal rows select from the attention kernel's argmin (default on); off:
  // from its probabilities through ObserveKernel, as the score policies.
  void SetFusedArgmin(bool on) { fused_argmin_ = on; }
  // bf16 Linears of 1-4 rows on the skinny kernel or cuBLAS (default; engine/cuda/gemm.h).
  void SetSkinnyGemm(bool on) {
    gemm_.set_skinny(on);
    ClearGraphs();
  }

  // Testing only (engine/model/fault_guard.h): makes the coming step fail
  // as `kind` says, with a real CUDA error where there is one.
  absl::Status InjectFault(model::FaultKind kind);

  // Testing only: row `id`'s own K/V region as the device holds it (bf16
  // [K, V][layer][kv_head][capacity][head_dim], or fp8 codes then scales:
  // kernels/kv_fp8.h; capacity = its own prompt positions + policy.n_slots),
  // after the queued work.
  absl::StatusOr<std::vector<uint8_t>> CopyRowKv(model::RowId id);

  StageTimes TakeStageTimes() { return timer_.Take(); }
  int64_t KvPoolBytes() const { return PoolBytes(); }
  int64_t WeightBytes() const { return weights_.bytes; }

  model::RowState* FindLiveRow(model::RowId id) override { return lookup_(id); }
  model::BatchLimits Limits() const override { return limits_; }

 private:
  // model::RowState holds the prompt length, policy, step and prefilled state.
  struct Row : model::RowState {
    bool sparse = false;
    // Derived from RowState::pool_offset (the KV manager's placement) by RowPlaced.
    int64_t kv_offset = 0, ints_offset = 0, floats_offset = 0;  // in bf16 / int32 / float elements
    int32_t capacity = 0;                                       // positions per (layer, kv head) of its region
    // A sharing row's prompt positions: all prompt_len of them, in the owner's region.
    int32_t shared_prompt = 0;
    int64_t prompt_kv_offset = 0;
    int32_t prompt_capacity = 0;
    int64_t hidden_offset = 0;  // a prompt row's last hidden state, in float elements
    // A vector model's made token vectors ([l_dec][token_dim], float
    // elements; used in a pair's cond row) and which of them were made.
    int64_t vectors_offset = 0;
    std::vector<uint8_t> made;
    bool Made(int32_t t) const { return t >= 0 && t < static_cast<int32_t>(made.size()) && made[t] != 0; }
  };
  // Device views of the per-step inputs, uploaded in one copy.
  struct StepInputs {
    kernels::TokenMeta* meta = nullptr;
    RowPlan* plans = nullptr;
    int32_t* ids = nullptr;     // image tokens (decode) per pair
    int32_t* gather = nullptr;  // pair -> row broadcast / last-token gather
    kernels::PairSampling* sampling = nullptr;
    int32_t* sampled = nullptr;  // output
    int32_t* observe = nullptr;  // per row: kernels::kObserve* or the diagonal argmin start
    // Query groups (kernels/query_groups.h): per group its leader's meta, per slot its row and key limit.
    kernels::TokenMeta* group_meta = nullptr;
    int32_t* group_members = nullptr;
    int32_t* group_limits = nullptr;
  };
  // A decode pass's query groups: its rows [0, plain_rows) attend one by
  // one, the rest in groups (one attention launch per group size): class k
  // holds `groups` groups of `size` slots, its groups from first_group and
  // its slots from first_slot (group i's slots at first_slot + i * size).
  struct QueryGroupClass {
    int32_t size = 0, first_group = 0, groups = 0, first_slot = 0;
  };
  struct QueryGroups {
    int32_t plain_rows = 0;
    std::vector<QueryGroupClass> classes;
    bool empty() const { return classes.empty(); }
  };
  // Which observe work a decode step enqueues (part of the graph key).
  enum ObserveFlags : int32_t { kObserveScores = 1, kObserveArgmin = 2 };

  CudaBackend(const model::ModelSpec& spec, DeviceWeights weights, std::shared_ptr<const model::WeightSource> source,
              const model::BackendOptions& options);
  absl::Status Init();
  // A decode query of a validated step: a CFG pair's query at decode index t.
  struct DecodeQuery {
    Row* cond = nullptr;
    Row* uncond = nullptr;
    int32_t input = 0;  // input-table id
    int32_t t = 0;      // decode index
    int32_t rank = 0;   // its place among the pair's queries of the step
    const model::SamplingSpec* sampling = nullptr;
    int32_t output = 0;  // its output point (index into StepOutputs::sampled)
    // Out of order (parallel decoding): its slot list in token_lists_ (the
    // written indices below t, then t), or -1: in order.
    int32_t list = -1, list_len = 0;
    model::InputSource source = model::InputSource::kId;  // a vector model's: kTokenVector or kMadeVector
    const float* vector = nullptr;                        // kTokenVector: its row of StepPlan::token_vectors
    // A sparse row out of order (the device plans it, sparse::PlanQuery):
    // whether the query writes its K/V (false: provisional), and the sinks
    // written before it (its list's leading entries: where a diagonal
    // selection's argmin starts); -1: in order.
    bool writes = true;
    int32_t sinks_written = -1;
  };
  // Forward before the device check of its errors (cuda_step.cc): the plan's
  // prompt queries as one prefill pass, then its decode queries in as few
  // decode passes as their policies allow.
  absl::Status ForwardStep(const model::StepPlan& plan, const model::StepOutputs& out);
  // Refuses a rewinding row this backend cannot step back (one with device policy state).
  absl::Status CheckRewinds(const model::StepPlan& plan, const model::PlannedStep& step) const;
  // The validated step's prompt queries (whole prompts or chunks) and the
  // token 0 of the pairs completing their prompts (cuda_prefill.cc).
  absl::Status RunPromptPass(const model::StepPlan& plan, const model::StepOutputs& out);
  // Decode queries as one device pass (cuda_decode.cc): a row's queries in
  // increasing index order; at most max_batch_rows / 2 queries. by_rank: the
  // queries are sorted by rank (a sparse row may hold several: its policy
  // state advances rank by rank inside each layer); else a sparse row holds
  // at most one.
  absl::Status RunDecodePass(std::span<const DecodeQuery> queries, const model::StepOutputs& out, bool by_rank);
  // Appends the slot lists of plan entry `entry`'s out-of-order queries to lists_.
  void AddSlotLists(const model::StepPlan& plan, int32_t entry, std::span<DecodeQuery> queries);
  // A sparse entry's out-of-order queries: their writes and sinks_written.
  void MarkOutOfOrder(const model::StepPlan& plan, int32_t entry, std::span<DecodeQuery> queries) const;
  // The slot lists of a step's out-of-order queries (lists_) to the device.
  absl::Status UploadLists();
  absl::Status EnsurePlanCapacity(int32_t stride);
  // Packs the host staging area's used prefix to the device (one copy).
  absl::Status Upload(size_t bytes);
  // The decoder layers over `tokens` tokens of x_ (meta already on device).
  // kv_formats: kernels::kKvFormats* of the tokens' rows. rank_ends (a
  // decode pass holding several queries of a sparse row, sorted by rank: the
  // row ends of its rank segments): each layer plans, attends and applies
  // the policies segment by segment; empty: one segment, planned and applied
  // by the caller for every layer at once.
  // groups (a dense pass's query groups): rows from groups->plain_rows attend as groups.
  absl::Status RunLayers(int32_t tokens, int32_t max_keys, bool any_sparse, int32_t n_rows_plan, int32_t observe_flags,
                         int32_t kv_formats, std::span<const int32_t> rank_ends = {},
                         const QueryGroups* groups = nullptr);
  // Attention splits and chunk for `tokens` queries of at most `max_keys` keys
  // that fit the attention workspace.
  absl::Status AttentionSplits(int32_t tokens, int32_t heads, int32_t max_keys, int32_t probs_stride, int32_t* splits,
                               int32_t* chunk) const;
  // Forms the query groups of a dense pass whose multi-query rows come last
  // (ForwardStep orders them so) and stages them after the pass's metas
  // (`meta`: the host copies); no classes when none can form.
  QueryGroups StageQueryGroups(std::span<const DecodeQuery> queries, const kernels::TokenMeta* meta);
  // RMSNorm (no bias) or LayerNorm of `rows` rows of `x` into bf16 `out`.
  absl::Status EnqueueNorm(const float* x, const DeviceNorm& norm, int32_t rows, bf16* out, const char* what);
  // The input stage: x_ of `rows` rows (pairs broadcast) from inputs_.ids.
  absl::Status EnqueueInput(int32_t rows);
  // The output stage on `rows` hidden rows of `hidden`, CFG sampling into
  // inputs_.sampled and its copy to pinned memory (capturable: no sync).
  absl::Status EnqueueHead(const float* hidden, int32_t rows);
  // Copies logits when asked (`logits` not null, [rows x logits()]), waits for
  // the step, hands out the sampled tokens (`sampled`, rows / 2 of them).
  absl::Status FinishStep(int32_t rows, int32_t* sampled, float* logits);
  // Vector models (cuda_vectors.cc). The decode queries' inputs are token
  // vectors, and every kMadeVector query's vector was made by an earlier step.
  absl::Status CheckVectorInputs(const model::StepPlan& plan) const;
  // Stages pair i's token-vector input (`queries[i]`: a row of the plan's
  // vectors or the cond row's kept vector) and its drawn token's kept place,
  // then uploads them.
  absl::Status StageVectorInputs(std::span<const DecodeQuery> queries);
  // Stages where pair i's drawn token is kept (its cond row, token index
  // tokens[i]) for a pass without vector inputs (token 0), and uploads them.
  absl::Status StageVectorOutputs(std::span<Row* const> conds, std::span<const int32_t> tokens);
  // x_ of `rows` rows (pairs broadcast) from the staged token vectors through vector_in.
  absl::Status EnqueueVectorInput(int32_t rows);
  // The vector output stage: conditions of `rows` rows of `hidden`, the
  // device head's draw into drawn_ and the cond rows' kept vectors, and its
  // copy to pinned memory (capturable).
  absl::Status EnqueueVectorHead(const float* hidden, int32_t rows);
  // After FinishStep: pair i's drawn vector to out.token_vectors row outputs[i]
  // and marks token tokens[i] made in conds[i].
  void HandOutVectors(std::span<Row* const> conds, std::span<const int32_t> tokens, std::span<const int32_t> outputs,
                      const model::StepOutputs& out);
  // Everything a decode step runs on the device after its inputs are uploaded.
  absl::Status EnqueueDecode(int32_t rows, bool any_sparse, int32_t max_keys, int32_t observe_flags, int32_t kv_formats,
                             std::span<const int32_t> rank_ends, const QueryGroups& groups);
  void ClearGraphs();

  model::ModelSpec spec_;
  model::BatchLimits limits_;
  DeviceWeights weights_;
  std::shared_ptr<const model::WeightSource> source_;
  model::BackendOptions options_;
  std::string sizing_;      // PoolSizing::Describe when auto sizing ran
  int32_t max_tokens_ = 0;  // tokens per forward pass (prefill is chunked to this)
  int32_t max_pos_ = 0;     // rotary table length
  int32_t sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;                                  // the cuBLAS handle and its workspace
  std::unique_ptr<DeviceFlowHead> flow_head_;  // vector models only

  // The pool (bytes): every row's KV and policy state (row_layout.h), placed
  // by the KV manager (engine/kv/kv_manager.h), whose table holds the rows.
  CudaRowSizer sizer_;
  DeviceBuffer pool_;
  int64_t pool_bytes_ = 0;
  const model::RowTable* table_ = nullptr;
  model::RowLookup lookup_;  // table_ for the shared batch checks

  // Workspaces (fixed size, made in Init; plan buffers grow in RowPlaced only).
  // sub_: a sublayer's output before its norm (swin_norm only).
  DeviceBuffer rope_, x_, xn_, qkv_, q_, attn_, gate_up_, mlp_, sub_;
  DeviceBuffer pair_embed_, pair_mid_, pair_mid_bf16_, pair_out_;
  DeviceBuffer last_hidden_, head_in_, head_mid_, head_mid_bf16_, logits_;
  DeviceBuffer attn_ws_, plan_slots_, plan_counts_, plan_attended_, probs_;
  DeviceBuffer attn_split_counters_;  // [max_tokens][kv_heads], zero between launches
  DeviceBuffer argmin_;               // [layer][max_batch_rows][kv_head]: the diagonal rows' selections of a step
  size_t attn_ws_bytes_ = 0;
  int32_t plan_stride_ = 0;
  DeviceBuffer step_in_;
  PinnedBuffer host_in_, host_sampled_;
  // Set by the step's non-finite check of the logits (EnqueueHead).
  DeviceBuffer nonfinite_flag_;
  PinnedBuffer host_nonfinite_flag_;
  bool inject_nan_logits_ = false;  // fault injection: the next head writes NaN logits
  StepInputs inputs_;
  PinnedBuffer host_x_pinned_;  // prefill embeddings of one chunk
  // Vector models: per pair the kept-vector source (float offset into the
  // pool, or -1 - k: row k of the given vectors) and the kept place of its
  // drawn token (-1: not kept), then the given vectors [pairs x token_dim];
  // the conditions [rows x vector_head_in], the inputs in bf16, the drawn tokens.
  PinnedBuffer host_vectors_, host_drawn_;
  DeviceBuffer vector_io_, conditions_, vector_in_bf16_, drawn_;
  int64_t* vector_sources_ = nullptr;
  int64_t* vector_kept_ = nullptr;
  float* vectors_given_ = nullptr;
  std::vector<Row*> pass_conds_;
  std::vector<int32_t> pass_tokens_;
  model::PlannedStep planned_;  // reused per step
  // A step's scratch, reused: its decode queries; a prompt pass's computed
  // entries, their tokens and offsets, each entry's completing ordinal (its
  // last position's row in last_hidden_); a pass's outputs before they are
  // scattered to the step's output points.
  std::vector<DecodeQuery> decode_queries_, pass_queries_;
  std::vector<int32_t> prompt_entries_, prompt_tokens_, prompt_offsets_, completing_;
  std::vector<model::InputSource> prompt_sources_;  // per prompt token: id or embedding row
  std::vector<int32_t> pass_outputs_, pass_sampled_;
  // Out-of-order queries' slot lists (DecodeQuery::list): built per step,
  // uploaded once; the device buffer grows (once per size) when a step needs more.
  std::vector<int32_t> lists_;
  DeviceBuffer token_lists_;
  std::vector<float> pass_logits_;
  StageTimer timer_;
  // Captured decode steps by (rows, any sparse, key bound, plan stride, observe flags, kv formats, rank ends,
  // query groups: plain rows, then size and groups of each class).
  using GraphKey =
      std::tuple<int32_t, bool, int32_t, int32_t, int32_t, int32_t, std::vector<int32_t>, std::vector<int32_t>>;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  std::set<GraphKey> seen_;  // a shape runs eagerly once before it is captured
  bool use_graphs_ = true;
  kernels::AttentionVariant attention_variant_ = kernels::AttentionVariant::kAuto;
  bool fused_argmin_ = true;
};

// Random-weight backend for benchmarks (no checkpoint): weights made on the
// device. A vector model (spec.output.token_dim > 0) needs `flow_head`, the
// description of its token head (weights included, e.g. random ones made by
// the caller), uploaded as the backend's device flow head; a code model takes none.
absl::StatusOr<std::unique_ptr<CudaBackend>> CreateRandomCudaBackend(
    const model::ModelSpec& spec, const model::BackendOptions& options, uint64_t seed,
    const model::FlowMatchingHeadDesc* flow_head = nullptr);

}  // namespace argen::cuda
