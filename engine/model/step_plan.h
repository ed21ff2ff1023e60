// A step of the decoder as a plan of query tokens: the one input of
// model::Backend::Forward (engine/model/backend.h).
//
// Each row of a step contributes zero or more query tokens. A query carries
// its input and its index:
//   * a prompt query (QueryKind::kPrompt): a text token id (a row of
//     spec.text_embed) at prompt position `index`. A row's prompt may arrive
//     in chunks over several steps (chunked prefill): each chunk is the next
//     consecutive positions. The query writes its K/V at that prompt position
//     and attends the row's prompt positions 0..index.
//   * a decode query (QueryKind::kDecode): an input-table id (the sampled
//     logit plus input.sampled_offset, or a forced id) at decode index t,
//     position prompt_len + t. It writes its K/V into the slot the row's
//     policy picks for t and attends the prompt KV plus the policy's attended
//     set for t, which includes the row's queries of the same step that come
//     before it (causal in raster order: query j of a row sees the K/V that
//     queries 0..j-1 of the step wrote, exactly as if they had come one per
//     step).
// A row may feed nothing in a step (the shorter prompt of a pair waiting for
// its partner's chunks). A row's queries in one step are all of one kind and in increasing index
// order. The two rows of a CFG pair carry the same decode queries (inputs,
// indices, provisional flags); their prompts may differ (Lumina-mGPT's
// guidance row is shorter).
//
// Decode order. The row tracks which decode indices are written
// (RowState::next_step and RowState::written, engine/model/batch_checks.h).
// In order (today's decoding, parallel_window 0): a step's decode indices are
// consecutive from the row's next step, as above. Out of order (parallel
// decoding, ZipAR-style image rows in flight; the policies that plan it,
// sparse::PlansOutOfOrder: dense, sliding_window, streaming_llm, diagonal,
// diagonal_sink4; the plan says so: StepPlan::out_of_order, else every decode
// query must be in order): a step's decode indices are increasing but need
// not be consecutive, each one not yet written. A query at index t then
// attends the prompt KV plus the decode indices t' < t written before this
// step or by an earlier query of the step that its policy attends at t and
// still holds (dense: all of them; docs/policies.md), plus itself:
// raster-causal, and never an index not yet written (an unfilled slot). Its
// K/V goes to index t's slot and marks t written.
//   A *provisional* decode query (Query::provisional, out of order only)
// stands in for a token not generated yet: its input is a stand-in id (ZipAR
// feeds the newest token of the image row above), at index t's true position
// prompt_len + t. It attends as above (itself included) but writes nothing:
// no later query sees its K/V and t stays unwritten, so a later query at t
// with the real token writes it. It samples token t + 1 like any decode query.
//   Rewinding (speculative decoding, engine/model/speculative.h; dense
// policy only; the plan says so: StepPlan::rewinds): a row decoding in order
// may start its step's decode queries at any index first <= its next step,
// not only at it. Its K/V at decode indices >= first is dropped before the
// step (as if never written: the step writes first, first + 1, ... again in
// order, and no query attends an index above its own), so drafts rejected
// after an earlier step are overwritten. The step goes on in order from
// first; afterwards the row's next step is first + its queries.
//
// Outputs. A pair samples one token per *output point*, in pair order and,
// within a pair, in this order:
//   * token 0, in the step whose queries complete both rows' prompts (a row
//     sharing its owner's prompt KV completes with its owner, or at once when
//     the owner is a filled prompt row), from the last prompt positions;
//   * token t + 1 for every decode query t, from that query's output.
// Sampling is keyed (seed, image_index, token index), so feeding a row's
// tokens k at a time samples exactly what feeding them one per step does.
// StepOutputs::sampled holds one entry per output point; row_logits, when
// set, [2 x output points x logits()]: point o's cond row at 2o, uncond at
// 2o + 1.
//
// Prompt rows (prompt-KV sharing across requests) take prompt queries like
// any row and sample nothing; they follow the pair rows in the plan.
//
// Vector inputs and outputs. A query's input need not be an id
// (Query::source):
//   * kEmbedding (prompt queries): row `input` of StepPlan::prompt_embeddings
//     ([n x hidden_size], from the host) is the query's input vector as it
//     is, instead of a row of spec.text_embed: prompts that arrive as
//     embeddings (LlamaGen t2i's caption features). Such a prompt has no
//     token ids, so a prompt row (sharing across requests) cannot hold it.
//   * kTokenVector (decode queries; models whose output stage makes vectors,
//     spec.output.token_dim > 0): row `input` of StepPlan::token_vectors
//     ([n x token_dim], from the host: teacher forcing, tests) is token t's
//     vector, fed through the input stage's vector_in.
//   * kMadeVector (decode queries; token_dim > 0): token t's vector as the
//     pair's output stage made it in an earlier step, kept by the backend
//     (on its device): nothing crosses to or from the host. `input` is 0.
// A vector model's output stage hands each output point's final-normed
// hidden states (cond and uncond row; through spec.output.vector_out when
// present) to the family's token head (engine/model/token_head.h), which
// draws the token vector (keyed like sampling); the backend keeps it for
// kMadeVector queries and copies it to StepOutputs::token_vectors when that
// is set. StepOutputs::sampled is 0 for every output point of such a model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/sampler.h"

