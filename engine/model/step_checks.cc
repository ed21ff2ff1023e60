#include "engine/model/step_checks.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/sparse/policy.h"
#include "kernels/sparse/policy_rewind.h"

namespace argen::model {
using absl::InvalidArgumentError;
using absl::StrCat;

bool SupportsOutOfOrder(const sparse::ResolvedPolicy& policy) { return sparse::PlansOutOfOrder(policy); }
bool SupportsRewind(const sparse::ResolvedPolicy& policy) { return sparse::PlansRewind(policy); }

absl::Status CheckStepPlan(const StepPlan& plan, const StepOutputs& out, const BatchLimits& limits,
                           const RowLookup& lookup, const std::function<const RowState*(RowId)>& any_row,
                           PlannedStep* step) {
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  const int32_t n_prompt = static_cast<int32_t>(plan.prompt_rows.size());
  const int32_t n_all = n_rows + n_prompt;
  const int32_t n_pairs = n_rows / 2;
  if (n_rows % 2 != 0 || n_all == 0) {
    return InvalidArgumentError(
        StrCat("Step: rows must be an even count (cond, uncond pairs), with prompt rows at least one entry; got ",
               n_rows, " rows and ", n_prompt, " prompt rows"));
  }
  if (n_all > limits.max_batch_rows) {
    return InvalidArgumentError(
        StrCat("Step: ", n_rows, " rows and ", n_prompt, " prompt rows exceed max_batch_rows ", limits.max_batch_rows));
  }
  if (static_cast<int32_t>(plan.query_offsets.size()) != n_all + 1 ||
      static_cast<int32_t>(plan.sampling.size()) != n_pairs) {
    return InvalidArgumentError("Step: query_offsets needs rows + prompt rows + 1 entries, sampling one per pair");
  }
  if (plan.query_offsets[0] != 0 || plan.query_offsets[n_all] != static_cast<int32_t>(plan.queries.size())) {
    return InvalidArgumentError("Step: query_offsets must start at 0 and end at queries.size()");
  }
  for (int32_t e = 0; e < n_all; ++e) {
    if (plan.query_offsets[e + 1] < plan.query_offsets[e]) {
      return InvalidArgumentError(StrCat("Step: query_offsets must not decrease (entry ", e + 1, ")"));
    }
  }
  if (absl::Status s = CheckSampling("Step", plan.sampling); !s.ok()) return s;
  if (limits.hidden_size <= 0 || plan.prompt_embeddings.size() % limits.hidden_size != 0) {
    return InvalidArgumentError(StrCat("Step: prompt_embeddings has ", plan.prompt_embeddings.size(),
                                       " floats, not rows of hidden_size ", limits.hidden_size));
  }
  if (!plan.token_vectors.empty() && (limits.token_dim <= 0 || plan.token_vectors.size() % limits.token_dim != 0)) {
    return InvalidArgumentError(
        limits.token_dim <= 0
            ? std::string("Step: token_vectors given but the model's tokens are codes (output.token_dim 0)")
            : StrCat("Step: token_vectors has ", plan.token_vectors.size(), " floats, not rows of token_dim ",
                     limits.token_dim));
  }
  const int64_t n_embeddings = static_cast<int64_t>(plan.prompt_embeddings.size()) / limits.hidden_size;
  const int64_t n_token_vectors =
      limits.token_dim > 0 ? static_cast<int64_t>(plan.token_vectors.size()) / limits.token_dim : 0;
  if (limits.token_dim > 0 && out.row_logits != nullptr) {
    return InvalidArgumentError("Step: row_logits asked of a vector model (it has no logits; see token_vectors)");
  }
  if (limits.token_dim <= 0 && out.token_vectors != nullptr) {
    return InvalidArgumentError("Step: token_vectors asked of a model whose tokens are codes");
  }

  // Rows: known, listed once, prompt rows where they belong.
  const auto id_of = [&](int32_t e) { return e < n_rows ? plan.rows[e] : plan.prompt_rows[e - n_rows]; };
  const auto entry_name = [&](int32_t e) {
    return e < n_rows ? StrCat("rows[", e, "] = ", plan.rows[e]) : StrCat("prompt_rows[", e - n_rows, "] = ", id_of(e));
  };
  step->rows.assign(n_all, nullptr);
  for (int32_t e = 0; e < n_all; ++e) {
    RowState* row = lookup(id_of(e));
    if (row == nullptr) return InvalidArgumentError(StrCat("Step: ", entry_name(e), " is not an allocated row"));
    step->rows[e] = row;
  }
  for (RowState* row : step->rows) row->in_batch = false;
  for (int32_t e = 0; e < n_all; ++e) {
    RowState* row = step->rows[e];
    if (row->in_batch) return InvalidArgumentError(StrCat("Step: ", entry_name(e), " appears twice"));
    row->in_batch = true;
    if (row->prompt_row != (e >= n_rows)) {
      return InvalidArgumentError(
          StrCat("Step: ", entry_name(e),
                 e >= n_rows ? " is not a prompt row (list it in rows)" : " is a prompt row (list it in prompt_rows)"));
    }
  }

  // Each entry's queries: one kind, in order, within the row's bounds.
  const auto queries = [&](int32_t e) {
    return plan.queries.subspan(plan.query_offsets[e], plan.query_offsets[e + 1] - plan.query_offsets[e]);
  };
  step->kind.assign(n_all, QueryKind::kPrompt);
  step->has_queries.assign(n_all, 0);
  step->completes_prompt.assign(n_all, 0);
  step->computes_prompt.assign(n_all, 0);
  step->prompt_queries = 0;
  step->decode_queries = 0;
  step->in_order.assign(n_all, 1);
  step->all_in_order = true;
  step->rewind_to.assign(n_all, -1);
  for (int32_t e = 0; e < n_all; ++e) {
    const RowState& row = *step->rows[e];
    const std::span<const Query> qs = queries(e);
    if (qs.empty()) continue;
    // Where the row's decode queries start: its next step, or below it when
    // the plan rewinds (an in-order row of a policy that can step back).
    int32_t first = row.next_step;
    if (qs[0].kind == QueryKind::kDecode && plan.rewinds && row.prefilled && !row.prompt_row &&
        SupportsRewind(row.policy) && qs[0].index >= 0 && qs[0].index < row.next_step &&
        std::ranges::find(row.written, uint8_t{1}) == row.written.end()) {
      first = qs[0].index;
      step->rewind_to[e] = first;
    }
    if (qs[0].kind == QueryKind::kDecode) {
      // In order: consecutive from first, none provisional, nothing written beyond.
      bool in_order = std::ranges::find(row.written, uint8_t{1}) == row.written.end();
      for (size_t j = 0; j < qs.size() && in_order; ++j) {
        in_order = qs[j].index == first + static_cast<int32_t>(j) && !qs[j].provisional;
      }
      step->in_order[e] = in_order ? 1 : 0;
      step->all_in_order = step->all_in_order && in_order;
    }
    step->has_queries[e] = 1;
    const QueryKind kind = qs[0].kind;
    step->kind[e] = kind;
    for (size_t j = 0; j < qs.size(); ++j) {
      const Query& q = qs[j];
      const auto at = [&] { return StrCat("Step: ", entry_name(e), " query ", j); };  // errors only
      if (q.kind != kind) return InvalidArgumentError(StrCat(at(), " mixes prompt and decode queries in one step"));
      if (kind == QueryKind::kPrompt) {
        if (q.provisional) return InvalidArgumentError(StrCat(at(), ": provisional applies to decode queries only"));
        if (row.prefilled) return InvalidArgumentError(StrCat(at(), ": the row was already prefilled"));
        const int32_t expected = row.prompt_filled + static_cast<int32_t>(j);
        if (q.index != expected || q.index >= row.prompt_len) {
          return InvalidArgumentError(StrCat(at(), ": prompt position ", q.index, " but the row expects ", expected,
                                             " (of prompt_len ", row.prompt_len, ")"));
        }
        if (q.source == InputSource::kEmbedding) {
          if (q.input < 0 || q.input >= n_embeddings) {
            return InvalidArgumentError(
                StrCat(at(), ": embedding row ", q.input, " is outside prompt_embeddings [0, ", n_embeddings, ")"));
          }
          if (row.prompt_row) {
            return InvalidArgumentError(
                StrCat(at(), ": a prompt row holds token ids; a prompt of embeddings cannot be shared through one"));
          }
        } else if (q.source != InputSource::kId) {
          return InvalidArgumentError(StrCat(at(), ": a prompt query's input is a token id or an embedding"));
        } else if (q.input < 0 || q.input >= limits.text_vocab) {
          return InvalidArgumentError(
              StrCat(at(), ": token ", q.input, " is outside the text vocabulary [0, ", limits.text_vocab, ")"));
        }
      } else {
        if (row.prompt_row) return InvalidArgumentError(StrCat(at(), ": a prompt row takes no decode queries"));
        if (!row.prefilled) return InvalidArgumentError(StrCat(at(), ": the row has not been prefilled"));
        const int32_t expected = first + static_cast<int32_t>(j);
        if (step->in_order[e] || !plan.out_of_order || !SupportsOutOfOrder(row.policy)) {
          // In order: consecutive from next_step, none provisional (a row that
          // wrote out of order must go on so: its plans must allow it).
          const bool written_beyond =
              !step->in_order[e] && std::ranges::find(row.written, uint8_t{1}) != row.written.end();
          if (q.index != expected || q.provisional || q.index >= row.policy.l_dec || written_beyond) {
            const bool out_of_order = q.index < row.policy.l_dec;  // the index alone: not past the end
            return InvalidArgumentError(StrCat(
                at(), ": decode index ", q.index, q.provisional ? " (provisional)" : "", " but the row expects ",
                expected, " (of l_dec ", row.policy.l_dec, ")",
                out_of_order ? "; out-of-order and provisional decode queries (parallel decoding) need a plan that "
                               "allows them and a policy that plans them (dense, sliding_window, streaming_llm, "
                               "diagonal, diagonal_sink4); indices below it (rewinding: speculative decoding) need "
                               "a rewinding plan and the dense policy"
                             : ""));
          }
        } else if (q.index < 0 || q.index >= row.policy.l_dec || row.Written(q.index) ||
                   (j > 0 && q.index <= qs[j - 1].index)) {
          return InvalidArgumentError(StrCat(at(), ": decode index ", q.index, " must be in [0, l_dec ",
                                             row.policy.l_dec,
                                             "), above the step's previous query of the row and not yet written"));
        }
        if (q.source == InputSource::kTokenVector) {
          if (limits.token_dim <= 0) {
            return InvalidArgumentError(StrCat(at(), ": a token vector input, but the model's tokens are codes"));
          }
          if (q.input < 0 || q.input >= n_token_vectors) {
            return InvalidArgumentError(
                StrCat(at(), ": token vector row ", q.input, " is outside token_vectors [0, ", n_token_vectors, ")"));
          }
        } else if (q.source == InputSource::kMadeVector) {
          // Whether the vector was made is the backend's to check: it keeps them.
          if (limits.token_dim <= 0 || q.input != 0) {
            return InvalidArgumentError(StrCat(at(), limits.token_dim <= 0
                                                         ? ": a made-vector input, but the model's tokens are codes"
                                                         : ": a made-vector query's input must be 0"));
          }
        } else if (q.source != InputSource::kId) {
          return InvalidArgumentError(StrCat(at(), ": a decode query's input is an id or a token vector"));
        } else if (q.input < 0 || q.input >= limits.input_rows) {
          return InvalidArgumentError(
              StrCat(at(), ": input id ", q.input, " is outside the input table [0, ", limits.input_rows, ")"));
        }
      }
    }
  }

  // Two queries feed the same input: the same fields, and for inputs given
  // as vectors the same floats (the rows of a pair or of a shared prompt each
  // list their own copy).
  const auto same_input = [&](const Query& a, const Query& b) {
    if (a.kind != b.kind || a.index != b.index || a.provisional != b.provisional || a.source != b.source) return false;
    if (a.input == b.input) return true;
    std::span<const float> rows = plan.prompt_embeddings;
    int32_t width = limits.hidden_size;
    if (a.source == InputSource::kTokenVector) {
      rows = plan.token_vectors;
      width = limits.token_dim;
    } else if (a.source != InputSource::kEmbedding) {
      return false;
    }
    return std::ranges::equal(rows.subspan(static_cast<size_t>(a.input) * width, width),
                              rows.subspan(static_cast<size_t>(b.input) * width, width));
  };

  // Prompts: who completes, and where each completing row's logits come from.
  // Entries by row id, made only when a sharing row completes here (rare: a new request's rows).
  std::unordered_map<RowId, int32_t> index_of;
  for (int32_t e = 0; e < n_rows && index_of.empty(); ++e) {
    if (step->rows[e]->prompt_owner != kNoRow && !step->rows[e]->prefilled) {
      for (int32_t i = 0; i < n_all; ++i) index_of.emplace(id_of(i), i);
    }
  }
  step->prompt_source.assign(n_all, -1);
  step->cached.clear();
  // Own prompts first (a sharer completes with its owner).
  for (int32_t e = 0; e < n_all; ++e) {
    const RowState& row = *step->rows[e];
    if (row.prompt_owner != kNoRow || !step->has_queries[e] || step->kind[e] != QueryKind::kPrompt) continue;
    step->computes_prompt[e] = 1;
    step->prompt_queries += static_cast<int32_t>(queries(e).size());
    if (row.prompt_filled + static_cast<int32_t>(queries(e).size()) == row.prompt_len) {
      step->completes_prompt[e] = 1;
      step->prompt_source[e] = e;
    }
  }
  for (int32_t e = 0; e < n_rows; ++e) {
    const RowState& row = *step->rows[e];
    if (row.prompt_owner == kNoRow || row.prefilled) continue;
    if (step->has_queries[e] && step->kind[e] == QueryKind::kDecode) continue;  // refused above (not prefilled)
    const std::span<const Query> qs = queries(e);
    if (!qs.empty() && static_cast<int32_t>(qs.size()) != row.prompt_len) {
      return InvalidArgumentError(StrCat("Step: ", entry_name(e), " shares the prompt KV of row ", row.prompt_owner,
                                         ": list its whole prompt or none of it"));
    }
    auto it = index_of.find(row.prompt_owner);
    if (it != index_of.end()) {
      const int32_t o = it->second;
      if (!step->completes_prompt[o]) {
        return InvalidArgumentError(StrCat("Step: ", entry_name(e), " shares the prompt KV of row ", row.prompt_owner,
                                           ", whose prompt does not complete in this step"));
      }
      if (!qs.empty() && (step->rows[o]->prompt_filled != 0 || !std::ranges::equal(qs, queries(o), same_input))) {
        return InvalidArgumentError(StrCat("Step: ", entry_name(e), " shares the prompt KV of row ", row.prompt_owner,
                                           " but its prompt tokens differ from the owner's"));
      }
      step->completes_prompt[e] = 1;
      step->prompt_source[e] = o;
      continue;
    }
    const RowState* owner = any_row(row.prompt_owner);
    if (owner == nullptr || !owner->prompt_row || !owner->prefilled) {
      return InvalidArgumentError(StrCat("Step: ", entry_name(e), " shares the prompt KV of row ", row.prompt_owner,
                                         ", which is not in this batch (prefill a sharing row with its owner, or ",
                                         "after its prompt row is filled)"));
    }
    if (!qs.empty()) {
      for (size_t j = 0; j < qs.size(); ++j) {
        if (qs[j].source != InputSource::kId || qs[j].input != owner->prompt_tokens[j]) {
          return InvalidArgumentError(StrCat("Step: ", entry_name(e), " shares the prompt KV of prompt row ",
                                             row.prompt_owner, " but its prompt tokens differ from the prompt row's"));
        }
      }
    }
    auto c = std::ranges::find(step->cached, owner);
    step->prompt_source[e] = -1 - static_cast<int32_t>(c - step->cached.begin());
    if (c == step->cached.end()) step->cached.push_back(owner);
    step->completes_prompt[e] = 1;
  }

  // Pairs: the same decode queries, prompts completing together; outputs.
  step->output_offsets.assign(1, 0);
  for (int32_t i = 0; i < n_pairs; ++i) {
    const int32_t c = 2 * i, u = 2 * i + 1;
    if (step->completes_prompt[c] != step->completes_prompt[u]) {
      return InvalidArgumentError(StrCat("Step: the rows of pair ", i, " (", plan.rows[c], ", ", plan.rows[u],
                                         ") must complete their prompts in the same step"));
    }
    const bool decode_c = step->has_queries[c] && step->kind[c] == QueryKind::kDecode;
    const bool decode_u = step->has_queries[u] && step->kind[u] == QueryKind::kDecode;
    if (decode_c != decode_u || (decode_c && !std::ranges::equal(queries(c), queries(u), same_input))) {
      return InvalidArgumentError(StrCat("Step: the rows of pair ", i, " (", plan.rows[c], ", ", plan.rows[u],
                                         ") must carry the same decode queries"));
    }
    if (decode_c && step->rows[c]->next_step != step->rows[u]->next_step) {
      return InvalidArgumentError(StrCat("Step: the rows of pair ", i, " are at different decode steps"));
    }
    const int32_t n = (step->completes_prompt[c] ? 1 : 0) + (decode_c ? static_cast<int32_t>(queries(c).size()) : 0);
    if (decode_c) step->decode_queries += 2 * static_cast<int32_t>(queries(c).size());
    step->output_offsets.push_back(step->output_offsets.back() + n);
  }
  step->outputs = step->output_offsets.back();
  if (static_cast<int32_t>(out.sampled.size()) != step->outputs) {
    return InvalidArgumentError(
        StrCat("Step: sampled has ", out.sampled.size(), " entries, the plan has ", step->outputs, " output points"));
  }
  return absl::OkStatus();
}

void CommitStep(const StepPlan& plan, const PlannedStep& step) {
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  for (int32_t e = 0; e < n_all; ++e) {
    RowState& row = *step.rows[e];
    const int32_t n = plan.query_offsets[e + 1] - plan.query_offsets[e];
    if (step.has_queries[e] && step.kind[e] == QueryKind::kDecode) {
      if (step.in_order[e]) {
        row.next_step = plan.queries[plan.query_offsets[e]].index + n;  // from where it started (rewinding: below)
        continue;
      }
      if (row.written.empty()) row.written.assign(row.policy.l_dec, 0);
      for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
        if (!plan.queries[q].provisional) row.written[plan.queries[q].index] = 1;
      }
      while (row.next_step < row.policy.l_dec && row.written[row.next_step]) row.written[row.next_step++] = 0;
      continue;
    }
    if (step.computes_prompt[e]) {
      if (row.prompt_row) {
        for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
          row.prompt_tokens.push_back(plan.queries[q].input);
        }
      }
      row.prompt_filled += n;
    }
    if (step.completes_prompt[e]) {
      row.prompt_filled = row.prompt_len;
      row.prefilled = true;
    }
  }
}

void PlanOfPrefill(const PrefillBatch& b, StepPlanBuilder* builder) {
  builder->Clear();
  const int32_t n_rows = static_cast<int32_t>(b.rows.size());
  const int32_t n_all = n_rows + static_cast<int32_t>(b.prompt_rows.size());
  for (int32_t e = 0; e < n_all; ++e) {
    if (e < n_rows) {
      builder->AddRow(b.rows[e]);
    } else {
      builder->AddPromptRow(b.prompt_rows[e - n_rows]);
    }
    const int32_t first = b.token_offsets[e];
    builder->AddPromptQueries(b.tokens.subspan(first, b.token_offsets[e + 1] - first), 0,
                              b.token_offsets[e + 1] - first);
  }
  for (const SamplingSpec& s : b.sampling) builder->AddSampling(s);
}

void PlanOfDecode(const DecodeBatch& b, StepPlanBuilder* builder) {
  builder->Clear();
  for (size_t r = 0; r < b.rows.size(); ++r) {
    builder->AddRow(b.rows[r]);
    builder->AddQuery(QueryKind::kDecode, b.image_tokens[r / 2], b.steps[r / 2]);
  }
  for (const SamplingSpec& s : b.sampling) builder->AddSampling(s);
}

}  // namespace argen::model
