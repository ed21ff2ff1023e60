// Decode queries (engine/model/step_plan.h) as one device pass: each query
// is a CFG pair's two tokens with their own metadata (the row's region, the
// query's decode index and rotary position), so several queries of a dense
// row run in one pass: query t writes slot t and attends slots [0, t], never
// the later queries' slots that the same pass writes. A pass sorted by rank
// (by_rank: a sparse row holds several queries) runs each layer's policy
// plan, K/V append, attention and observe rank segment by rank segment, so a
// sparse row's query k is planned from the state its query k - 1 left in
// that layer (out of order, the device plans it as sparse::PlanQuery). A
// dense row's several queries attend as query groups (cuda_query_groups.cc):
// one launch reads the row's K/V for all of them. Repeated
// shapes replay a captured CUDA graph: its key is the pass's shape alone, and
// every per-query value (decode index, slot, rotary position, input,
// sampling) is read from the inputs uploaded before the launch, so a
// rewinding step (speculative decoding: indices below the row's last ones)
// replays the graph of its shape as any step does; nothing is re-captured.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/graph_capture.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/cuda/step_staging.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {

absl::Status CudaBackend::RunDecodePass(std::span<const DecodeQuery> queries, const model::StepOutputs& out,
                                        bool by_rank) {
  const int64_t n_pairs = static_cast<int64_t>(queries.size()), n_rows = 2 * n_pairs;
  const StagingLayout layout(max_tokens_, options_.max_batch_rows);
  char* host = host_in_.as<char>();
  auto* meta = reinterpret_cast<kernels::TokenMeta*>(host + layout.meta);
  auto* plans = reinterpret_cast<RowPlan*>(host + layout.plans);
  auto* ids = reinterpret_cast<int32_t*>(host + layout.ids);
  auto* gather = reinterpret_cast<int32_t*>(host + layout.gather);
  auto* sampling = reinterpret_cast<kernels::PairSampling*>(host + layout.sampling);
  auto* observe = reinterpret_cast<int32_t*>(host + layout.observe);
  bool any_sparse = false;
  int32_t observe_flags = 0, kv_formats = 0;
  int32_t key_bound = 1;
  for (int64_t r = 0; r < n_rows; ++r) {
    const DecodeQuery& q = queries[r / 2];
    const int32_t t = q.t;
    const Row& rw = r % 2 == 0 ? *q.cond : *q.uncond;
    kernels::TokenMeta m;
    m.kv_offset = rw.kv_offset;
    m.capacity = rw.capacity;
    m.shared_prompt = rw.shared_prompt;
    m.prompt_kv_offset = rw.prompt_kv_offset;
    m.prompt_capacity = rw.prompt_capacity;
    m.rope_pos = RopePosition(spec_.stack, /*prompt=*/false, t, rw.prompt_len);
    m.prefix_len = rw.prompt_len;
    m.decode_base = rw.prompt_len - rw.shared_prompt;  // own-region position of slot 0
    m.flags = KvFormatFlag(rw.policy);
    kv_formats |= KvFormatsBit(rw.policy) | (rw.shared_prompt > 0 ? kernels::kKvSharedPrompts : 0);
    if (q.list >= 0) {
      // Out of order: its own list of written slots (and t, which it writes
      // even when provisional: no other query reads t until a real one writes it).
      m.kv_index = m.decode_base + t;
      m.decode_count = q.list_len;
      m.list_offset = q.list;
      m.flags |= kernels::kTokenListed;
      key_bound = std::max(key_bound, rw.prompt_len + rw.policy.l_dec);
    } else if (rw.sparse) {
      m.kv_index = -1;
      m.decode_count = 0;
      m.flags |= kernels::kTokenSparse;
      key_bound = std::max(key_bound, rw.prompt_len + rw.layout.max_attended);
    } else {
      m.kv_index = m.decode_base + t;  // dense: slot t, attends slots [0, t]
      m.decode_count = t + 1;
      key_bound = std::max(key_bound, rw.prompt_len + rw.policy.l_dec);
    }
    meta[r] = m;
    RowPlan p;
    p.policy = rw.policy;
    p.layout = rw.layout;
    p.ints_offset = rw.ints_offset;
    p.floats_offset = rw.floats_offset;
    p.step = t;
    p.sparse = rw.sparse ? 1 : 0;
    p.out_of_order = q.sinks_written >= 0 ? 1 : 0;
    p.writes = q.writes ? 1 : 0;
    plans[r] = p;
    gather[r] = static_cast<int32_t>(r / 2);
    any_sparse = any_sparse || rw.sparse;
    // Observe outputs of the attention kernel: the diagonal rows' argmin over the
    // non-sink entries (the selection), the score policies' probabilities.
    const bool diagonal = sparse::SelectsByArgmin(rw.policy.kind);  // diagonal, diagonal_sink4, diagonal_grid
    const bool scores = sparse::ObservesScores(rw.policy.kind);     // h2o, tova, alisa, ssd
    if (diagonal && fused_argmin_) {
      // Out of order: the list starts with the sinks written so far.
      observe[r] = q.sinks_written >= 0 ? q.sinks_written : sparse::DiagonalSelectionFirst(rw.policy);
      observe_flags |= kObserveArgmin;
    } else if (scores || diagonal) {
      observe[r] = kernels::kObserveProbs;
      observe_flags |= kObserveScores;
    } else {
      observe[r] = kernels::kObserveNothing;
    }
  }
  for (int64_t i = 0; i < n_pairs; ++i) {
    ids[i] = queries[i].input;
    sampling[i] = ToDevice(*queries[i].sampling, queries[i].t + 1);
  }
  // The row ends of the rank segments (none: one segment).
  std::vector<int32_t> rank_ends;
  if (by_rank) {
    for (int64_t i = 1; i <= n_pairs; ++i) {
      if (i == n_pairs || queries[i].rank != queries[i - 1].rank) rank_ends.push_back(static_cast<int32_t>(2 * i));
    }
    if (rank_ends.size() == 1) rank_ends.clear();
  }
  // A dense row's several queries attend as query groups (its K/V read once for them).
  QueryGroups groups;
  groups.plain_rows = static_cast<int32_t>(n_rows);
  if (rank_ends.empty()) groups = StageQueryGroups(queries, meta);
  std::vector<int32_t> group_shape;
  if (!groups.empty()) {
    group_shape.push_back(groups.plain_rows);
    for (const QueryGroupClass& c : groups.classes) group_shape.insert(group_shape.end(), {c.size, c.groups});
  }
  ARGEN_STATUS_RETURN(Upload(groups.empty() ? layout.group_meta : layout.total));
  if (spec_.vector_tokens()) ARGEN_STATUS_RETURN(StageVectorInputs(queries));
  const int32_t R = static_cast<int32_t>(n_rows);
  // Steps asking for the logits replay graphs too (FinishStep downloads them
  // after the launch): speculative decoding asks at every step.
  if (!use_graphs_ || timer_.enabled() || inject_nan_logits_) {
    timer_.BeginPass();
    ARGEN_STATUS_RETURN(EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats, rank_ends,
                                      groups));  // same split as the graphs
  } else {
    // The key bound (not this step's count) sizes the attention split, so one
    // graph serves every step of a batch; chunks past a row's keys are empty.
    const GraphKey key{R, any_sparse, key_bound, plan_stride_, observe_flags, kv_formats, rank_ends, group_shape};
    auto it = graphs_.find(key);
    // Shapes seen once stay candidates for capture until many more have come
    // (parallel decoding's rank segments make many shapes).
    if (it == graphs_.end() && seen_.size() >= 4096) seen_.clear();
    if (it == graphs_.end() && seen_.insert(key).second) {
      ARGEN_STATUS_RETURN(EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats, rank_ends,
                                        groups));  // first use: eager (lazy inits)
    } else {
      if (it == graphs_.end()) {
        if (graphs_.size() >= 32) ClearGraphs();
        absl::StatusOr<cudaGraphExec_t> exec = CaptureGraph(
            stream_,
            [&] { return EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats, rank_ends, groups); },
            "decode graph");
        if (!exec.ok()) return exec.status();
        it = graphs_.emplace(key, *exec).first;
        seen_.insert(key);
      }
      ARGEN_CUDA_RETURN(cudaGraphLaunch(it->second, stream_), "launch decode graph");
    }
  }
  // The outputs straight into `out` when the queries are its output points
  // in order (the common step), else through the pass's scratch.
  bool direct = true;
  for (int64_t i = 0; i < n_pairs && direct; ++i) direct = queries[i].output == i;
  const int32_t vocab = spec_.logits();
  if (direct) {
    ARGEN_STATUS_RETURN(FinishStep(R, out.sampled.data(), out.row_logits));
  } else {
    pass_sampled_.assign(n_pairs, -1);
    if (out.row_logits != nullptr) pass_logits_.resize(static_cast<size_t>(R) * vocab);
    ARGEN_STATUS_RETURN(FinishStep(R, pass_sampled_.data(), out.row_logits != nullptr ? pass_logits_.data() : nullptr));
    for (int64_t i = 0; i < n_pairs; ++i) {
      const int32_t o = queries[i].output;
      out.sampled[o] = pass_sampled_[i];
      if (out.row_logits == nullptr) continue;
      std::memcpy(out.row_logits + int64_t{2} * o * vocab, pass_logits_.data() + 2 * i * vocab,
                  sizeof(float) * 2 * vocab);
    }
  }
  if (spec_.vector_tokens()) {
    pass_conds_.clear();
    pass_tokens_.clear();
    pass_outputs_.clear();
    for (const DecodeQuery& q : queries) {
      pass_conds_.push_back(q.cond);
      pass_tokens_.push_back(q.t + 1);
      pass_outputs_.push_back(q.output);
    }
    HandOutVectors(pass_conds_, pass_tokens_, pass_outputs_, out);
  }
  timer_.EndPass();
  return absl::OkStatus();
}

}  // namespace argen::cuda
