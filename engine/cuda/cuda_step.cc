// The CUDA backend's step (engine/model/step_plan.h). A plan is validated
// once (model::CheckStepPlan) and runs as
//   * one prefill pass over every prompt query of the step (whole prompts and
//     chunks alike: cuda_prefill.cc), which samples token 0 of the pairs
//     completing their prompts, then
//   * its decode queries (cuda_decode.cc) in one pass: a dense row's
//     queries t, t+1, ... run together (causal in raster order through their
//     slots); when a sparse row has more than one, the pass's queries are
//     sorted by rank (each row's first queries, then its second ones, ...)
//     and every layer plans, attends and applies the policies rank by rank
//     (a sparse policy's state advances once per query, and a head's state
//     is its layer's alone), while the GEMMs see every query at once. A dense row decoding out
//     of order (parallel decoding) attends its own slot list: the indices
//     written before the query (before the step or by the step's earlier
//     real queries) and the query's own index. A sparse row decoding out of
//     order is planned on the device (sparse::PlanQuery, kernels/policy_kernels.h).
// A rewinding plan (speculative decoding) runs like an in-order one from the
// row's first index (CheckRewinds says why a dense row needs nothing more).
// Passes hold at most max_batch_rows / 2 pairs' queries; more are split in
// order (plan order, or rank order), which keeps a row's queries in order.
// The common step (one decode query per row) is one pass: one captured graph.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_memory.h"
#include "engine/model/fault_guard.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {

absl::Status CudaBackend::Forward(const model::StepPlan& plan, const model::StepOutputs& out) {
  return model::FatalIfDeviceUnusable(ForwardStep(plan, out), DeviceUsable);
}

absl::Status CudaBackend::ForwardStep(const model::StepPlan& plan, const model::StepOutputs& out) {
  model::PlannedStep& step = planned_;
  ARGEN_STATUS_RETURN(model::CheckStepPlan(
      plan, out, limits_, lookup_,
      [this](model::RowId id) -> const model::RowState* { return table_ == nullptr ? nullptr : table_->FindAny(id); },
      &step));
  ARGEN_STATUS_RETURN(CheckRewinds(plan, step));
  if (spec_.vector_tokens()) ARGEN_STATUS_RETURN(CheckVectorInputs(plan));  // cuda_vectors.cc
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  bool any_prompt = false;
  for (int32_t e = 0; e < n_all; ++e) {
    any_prompt = any_prompt || step.completes_prompt[e] || step.computes_prompt[e];
  }
  if (any_prompt) ARGEN_STATUS_RETURN(RunPromptPass(plan, out));

  // The decode queries, pair by pair in plan order.
  std::vector<DecodeQuery>& queries = decode_queries_;
  queries.clear();
  lists_.clear();
  bool by_rank = false;      // a sparse row holds several queries
  bool multi_query = false;  // a row holds several queries
  for (int32_t i = 0; i < n_rows / 2; ++i) {
    const int32_t c = 2 * i;
    if (!step.has_queries[c] || step.kind[c] != model::QueryKind::kDecode) continue;
    const int32_t count = plan.query_offsets[c + 1] - plan.query_offsets[c];
    Row* cond = static_cast<Row*>(step.rows[c]);
    Row* uncond = static_cast<Row*>(step.rows[c + 1]);
    if (count > 1 && (cond->sparse || uncond->sparse)) by_rank = true;
    multi_query = multi_query || count > 1;
    const size_t first = queries.size();
    for (int32_t j = 0; j < count; ++j) {
      const model::Query& q = plan.queries[plan.query_offsets[c] + j];
      queries.push_back({cond, uncond, q.input, q.index, j, &plan.sampling[i], step.output_offsets[i + 1] - count + j});
      queries.back().source = q.source;
      if (q.source == model::InputSource::kTokenVector) {
        queries.back().vector = plan.token_vectors.data() + int64_t{q.input} * limits_.token_dim;
      }
    }
    if (step.in_order[c]) continue;
    if (cond->sparse || uncond->sparse) {
      MarkOutOfOrder(plan, c, std::span(queries).subspan(first));  // planned on the device
    } else {
      AddSlotLists(plan, c, std::span(queries).subspan(first));
    }
  }
  if (!lists_.empty()) ARGEN_STATUS_RETURN(UploadLists());
  std::span<const DecodeQuery> all = queries;
  if (by_rank) {
    pass_queries_.assign(queries.begin(), queries.end());
    std::stable_sort(pass_queries_.begin(), pass_queries_.end(),
                     [](const DecodeQuery& a, const DecodeQuery& b) { return a.rank < b.rank; });
    all = pass_queries_;
  } else if (multi_query) {
    // The rows with one query first, then each row's several (in order):
    // those attend as query groups (StageQueryGroups).
    pass_queries_.clear();
    for (int single = 1; single >= 0; --single) {
      for (size_t i = 0; i < queries.size();) {
        size_t j = i + 1;
        while (j < queries.size() && queries[j].cond == queries[i].cond) ++j;
        if ((j - i == 1) == (single == 1))
          pass_queries_.insert(pass_queries_.end(), queries.begin() + i, queries.begin() + j);
        i = j;
      }
    }
    all = pass_queries_;
  }
  // Split in order: a row's later queries land in the same pass or a later one.
  const size_t per_pass = static_cast<size_t>(options_.max_batch_rows / 2);
  for (size_t first = 0; first < all.size(); first += per_pass) {
    ARGEN_STATUS_RETURN(RunDecodePass(all.subspan(first, std::min(per_pass, all.size() - first)), out, by_rank));
  }
  if (!all.empty()) timer_.CountStep();  // its passes' stage times are one step's
  model::CommitStep(plan, step);
  return absl::OkStatus();
}

