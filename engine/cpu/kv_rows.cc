#include "engine/cpu/kv_rows.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"
#include "kernels/kv_fp8.h"

namespace argen::cpu {

void StoreKv(const KvRow& row, const float* k, const float* v, int32_t head_dim, float* k_dst, float* v_dst) {
  std::memcpy(k_dst, k, sizeof(float) * head_dim);
  std::memcpy(v_dst, v, sizeof(float) * head_dim);
  if (row.policy.kv_format == sparse::KvFormat::kFp8E4m3) {
    kernels::RoundThroughE4m3(k_dst, head_dim);
    kernels::RoundThroughE4m3(v_dst, head_dim);
  }
}

KvRows::KvRows(const model::StackConfig& stack, int64_t budget_bytes, int32_t max_prompt_tokens)
    : layers_(stack.num_layers),
      kv_heads_(stack.num_kv_heads),
      head_dim_(stack.head_dim),
      hidden_size_(stack.hidden_size),
      budget_bytes_(budget_bytes),
      max_prompt_tokens_(max_prompt_tokens) {}

int64_t KvRows::BytesPerTokenRow() const {
  return int64_t{2} * layers_ * kv_heads_ * head_dim_ * static_cast<int64_t>(sizeof(float));
}

// The CPU ledger counts the K/V arrays (the policy state is a few ints per
// slot of host memory beside them).
int64_t KvRows::RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const {
  return sparse::KvBytes(policy, prompt_len, 1, layers_, kv_heads_, head_dim_, sizeof(float));
}

int64_t KvRows::budget_bytes() const { return budget_bytes_ > 0 ? budget_bytes_ : std::numeric_limits<int64_t>::max(); }

bool KvRows::CanAllocate(int32_t prompt_len, const sparse::ResolvedPolicy& policy, int32_t count) const {
  if (!model::CheckRowRequest(prompt_len, policy, max_prompt_tokens_, std::numeric_limits<int32_t>::max()).ok()) {
    return false;
  }
  const int64_t bytes = RowBytes(prompt_len, policy);
  return budget_bytes_ <= 0 || count <= (budget_bytes_ - bytes_in_use_) / bytes;
}

bool KvRows::CanAllocatePairs(int32_t cond_len, int32_t uncond_len, const sparse::ResolvedPolicy& policy,
                              int32_t pairs) const {
  for (int32_t len : {cond_len, uncond_len}) {
    if (!model::CheckRowRequest(len, policy, max_prompt_tokens_, std::numeric_limits<int32_t>::max()).ok()) {
      return false;
    }
  }
  const int64_t pair_bytes = RowBytes(cond_len, policy) + RowBytes(uncond_len, policy);
  return budget_bytes_ <= 0 || pairs <= (budget_bytes_ - bytes_in_use_) / pair_bytes;
}

int64_t KvRows::SharingRowBytes(const sparse::ResolvedPolicy& policy) const { return RowBytes(0, policy); }

bool KvRows::CanAllocateGroup(int32_t cond_len, int32_t uncond_len, const sparse::ResolvedPolicy& policy,
                              int32_t images, bool share) const {
  if (!share) return CanAllocatePairs(cond_len, uncond_len, policy, images);
  if (!CanAllocatePairs(cond_len, uncond_len, policy, 1)) return false;
  const int64_t bytes =
      RowBytes(cond_len, policy) + RowBytes(uncond_len, policy) + int64_t{images - 1} * 2 * SharingRowBytes(policy);
  return budget_bytes_ <= 0 || bytes <= budget_bytes_ - bytes_in_use_;
}

absl::StatusOr<model::RowId> KvRows::Allocate(int32_t prompt_len, const sparse::ResolvedPolicy& policy) {
  if (absl::Status s =
          model::CheckRowRequest(prompt_len, policy, max_prompt_tokens_, std::numeric_limits<int32_t>::max());
      !s.ok()) {
    return s;
  }
  auto row = std::make_unique<KvRow>();
  row->prompt_len = prompt_len;
  row->policy = policy;
  row->stored_prompt = prompt_len;
  return Place(std::move(row), RowBytes(prompt_len, policy));
}

absl::StatusOr<model::RowId> KvRows::AllocateSharing(model::RowId owner_id, const sparse::ResolvedPolicy& policy) {
  KvRow* owner = Find(owner_id);
  if (owner == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("prompt owner ", owner_id, " is not an allocated row"));
  }
  if (owner->prompt_owner != model::kNoRow) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt owner ", owner_id, " itself shares row ", owner->prompt_owner, "'s prompt KV"));
  }
  if (absl::Status s =
          model::CheckRowRequest(owner->prompt_len, policy, max_prompt_tokens_, std::numeric_limits<int32_t>::max());
      !s.ok()) {
    return s;
  }
  if (policy.kv_format != owner->policy.kv_format) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt owner ", owner_id, " stores its KV as ", std::string(sparse::KvFormatName(owner->policy.kv_format)),
        ", the row asks ", std::string(sparse::KvFormatName(policy.kv_format))));
  }
  auto row = std::make_unique<KvRow>();
  row->prompt_len = owner->prompt_len;
  row->policy = policy;
  row->stored_prompt = 0;
  row->prompt_owner = owner_id;
  row->prompt_source = owner;
  absl::StatusOr<model::RowId> id = Place(std::move(row), SharingRowBytes(policy));
  if (id.ok()) ++owner->prompt_sharers;
  return id;
}

