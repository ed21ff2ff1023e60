#include "engine/model/batch_checks.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace argen::model {
namespace {

using absl::InvalidArgumentError;
using absl::StrCat;

absl::Status CheckShape(const char* call, int64_t n_rows, int32_t max_batch_rows) {
  if (n_rows == 0 || n_rows % 2 != 0) {
    return InvalidArgumentError(
        StrCat(call, ": rows must be a positive even count (cond, uncond pairs), got ", n_rows));
  }
  if (n_rows > max_batch_rows) {
    return InvalidArgumentError(StrCat(call, ": ", n_rows, " rows exceed max_batch_rows ", max_batch_rows));
  }
  return absl::OkStatus();
}

// Resolves every row id, rejecting unknown ids and rows listed twice (the two
// rows of a pair may have different prompt lengths: Lumina-mGPT's guidance row
// is its image header alone).
absl::Status ResolveRows(const char* call, std::span<const RowId> ids, const RowLookup& lookup,
                         std::vector<RowState*>* rows) {
  rows->assign(ids.size(), nullptr);
  for (size_t r = 0; r < ids.size(); ++r) {
    RowState* row = lookup(ids[r]);
    if (row == nullptr)
      return InvalidArgumentError(StrCat(call, ": rows[", r, "] = ", ids[r], " is not an allocated row"));
    (*rows)[r] = row;
  }
  for (RowState* row : *rows) row->in_batch = false;
  for (size_t r = 0; r < ids.size(); ++r) {
    RowState* row = (*rows)[r];
    if (row->in_batch) return InvalidArgumentError(StrCat(call, ": rows[", r, "] = ", ids[r], " appears twice"));
    row->in_batch = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSampling(const char* call, std::span<const SamplingSpec> sampling) {
  for (size_t i = 0; i < sampling.size(); ++i) {
    const SamplingSpec& s = sampling[i];
    const struct {
      const char* field;
      absl::Status status;
    } checks[] = {{"temperature", CheckTemperature(s.temperature)},
                  {"cfg_weight", CheckCfgWeight(s.cfg_weight)},
                  {"top_k", CheckTopK(s.top_k, 0)},
                  {"top_p", CheckTopP(s.top_p)}};
    for (const auto& c : checks) {
      if (!c.status.ok())
        return InvalidArgumentError(StrCat(call, ": sampling[", i, "].", c.field, " ", c.status.message()));
    }
    if (s.image_index < 0) {
      return InvalidArgumentError(StrCat(call, ": sampling[", i, "].image_index must be >= 0, got ", s.image_index));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRowRequest(int32_t prompt_len, const sparse::ResolvedPolicy& policy, int32_t max_prompt_tokens,
                             int32_t max_l_dec) {
  if (prompt_len <= 0 || prompt_len > max_prompt_tokens) {
    return InvalidArgumentError(
        StrCat("prompt_len ", prompt_len, " must be in [1, max_prompt_tokens ", max_prompt_tokens, "]"));
  }
  if (policy.n_slots <= 0 || policy.n_att <= 0 || policy.n_att > policy.n_slots || policy.l_dec <= 0 ||
      policy.n_slots > policy.l_dec || policy.l_dec > max_l_dec) {
    return InvalidArgumentError(StrCat("policy: n_slots (", policy.n_slots, "), n_att (", policy.n_att, ") and l_dec (",
                                       policy.l_dec, ") must be positive with n_att <= n_slots <= l_dec <= ", max_l_dec,
                                       "; resolve it with sparse::ResolvePolicy"));
  }
  return absl::OkStatus();
}

absl::Status CheckPrefillBatch(const PrefillBatch& b, const StepOutputs& out, const BatchLimits& limits,
                               const RowLookup& lookup, std::vector<RowState*>* rows) {
  const int64_t n_rows = static_cast<int64_t>(b.rows.size());
  const int64_t n_prompt = static_cast<int64_t>(b.prompt_rows.size());
  const int64_t n_all = n_rows + n_prompt;
  const int64_t n_pairs = n_rows / 2;
  // A call of prompt rows alone samples nothing.
  if (n_rows > 0 || n_prompt == 0) {
    if (absl::Status s = CheckShape("Prefill", n_rows, limits.max_batch_rows); !s.ok()) return s;
  }
  if (n_all > limits.max_batch_rows) {
    return InvalidArgumentError(StrCat("Prefill: ", n_rows, " rows and ", n_prompt,
                                       " prompt rows exceed max_batch_rows ", limits.max_batch_rows));
  }
  if (static_cast<int64_t>(b.token_offsets.size()) != n_all + 1 || static_cast<int64_t>(b.sampling.size()) != n_pairs ||
      static_cast<int64_t>(out.sampled.size()) != n_pairs) {
    return InvalidArgumentError(
        "Prefill: token_offsets needs n_rows + n_prompt_rows + 1 entries, sampling and sampled one per pair");
  }
  if (absl::Status s = CheckSampling("Prefill", b.sampling); !s.ok()) return s;
  if (b.token_offsets[0] != 0 || b.token_offsets[n_all] != static_cast<int32_t>(b.tokens.size())) {
    return InvalidArgumentError("Prefill: token_offsets must start at 0 and end at tokens.size()");
  }
  for (int64_t i = 0; i < n_all; ++i) {
    if (b.token_offsets[i + 1] < b.token_offsets[i]) {
      return InvalidArgumentError(StrCat("Prefill: token_offsets must not decrease (entry ", i + 1, ")"));
    }
  }
  std::vector<RowId> ids(b.rows.begin(), b.rows.end());
  ids.insert(ids.end(), b.prompt_rows.begin(), b.prompt_rows.end());
  if (absl::Status s = ResolveRows("Prefill", ids, lookup, rows); !s.ok()) return s;
  for (int64_t r = 0; r < n_all; ++r) {
    const RowState& row = *(*rows)[r];
    const bool listed_as_prompt = r >= n_rows;
    const std::string entry =
        listed_as_prompt ? StrCat("prompt_rows[", r - n_rows, "] = ", ids[r]) : StrCat("rows[", r, "] = ", ids[r]);
    if (row.prompt_row != listed_as_prompt) {
      return InvalidArgumentError(StrCat(
          "Prefill: ", entry,
          listed_as_prompt ? " is not a prompt row (list it in rows)" : " is a prompt row (list it in prompt_rows)"));
    }
    if (row.prefilled) return InvalidArgumentError(StrCat("Prefill: ", entry, " was already prefilled"));
    const int32_t len = b.token_offsets[r + 1] - b.token_offsets[r];
    if (len != row.prompt_len) {
      return InvalidArgumentError(
          StrCat("Prefill: ", entry, " has ", len, " tokens but was allocated for prompt_len ", row.prompt_len));
    }
  }
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= limits.text_vocab) {
      return InvalidArgumentError(StrCat("Prefill: tokens[", i, "] = ", b.tokens[i],
                                         " is outside the text vocabulary [0, ", limits.text_vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDecodeBatch(const DecodeBatch& b, const StepOutputs& out, const BatchLimits& limits,
                              const RowLookup& lookup, std::vector<RowState*>* rows) {
  const int64_t n_rows = static_cast<int64_t>(b.rows.size());
  const int64_t n_pairs = n_rows / 2;
  if (absl::Status s = CheckShape("Decode", n_rows, limits.max_batch_rows); !s.ok()) return s;
  if (static_cast<int64_t>(b.image_tokens.size()) != n_pairs || static_cast<int64_t>(b.steps.size()) != n_pairs ||
      static_cast<int64_t>(b.sampling.size()) != n_pairs || static_cast<int64_t>(out.sampled.size()) != n_pairs) {
    return InvalidArgumentError("Decode: image_tokens, steps, sampling and sampled need one entry per pair");
  }
  if (absl::Status s = CheckSampling("Decode", b.sampling); !s.ok()) return s;
  if (absl::Status s = ResolveRows("Decode", b.rows, lookup, rows); !s.ok()) return s;
  for (int64_t r = 0; r < n_rows; ++r) {
    const RowState& row = *(*rows)[r];
    const int32_t t = b.steps[r / 2];
    if (!row.prefilled) {
      return InvalidArgumentError(StrCat("Decode: rows[", r, "] = ", b.rows[r], " has not been prefilled"));
    }
    if (t != row.next_step || t >= row.policy.l_dec) {
      return InvalidArgumentError(StrCat("Decode: steps[", r / 2, "] = ", t, " but row ", b.rows[r], " expects step ",
                                         row.next_step, " (of l_dec ", row.policy.l_dec, ")"));
    }
  }
  for (int64_t i = 0; i < n_pairs; ++i) {
    if (b.image_tokens[i] < 0 || b.image_tokens[i] >= limits.input_rows) {
      return InvalidArgumentError(StrCat("Decode: image_tokens[", i, "] = ", b.image_tokens[i],
                                         " is outside the input table [0, ", limits.input_rows, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status PlanPrefill(const PrefillBatch& b, std::span<RowState* const> rows,
                         const std::function<const RowState*(RowId)>& any_row, PrefillPlan* plan) {
  const int32_t n_rows = static_cast<int32_t>(b.rows.size());
  const int32_t n_all = static_cast<int32_t>(rows.size());
  const auto tokens = [&](int32_t i) {
    return b.tokens.subspan(b.token_offsets[i], b.token_offsets[i + 1] - b.token_offsets[i]);
  };
  const auto id_of = [&](int32_t i) { return i < n_rows ? b.rows[i] : b.prompt_rows[i - n_rows]; };
  // source[r]: the entry whose last position gives row r's logits, or
  // -1 - k for cached prompt row k.
  std::vector<int32_t> source(n_all);
  std::unordered_map<RowId, int32_t> index_of;
  plan->cached.clear();
  for (int32_t r = 0; r < n_all; ++r) {
    source[r] = r;
    if (rows[r]->prompt_owner != kNoRow && index_of.empty()) {
      for (int32_t i = 0; i < n_all; ++i) index_of.emplace(id_of(i), i);
    }
  }
  for (int32_t r = 0; r < n_rows && !index_of.empty(); ++r) {
    const RowId owner = rows[r]->prompt_owner;
    if (owner == kNoRow) continue;
    auto it = index_of.find(owner);
    if (it != index_of.end()) {
      if (!std::ranges::equal(tokens(r), tokens(it->second))) {
        return InvalidArgumentError(StrCat("Prefill: rows[", r, "] = ", b.rows[r], " shares the prompt KV of row ",
                                           owner, " but its prompt tokens differ from the owner's"));
      }
      source[r] = it->second;
      continue;
    }
    const RowState* o = any_row(owner);
    if (o == nullptr || !o->prompt_row || !o->prefilled) {
      return InvalidArgumentError(StrCat("Prefill: rows[", r, "] = ", b.rows[r], " shares the prompt KV of row ", owner,
                                         ", which is not in this batch (prefill a sharing row with its owner, or ",
                                         "after its prompt row is filled)"));
    }
    if (!std::ranges::equal(tokens(r), o->prompt_tokens)) {
      return InvalidArgumentError(StrCat("Prefill: rows[", r, "] = ", b.rows[r], " shares the prompt KV of prompt row ",
                                         owner, " but its prompt tokens differ from the prompt row's"));
    }
    auto c = std::ranges::find(plan->cached, o);
    source[r] = -1 - static_cast<int32_t>(c - plan->cached.begin());
    if (c == plan->cached.end()) plan->cached.push_back(o);
  }
  plan->computed.clear();
  plan->tokens.clear();
  plan->offsets.assign(1, 0);
  std::vector<int32_t> computed_index(n_all, -1);
  for (int32_t r = 0; r < n_all; ++r) {
    if (source[r] != r) continue;  // a sharing row computes nothing
    computed_index[r] = static_cast<int32_t>(plan->computed.size());
    plan->computed.push_back(r);
    plan->tokens.insert(plan->tokens.end(), tokens(r).begin(), tokens(r).end());
    plan->offsets.push_back(static_cast<int32_t>(plan->tokens.size()));
  }
  const int32_t n_computed = static_cast<int32_t>(plan->computed.size());
  plan->logits_row.assign(n_rows, -1);
  plan->identity = n_computed == n_rows;
  for (int32_t r = 0; r < n_rows; ++r) {
    plan->logits_row[r] = source[r] >= 0 ? computed_index[source[r]] : n_computed + (-1 - source[r]);
    plan->identity = plan->identity && plan->logits_row[r] == r;
  }
  return absl::OkStatus();
}

void MarkPrefilled(const PrefillBatch& b, std::span<RowState* const> rows) {
  const size_t n_rows = b.rows.size();
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r]->prefilled = true;
    rows[r]->prompt_filled = rows[r]->prompt_len;
    if (r >= n_rows) {
      const int32_t i = static_cast<int32_t>(r);
      rows[r]->prompt_tokens.assign(b.tokens.begin() + b.token_offsets[i], b.tokens.begin() + b.token_offsets[i + 1]);
    }
  }
}

void AdvanceStep(std::span<RowState* const> rows) {
  for (RowState* r : rows) r->next_step += 1;
}

}  // namespace argen::model