absl::Status CudaBackend::CheckRewinds(const model::StepPlan& plan, const model::PlannedStep& step) const {
  // A dense row keeps nothing on the device but its K/V: decode index t has
  // its own slot (L_p + t), a query at t attends slots [0, t] and nothing
  // records which were written. Rewinding it to `first` (the CPU backend's
  // sparse::RewindTo on the dense policy's slot map) is therefore the shared
  // RowState alone (CommitStep: next_step from first): the step writes first,
  // first + 1, ... again, K/V and fp8 scales alike, and no query reads a slot
  // above its own index, so the dropped drafts' K/V is never attended. A row
  // with device policy state (a sparse policy: ring, scores, selections)
  // would need that state stepped back on the device too, which this backend
  // does not do: refused before any state changes, whatever policies
  // model::SupportsRewind admits.
  for (size_t e = 0; e < step.rewind_to.size(); ++e) {
    if (step.rewind_to[e] < 0 || !static_cast<const Row*>(step.rows[e])->sparse) continue;
    return absl::UnimplementedError(absl::StrCat(
        "Step: rows[", e, "] = ", plan.rows[e],
        " rewinds (StepPlan::rewinds: speculative decoding) under sparsity policy ",
        std::string(sparse::PolicyName(step.rows[e]->policy.kind)), "; the cuda backend rewinds dense rows only"));
  }
  return absl::OkStatus();
}

void CudaBackend::AddSlotLists(const model::StepPlan& plan, int32_t entry, std::span<DecodeQuery> queries) {
  // The pair's rows carry the same queries and so have the same written indices.
  const model::RowState& row = *planned_.rows[entry];
  const std::span<const model::Query> step_queries =
      plan.queries.subspan(plan.query_offsets[entry], plan.query_offsets[entry + 1] - plan.query_offsets[entry]);
  for (size_t j = 0; j < queries.size(); ++j) {
    const int32_t t = queries[j].t;
    queries[j].list = static_cast<int32_t>(lists_.size());
    // Written before the step, or by one of the step's earlier (real) queries;
    // the step's queries are increasing, so those come in index order too.
    size_t k = 0;
    for (int32_t i = 0; i < t; ++i) {
      while (k < j && step_queries[k].index < i) ++k;
      const bool by_step = k < j && step_queries[k].index == i && !step_queries[k].provisional;
      if (by_step || row.Written(i)) lists_.push_back(i);
    }
    lists_.push_back(t);
    queries[j].list_len = static_cast<int32_t>(lists_.size()) - queries[j].list;
  }
}

void CudaBackend::MarkOutOfOrder(const model::StepPlan& plan, int32_t entry, std::span<DecodeQuery> queries) const {
  const model::RowState& row = *planned_.rows[entry];
  const std::span<const model::Query> step_queries =
      plan.queries.subspan(plan.query_offsets[entry], plan.query_offsets[entry + 1] - plan.query_offsets[entry]);
  for (size_t j = 0; j < queries.size(); ++j) {
    queries[j].writes = !step_queries[j].provisional;
    // Sinks are never evicted: those written before the step or by its earlier real queries.
    int32_t sinks = 0;
    for (int32_t i = 0; i < std::min(queries[j].t, row.policy.n_sink); ++i) {
      bool by_step = false;
      for (size_t k = 0; k < j; ++k) by_step = by_step || (step_queries[k].index == i && !step_queries[k].provisional);
      sinks += by_step || row.Written(i) ? 1 : 0;
    }
    queries[j].sinks_written = sinks;
  }
}

absl::Status CudaBackend::UploadLists() {
  const size_t bytes = sizeof(int32_t) * lists_.size();
  if (bytes > token_lists_.bytes()) {
    // Graphs hold the old buffer's address; the step's work before this point has not started.
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "slot lists");
    ClearGraphs();
    token_lists_ = DeviceBuffer();
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(std::max<size_t>(bytes, size_t{1} << 20), "slot lists");
    if (!b.ok()) return b.status();
    token_lists_ = *std::move(b);
  }
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(token_lists_.as(), lists_.data(), bytes, cudaMemcpyHostToDevice, stream_),
                    "upload slot lists");
  return absl::OkStatus();
}

}  // namespace argen::cuda