int64_t KvRows::PromptRowBytes(int32_t prompt_len) const {
  return BytesPerTokenRow() * prompt_len + int64_t{hidden_size_} * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<model::RowId> KvRows::AllocatePrompt(int32_t prompt_len, sparse::KvFormat format) {
  if (prompt_len <= 0 || prompt_len > max_prompt_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt_len ", prompt_len, " must be in [1, max_prompt_tokens ", max_prompt_tokens_, "]"));
  }
  if (sparse::KvFormatName(format) == "unknown") {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt row: KV format ", static_cast<int32_t>(format), " is not known"));
  }
  auto row = std::make_unique<KvRow>();
  row->prompt_len = prompt_len;
  row->prompt_row = true;
  row->policy.kv_format = format;  // dense, no decode slots: the prompt alone
  row->stored_prompt = prompt_len;
  row->last_hidden.assign(hidden_size_, 0.0f);
  return Place(std::move(row), PromptRowBytes(prompt_len));
}

bool KvRows::CanPlace(std::span<const int64_t> sizes) const {
  if (budget_bytes_ <= 0) return true;
  int64_t total = 0;
  for (int64_t size : sizes) total += size;
  return total <= budget_bytes_ - bytes_in_use_;
}

absl::StatusOr<model::RowId> KvRows::Place(std::unique_ptr<KvRow> row, int64_t bytes) {
  if (budget_bytes_ > 0 && bytes_in_use_ + bytes > budget_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV pool: a row needs ", bytes, " bytes, ", budget_bytes_ - bytes_in_use_, " of ", budget_bytes_, " are free"));
  }
  const sparse::ResolvedPolicy& policy = row->policy;
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

int64_t KvRows::BytesOf(const KvRow& row) const {
  if (row.prompt_row) return PromptRowBytes(row.prompt_len);
  return row.stored_prompt > 0 ? RowBytes(row.prompt_len, row.policy) : SharingRowBytes(row.policy);
}

void KvRows::Release(model::RowId id) {
  bytes_in_use_ -= BytesOf(*rows_[id]);
  rows_[id].reset();
  free_ids_.push_back(id);
}

void KvRows::Free(model::RowId id) {
  KvRow* row = Find(id);
  if (row == nullptr) return;
  if (row->prompt_sharers > 0) {
    row->released = true;  // its sharers still read its prompt KV
    return;
  }
  const model::RowId owner = row->prompt_owner;
  Release(id);
  if (owner == model::kNoRow) return;
  KvRow& o = *rows_[owner];  // an owner outlives its sharers
  if (--o.prompt_sharers == 0 && o.released) Release(owner);
}

KvRow* KvRows::Find(model::RowId id) {
  if (id < 0 || id >= static_cast<model::RowId>(rows_.size())) return nullptr;
  KvRow* row = rows_[id].get();
  return row == nullptr || row->released ? nullptr : row;
}

const KvRow* KvRows::FindAny(model::RowId id) const {
  if (id < 0 || id >= static_cast<model::RowId>(rows_.size())) return nullptr;
  return rows_[id].get();
}

const float* KvRows::PromptK(const KvRow& row, int32_t layer) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.k.data() + layer * LayerFloats(src);
}

const float* KvRows::PromptV(const KvRow& row, int32_t layer) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.v.data() + layer * LayerFloats(src);
}

int64_t KvRows::PromptHeadStride(const KvRow& row) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.positions() * head_dim_;
}

}  // namespace argen::cpu
