#include "engine/model/step_plan.h"

namespace argen::model {

void StepPlanBuilder::AddRow(RowId row) {
  last_ = &pairs_;
  last_->rows.push_back(row);
  last_->offsets.push_back(last_->offsets.back());
}

void StepPlanBuilder::AddPromptRow(RowId row) {
  last_ = &prompts_;
  last_->rows.push_back(row);
  last_->offsets.push_back(last_->offsets.back());
}

void StepPlanBuilder::AddQuery(QueryKind kind, int32_t input, int32_t index, bool provisional) {
  last_->queries.push_back({kind, input, index, provisional});
  ++last_->offsets.back();
}

void StepPlanBuilder::AddPromptQueries(std::span<const int32_t> ids, int32_t first, int32_t n) {
  for (int32_t i = first; i < first + n; ++i) AddQuery(QueryKind::kPrompt, ids[i], i);
}

void StepPlanBuilder::AddPromptEmbeddings(std::span<const float> embeddings, int32_t width, int32_t first, int32_t n) {
  for (int32_t i = first; i < first + n; ++i) {
    const int32_t row = static_cast<int32_t>(prompt_embeddings_.size() / width);
    const auto at = embeddings.begin() + static_cast<std::ptrdiff_t>(i) * width;
    prompt_embeddings_.insert(prompt_embeddings_.end(), at, at + width);
    last_->queries.push_back({QueryKind::kPrompt, row, i, false, InputSource::kEmbedding});
    ++last_->offsets.back();
  }
}

void StepPlanBuilder::AddTokenVectorQuery(std::span<const float> vector, int32_t index) {
  const int32_t row = vector.empty() ? 0 : static_cast<int32_t>(token_vectors_.size() / vector.size());
  token_vectors_.insert(token_vectors_.end(), vector.begin(), vector.end());
  last_->queries.push_back({QueryKind::kDecode, row, index, false, InputSource::kTokenVector});
  ++last_->offsets.back();
}

void StepPlanBuilder::AddMadeVectorQuery(int32_t index, bool provisional) {
  last_->queries.push_back({QueryKind::kDecode, 0, index, provisional, InputSource::kMadeVector});
  ++last_->offsets.back();
}

void StepPlanBuilder::Clear() {
  pairs_.Clear();
  prompts_.Clear();
  sampling_.clear();
  out_of_order_ = false;
  rewinds_ = false;
  prompt_embeddings_.clear();
  token_vectors_.clear();
  last_ = &pairs_;
}

StepPlan StepPlanBuilder::Plan() {
  if (prompts_.rows.empty()) {
    return {pairs_.rows,   prompts_.rows,      pairs_.offsets, pairs_.queries, sampling_,
            out_of_order_, prompt_embeddings_, token_vectors_, rewinds_};
  }
  // The prompt rows' entries follow the pair rows' (a prefill's: copied once).
  const int32_t base = pairs_.offsets.back();
  offsets_ = pairs_.offsets;
  for (size_t i = 1; i < prompts_.offsets.size(); ++i) offsets_.push_back(base + prompts_.offsets[i]);
  joined_ = pairs_.queries;
  joined_.insert(joined_.end(), prompts_.queries.begin(), prompts_.queries.end());
  return {pairs_.rows,   prompts_.rows,      offsets_,       joined_, sampling_,
          out_of_order_, prompt_embeddings_, token_vectors_, rewinds_};
}

}  // namespace argen::model