namespace argen::model {

using RowId = int32_t;

enum class QueryKind : uint8_t {
  kPrompt = 0,  // input: text token id; index: prompt position
  kDecode = 1,  // input: input-table id; index: decode index t
};

// Where a query's input comes from (see "Vector inputs and outputs" above).
enum class InputSource : uint8_t {
  kId = 0,           // prompt: text token id; decode: input-table id
  kEmbedding = 1,    // prompt: row `input` of StepPlan::prompt_embeddings
  kTokenVector = 2,  // decode: row `input` of StepPlan::token_vectors
  kMadeVector = 3,   // decode: the pair's kept vector of token t (input 0)
};

struct Query {
  QueryKind kind = QueryKind::kDecode;
  int32_t input = 0;
  int32_t index = 0;
  bool provisional = false;  // decode only: attends, samples, writes no K/V (see above)
  InputSource source = InputSource::kId;
  bool operator==(const Query&) const = default;
};

struct StepPlan {
  std::span<const RowId> rows;              // 2 * n_pairs: CFG pairs (cond, uncond)
  std::span<const RowId> prompt_rows = {};  // then the prompt rows this step feeds
  std::span<const int32_t> query_offsets;   // rows + prompt rows + 1 offsets into queries
  std::span<const Query> queries;
  std::span<const SamplingSpec> sampling;  // n_pairs
  // Whether decode queries may come out of order or provisional (see above).
  bool out_of_order = false;
  std::span<const float> prompt_embeddings = {};  // [n x hidden_size]: kEmbedding inputs
  std::span<const float> token_vectors = {};      // [n x spec.output.token_dim]: kTokenVector inputs
  // Whether an in-order row may start below its next step (rewinding, see above).
  bool rewinds = false;
};

// A StepPlan that owns its arrays (the engine and tests build plans with it).
class StepPlanBuilder {
 public:
  // Starts row `row`'s entry (a pair row; Finish orders prompt rows after them).
  void AddRow(RowId row);
  void AddPromptRow(RowId row);
  // Appends a query to the entry started last.
  void AddQuery(QueryKind kind, int32_t input, int32_t index, bool provisional = false);
  // Convenience: the prompt tokens [first, first + n) of `ids` as prompt queries.
  void AddPromptQueries(std::span<const int32_t> ids, int32_t first, int32_t n);
  // Prompt positions [first, first + n) given as embeddings: rows of
  // `embeddings` ([prompt_len x width], width = hidden_size), copied into the plan.
  void AddPromptEmbeddings(std::span<const float> embeddings, int32_t width, int32_t first, int32_t n);
  // A decode query at index t whose input is `vector` (token_dim floats, copied).
  void AddTokenVectorQuery(std::span<const float> vector, int32_t index);
  // A decode query at index t whose input is the pair's kept vector of token t.
  void AddMadeVectorQuery(int32_t index, bool provisional = false);
  void AddSampling(const SamplingSpec& s) { sampling_.push_back(s); }
  void AllowOutOfOrder() { out_of_order_ = true; }  // until Clear
  void AllowRewind() { rewinds_ = true; }           // until Clear
  void Clear();
  bool empty() const { return pairs_.rows.empty() && prompts_.rows.empty(); }
  size_t rows() const { return pairs_.rows.size(); }  // pair rows added
  size_t pairs() const { return sampling_.size(); }

  // The plan over the builder's arrays (valid until the builder changes).
  StepPlan Plan();

 private:
  // Entries in order with their queries, flat so that Clear keeps the memory:
  // the pair rows', then the prompt rows' (joined by Plan).
  struct Entries {
    std::vector<RowId> rows;
    std::vector<int32_t> offsets{0};
    std::vector<Query> queries;
    void Clear() {
      rows.clear();
      offsets.assign(1, 0);
      queries.clear();
    }
  };
  Entries pairs_, prompts_;
  Entries* last_ = &pairs_;
  std::vector<int32_t> offsets_;  // joined, when there are prompt rows
  std::vector<Query> joined_;
  std::vector<SamplingSpec> sampling_;
  bool out_of_order_ = false;
  bool rewinds_ = false;
  std::vector<float> prompt_embeddings_, token_vectors_;
};

}  // namespace argen::model
