// The prompt queries of a step (engine/model/step_plan.h) as one prefill
// pass: every row computing prompt positions this step (a whole prompt or
// its next chunk) in passes of at most max_tokens_ tokens, each position
// writing its K/V at its prompt position and attending the row's positions
// 0..itself (the earlier chunks' K/V are in the row's region already). The
// pairs whose prompts complete sample token 0 from their last positions; a
// prompt row keeps its last position for the sharers that come later.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/cuda/step_staging.h"
#include "kernels/elementwise.h"

namespace argen::cuda {

absl::Status CudaBackend::RunPromptPass(const model::StepPlan& plan, const model::StepOutputs& out) {
  const model::PlannedStep& step = planned_;
  const model::StackConfig& d = spec_.stack;
  const int32_t H = d.hidden_size;
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  // The computed entries in plan order, their tokens, and the ordinal of each
  // completing one: its last position's row of last_hidden_.
  std::vector<int32_t>& entries = prompt_entries_;
  std::vector<int32_t>& tokens = prompt_tokens_;
  std::vector<int32_t>& offsets = prompt_offsets_;
  std::vector<int32_t>& completing = completing_;
  std::vector<model::InputSource>& sources = prompt_sources_;
  entries.clear();
  tokens.clear();
  sources.clear();
  offsets.assign(1, 0);
  completing.assign(n_all, -1);
  int32_t n_completing = 0;
  for (int32_t e = 0; e < n_all; ++e) {
    if (!step.computes_prompt[e]) continue;
    entries.push_back(e);
    for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
      tokens.push_back(plan.queries[q].input);
      sources.push_back(plan.queries[q].source);
    }
    offsets.push_back(static_cast<int32_t>(tokens.size()));
    if (step.completes_prompt[e]) completing[e] = n_completing++;
  }

