// The CUDA backend's step (engine/model/step_plan.h): a plan runs as at most
// one whole-prompt prefill call and one decode call per query rank (each
// row's first queries, then its second ones, ...), so a row's queries of one
// step are causal in raster order exactly as if they came one per step. The
// common step (one decode query per row) is one decode call: one captured
// graph. Chunked prefill is not implemented on this device yet.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_memory.h"
#include "engine/model/fault_guard.h"

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
  if (!step.all_in_order) {
    // Never wrong results: refused before any state changes (CheckStepPlan changes none).
    return absl::UnimplementedError(
        "cuda backend: out-of-order and provisional decode queries (parallel decoding, parallel_window > 0) are "
        "not implemented on this device yet; use parallel_window 0 or the cpu backend");
  }
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  bool any_prompt = false;
  int32_t max_rank = 0;
  for (int32_t e = 0; e < n_all; ++e) {
    if (step.computes_prompt[e] && (step.rows[e]->prompt_filled != 0 || !step.completes_prompt[e])) {
      return absl::UnimplementedError(
          absl::StrCat("cuda backend: rows[", e, "] feeds part of its prompt (positions ", step.rows[e]->prompt_filled,
                       "..): ", "chunked prefill is not implemented on this device; feed whole prompts"));
    }
    any_prompt = any_prompt || step.completes_prompt[e] || step.computes_prompt[e];
    if (step.has_queries[e] && step.kind[e] == model::QueryKind::kDecode) {
      max_rank = std::max(max_rank, plan.query_offsets[e + 1] - plan.query_offsets[e]);
    }
  }
  if (!any_prompt && max_rank == 1 && step.decode_queries == n_rows) {
    // The common step: one decode query per row, outputs in pair order.
    step_calls_.ids.clear();
    step_calls_.steps.clear();
    for (int32_t r = 0; r < n_rows; r += 2) {
      const model::Query& q = plan.queries[plan.query_offsets[r]];
      step_calls_.ids.push_back(q.input);
      step_calls_.steps.push_back(q.index);
    }
    return DecodeStep({plan.rows, step_calls_.ids, step_calls_.steps, plan.sampling}, out);
  }
  if (any_prompt) ARGEN_STATUS_RETURN(PrefillPrompts(plan, out));
  for (int32_t rank = 0; rank < max_rank; ++rank) ARGEN_STATUS_RETURN(DecodeRank(plan, rank, out));
  return absl::OkStatus();
}

namespace {

// Copies a sub-call's results to the step's output points.
void ScatterOutputs(const std::vector<int32_t>& sampled, const std::vector<int32_t>& outputs,
                    const std::vector<float>& logits, int32_t vocab, const model::StepOutputs& out) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    out.sampled[outputs[k]] = sampled[k];
    if (out.row_logits == nullptr) continue;
    std::memcpy(out.row_logits + int64_t{2} * outputs[k] * vocab, logits.data() + int64_t{2} * k * vocab,
                sizeof(float) * 2 * vocab);
  }
}

}  // namespace

absl::Status CudaBackend::PrefillPrompts(const model::StepPlan& plan, const model::StepOutputs& out) {
  const model::PlannedStep& step = planned_;
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  step_calls_.rows.clear();
  step_calls_.prompt_rows.clear();
  step_calls_.tokens.clear();
  step_calls_.offsets.assign(1, 0);
  step_calls_.sampling.clear();
  step_calls_.outputs.clear();
  // An entry's prompt: its queries, or (a sharing row listing none) its source's.
  const auto add_prompt = [&](int32_t e) {
    const int32_t source = step.has_queries[e] ? e : step.prompt_source[e];
    if (source >= 0) {
      for (int32_t q = plan.query_offsets[source]; q < plan.query_offsets[source + 1]; ++q) {
        step_calls_.tokens.push_back(plan.queries[q].input);
      }
    } else {
      const std::vector<int32_t>& tokens = step.cached[-1 - source]->prompt_tokens;
      step_calls_.tokens.insert(step_calls_.tokens.end(), tokens.begin(), tokens.end());
    }
    step_calls_.offsets.push_back(static_cast<int32_t>(step_calls_.tokens.size()));
  };
  for (int32_t i = 0; i < n_rows / 2; ++i) {
    if (!step.completes_prompt[2 * i]) continue;
    for (int32_t k = 0; k < 2; ++k) {
      step_calls_.rows.push_back(plan.rows[2 * i + k]);
      add_prompt(2 * i + k);
    }
    step_calls_.sampling.push_back(plan.sampling[i]);
    step_calls_.outputs.push_back(step.output_offsets[i]);
  }
  for (int32_t e = n_rows; e < n_all; ++e) {
    step_calls_.prompt_rows.push_back(plan.prompt_rows[e - n_rows]);
    add_prompt(e);
  }
  step_calls_.sampled.assign(step_calls_.sampling.size(), -1);
  const int32_t vocab = spec_.logits();
  if (out.row_logits != nullptr) step_calls_.logits.resize(step_calls_.rows.size() * static_cast<size_t>(vocab));
  ARGEN_STATUS_RETURN(PrefillStep(
      {step_calls_.rows, step_calls_.offsets, step_calls_.tokens, step_calls_.sampling, step_calls_.prompt_rows},
      {step_calls_.sampled, out.row_logits != nullptr ? step_calls_.logits.data() : nullptr}));
  ScatterOutputs(step_calls_.sampled, step_calls_.outputs, step_calls_.logits, vocab, out);
  return absl::OkStatus();
}

absl::Status CudaBackend::DecodeRank(const model::StepPlan& plan, int32_t rank, const model::StepOutputs& out) {
  const model::PlannedStep& step = planned_;
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  step_calls_.rows.clear();
  step_calls_.ids.clear();
  step_calls_.steps.clear();
  step_calls_.sampling.clear();
  step_calls_.outputs.clear();
  for (int32_t i = 0; i < n_rows / 2; ++i) {
    const int32_t c = 2 * i;
    if (!step.has_queries[c] || step.kind[c] != model::QueryKind::kDecode) continue;
    const int32_t count = plan.query_offsets[c + 1] - plan.query_offsets[c];
    if (rank >= count) continue;
    const model::Query& q = plan.queries[plan.query_offsets[c] + rank];
    step_calls_.rows.push_back(plan.rows[c]);
    step_calls_.rows.push_back(plan.rows[c + 1]);
    step_calls_.ids.push_back(q.input);
    step_calls_.steps.push_back(q.index);
    step_calls_.sampling.push_back(plan.sampling[i]);
    step_calls_.outputs.push_back(step.output_offsets[i + 1] - count + rank);
  }
  step_calls_.sampled.assign(step_calls_.sampling.size(), -1);
  const int32_t vocab = spec_.logits();
  if (out.row_logits != nullptr) step_calls_.logits.resize(step_calls_.rows.size() * static_cast<size_t>(vocab));
  ARGEN_STATUS_RETURN(
      DecodeStep({step_calls_.rows, step_calls_.ids, step_calls_.steps, step_calls_.sampling},
                 {step_calls_.sampled, out.row_logits != nullptr ? step_calls_.logits.data() : nullptr}));
  ScatterOutputs(step_calls_.sampled, step_calls_.outputs, step_calls_.logits, vocab, out);
  return absl::OkStatus();
}

}  // namespace argen::cuda
