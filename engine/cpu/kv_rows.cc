#include "engine/cpu/kv_rows.h"

#include "absl/strings/str_cat.h"

namespace argen::cpu {

KvRows::KvRows(const model::ModelDims& dims, int64_t budget_bytes)
    : layers_(dims.num_layers),
      kv_heads_(dims.num_kv_heads),
      head_dim_(dims.head_dim),
      budget_bytes_(budget_bytes) {}

int64_t KvRows::BytesPerTokenRow() const {
  return int64_t{2} * layers_ * kv_heads_ * head_dim_ * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<model::RowId> KvRows::Allocate(int32_t prompt_len,
                                              const sparse::ResolvedPolicy& policy) {
  if (prompt_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt_len must be positive, got ", prompt_len));
  }
  if (policy.n_slots <= 0 || policy.n_att <= 0 || policy.n_att > policy.n_slots ||
      policy.l_dec <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy: n_slots (", policy.n_slots, "), n_att (", policy.n_att, ") and l_dec (",
        policy.l_dec,
        ") must be positive with n_att <= n_slots; resolve it with sparse::ResolvePolicy"));
  }
  const int64_t bytes =
      sparse::KvBytes(policy, prompt_len, 1, layers_, kv_heads_, head_dim_, sizeof(float));
  if (budget_bytes_ > 0 && bytes_in_use_ + bytes > budget_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool: a row needs ", bytes, " bytes, ",
                                                     budget_bytes_ - bytes_in_use_, " of ",
                                                     budget_bytes_, " are free"));
  }
  auto row = std::make_unique<KvRow>();
  row->prompt_len = prompt_len;
  row->policy = policy;
  row->layout = sparse::LayoutFor(policy);
  const int64_t floats = int64_t{layers_} * kv_heads_ * row->positions() * head_dim_;
  row->k.assign(floats, 0.0f);
  row->v.assign(floats, 0.0f);
  const int64_t heads = int64_t{layers_} * kv_heads_;
  row->policy_ints.assign(heads * row->layout.ints_per_head, 0);
  row->policy_floats.assign(heads * row->layout.floats_per_head, 0.0f);
  for (int32_t h = 0; h < heads; ++h) sparse::InitState(policy, row->layout, row->State(h), h);
  bytes_in_use_ += bytes;

  model::RowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    rows_[id] = std::move(row);
  } else {
    id = static_cast<model::RowId>(rows_.size());
    rows_.push_back(std::move(row));
  }
  return id;
}

void KvRows::Free(model::RowId id) {
  KvRow* row = Find(id);
  if (row == nullptr) return;
  bytes_in_use_ -= sparse::KvBytes(row->policy, row->prompt_len, 1, layers_, kv_heads_, head_dim_,
                                   sizeof(float));
  rows_[id].reset();
  free_ids_.push_back(id);
}

KvRow* KvRows::Find(model::RowId id) {
  if (id < 0 || id >= static_cast<model::RowId>(rows_.size())) return nullptr;
  return rows_[id].get();
}

}  // namespace argen::cpu