  const StagingLayout layout(max_tokens_, options_.max_batch_rows);
  char* host = host_in_.as<char>();
  auto* meta = reinterpret_cast<kernels::TokenMeta*>(host + layout.meta);
  auto* gather = reinterpret_cast<int32_t*>(host + layout.gather);
  const int64_t n = static_cast<int64_t>(tokens.size());
  const bool any_embedding = std::ranges::find(sources, model::InputSource::kEmbedding) != sources.end();
  int64_t c = 0;  // the computed entry of the pass's first token
  for (int64_t c0 = 0; c0 < n; c0 += max_tokens_) {
    const int64_t c1 = std::min<int64_t>(n, c0 + max_tokens_);
    const int32_t count = static_cast<int32_t>(c1 - c0);
    float* host_x = host_x_pinned_.as<float>();
    if (!any_embedding) {
      ARGEN_STATUS_RETURN(source_->ReadRows(spec_.text_embed, tokens.data() + c0, count, host_x));
    } else {
      // Prompts given (in part) as embeddings (step_plan.h): each position from its source.
      for (int64_t i = c0; i < c1; ++i) {
        float* x = host_x + (i - c0) * H;
        if (sources[i] == model::InputSource::kEmbedding) {
          std::memcpy(x, plan.prompt_embeddings.data() + int64_t{tokens[i]} * H, sizeof(float) * H);
        } else {
          ARGEN_STATUS_RETURN(source_->ReadRows(spec_.text_embed, &tokens[i], 1, x));
        }
      }
    }
    int32_t max_keys = 1, n_last = 0, kv_formats = 0, first_ordinal = -1;
    while (offsets[c + 1] <= c0) ++c;
    for (int64_t i = c0, k = c; i < c1; ++i) {
      while (offsets[k + 1] <= i) ++k;
      const int32_t e = entries[k];
      const Row& rw = *static_cast<const Row*>(step.rows[e]);
      // Positions continue after the chunks of earlier steps (prompt_filled).
      const int32_t position = rw.prompt_filled + static_cast<int32_t>(i - offsets[k]);
      kernels::TokenMeta m;
      m.kv_offset = rw.kv_offset;
      m.capacity = rw.capacity;
      m.rope_pos = RopePosition(d, /*prompt=*/true, position, rw.prompt_len);
      m.kv_index = position;
      m.prefix_len = position + 1;
      m.decode_base = rw.prompt_len;
      m.flags = KvFormatFlag(rw.policy);
      kv_formats |= KvFormatsBit(rw.policy);
      meta[i - c0] = m;
      max_keys = std::max(max_keys, position + 1);
      // Completing rows' last positions are consecutive ordinals in a pass.
      if (i == offsets[k + 1] - 1 && completing[e] >= 0) {
        if (first_ordinal < 0) first_ordinal = completing[e];
        gather[n_last++] = static_cast<int32_t>(i - c0);
      }
    }
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(x_.as(), host_x_pinned_.as(), sizeof(float) * count * int64_t{H},
                                      cudaMemcpyHostToDevice, stream_),
                      "upload prompt embeddings");
    ARGEN_STATUS_RETURN(Upload(layout.sampling));
    ARGEN_STATUS_RETURN(RunLayers(count, max_keys, false, 0, 0, kv_formats));
    if (n_last > 0) {
      ARGEN_CUDA_RETURN(kernels::GatherRowsF32(x_.as<float>(), inputs_.gather, n_last, H,
                                               last_hidden_.as<float>() + int64_t{first_ordinal} * H, stream_),
                        "last prompt positions");
    }
    // The staging area is refilled by the next pass.
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "prefill pass");
  }

  // A completing entry's last position: a row of last_hidden_ (computed this
  // step), or a prompt row's stored one (filled by an earlier step).
  const size_t hidden_bytes = sizeof(float) * H;
  const auto source_hidden = [&](int32_t source) -> const float* {
    if (source >= 0) return last_hidden_.as<float>() + int64_t{completing[source]} * H;
    return pool_.as<float>() + static_cast<const Row*>(step.cached[-1 - source])->hidden_offset;
  };
  for (int32_t e = n_rows; e < n_all; ++e) {
    if (!step.completes_prompt[e]) continue;
    const Row& rw = *static_cast<const Row*>(step.rows[e]);
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(pool_.as<float>() + rw.hidden_offset, source_hidden(step.prompt_source[e]),
                                      hidden_bytes, cudaMemcpyDeviceToDevice, stream_),
                      "store a prompt row's last position");
  }
  // The pairs completing their prompts: their rows' last positions, in pair order, into x_.
  std::vector<int32_t>& outputs = pass_outputs_;
  outputs.clear();
  pass_conds_.clear();
  pass_tokens_.clear();
  auto* sampling = reinterpret_cast<kernels::PairSampling*>(host + layout.sampling);
  int32_t head_rows = 0;
  for (int32_t i = 0; i < n_rows / 2; ++i) {
    if (!step.completes_prompt[2 * i]) continue;
    for (int32_t k = 0; k < 2; ++k, ++head_rows) {
      ARGEN_CUDA_RETURN(
          cudaMemcpyAsync(x_.as<float>() + int64_t{head_rows} * H, source_hidden(step.prompt_source[2 * i + k]),
                          hidden_bytes, cudaMemcpyDeviceToDevice, stream_),
          "a pair's last prompt positions");
    }
    sampling[outputs.size()] = ToDevice(plan.sampling[i], 0);
    outputs.push_back(step.output_offsets[i]);
    pass_conds_.push_back(static_cast<Row*>(step.rows[2 * i]));  // a vector model keeps token 0 there
    pass_tokens_.push_back(0);
  }
  if (head_rows == 0) {  // prompt rows or unfinished chunks alone: nothing to sample
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "prefill");
    return absl::OkStatus();
  }
  const int32_t pairs = head_rows / 2;
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(inputs_.sampling, sampling, sizeof(kernels::PairSampling) * pairs,
                                    cudaMemcpyHostToDevice, stream_),
                    "upload sampling");
  if (spec_.vector_tokens()) ARGEN_STATUS_RETURN(StageVectorOutputs(pass_conds_, pass_tokens_));
  const int32_t vocab = spec_.logits();
  pass_sampled_.assign(pairs, -1);
  if (out.row_logits != nullptr) pass_logits_.resize(static_cast<size_t>(head_rows) * vocab);
  const bool timing = timer_.enabled();
  timer_.Enable(false, stream_);
  absl::Status s = EnqueueHead(x_.as<float>(), head_rows);
  if (s.ok()) {
    s = FinishStep(head_rows, pass_sampled_.data(), out.row_logits != nullptr ? pass_logits_.data() : nullptr);
  }
  timer_.Enable(timing, stream_);
  ARGEN_STATUS_RETURN(s);
  if (spec_.vector_tokens()) HandOutVectors(pass_conds_, pass_tokens_, outputs, out);
  for (int32_t k = 0; k < pairs; ++k) {
    out.sampled[outputs[k]] = pass_sampled_[k];
    if (out.row_logits == nullptr) continue;
    std::memcpy(out.row_logits + int64_t{2} * outputs[k] * vocab, pass_logits_.data() + int64_t{2} * k * vocab,
                sizeof(float) * 2 * vocab);
  }
  return absl::OkStatus();
}

}  // namespace argen::cuda
