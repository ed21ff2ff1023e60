#include "engine/kv/kv_manager.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"
#include "kernels/sparse/policy.h"

namespace argen::kv {

using model::kNoRow;
using model::RowState;

std::vector<int64_t> PlacementSizes(const model::RowSizer& sizer, int32_t cond_len, int32_t uncond_len,
                                    const sparse::ResolvedPolicy& policy, int32_t images, Sharing sharing) {
  const int32_t lens[2] = {cond_len, uncond_len};
  std::vector<int64_t> sizes;
  if (sharing == Sharing::kAcrossRequests) {  // both prompts made (their tokens unknown here)
    for (int32_t len : lens) sizes.push_back(sizer.PromptRowBytes(len, policy.kv_format));
  }
  sizes.reserve(sizes.size() + 2 * static_cast<size_t>(std::max(images, 0)));
  for (int32_t i = 0; i < images; ++i) {
    for (int32_t len : lens) {
      const bool reads_another = sharing == Sharing::kAcrossRequests || (sharing == Sharing::kWithinRequest && i > 0);
      sizes.push_back(reads_another ? sizer.SharingRowBytes(len, policy) : sizer.RowBytes(len, policy));
    }
  }
  return sizes;
}

RequestBytes BytesOf(const model::RowSizer& sizer, const RequestShape& r) {
  const int32_t cond_len = static_cast<int32_t>(r.cond_ids.size());
  const int32_t uncond_len = static_cast<int32_t>(r.uncond_ids.size());
  const int64_t owners = sizer.RowBytes(cond_len, r.policy) + sizer.RowBytes(uncond_len, r.policy);
  const int64_t sharers = sizer.SharingRowBytes(cond_len, r.policy) + sizer.SharingRowBytes(uncond_len, r.policy);
  RequestBytes b;
  switch (r.sharing) {
    case Sharing::kAcrossRequests:
      // Its rows hold decode slots only; the prompts it may have to make are shared.
      b.own_kv_bytes = sharers * r.images;
      b.kv_bytes =
          b.own_kv_bytes + sizer.PromptRowBytes(cond_len, r.policy.kv_format) +
          (std::ranges::equal(r.uncond_ids, r.cond_ids) ? 0 : sizer.PromptRowBytes(uncond_len, r.policy.kv_format));
      return b;
    case Sharing::kWithinRequest:
      b.kv_bytes = owners + sharers * (r.images - 1);
      break;
    case Sharing::kNone:
      b.kv_bytes = owners * r.images;
      break;
  }
  b.own_kv_bytes = b.kv_bytes;
  return b;
}

PromptKey KeyOf(const sparse::ResolvedPolicy& policy, std::span<const int32_t> ids) {
  return {static_cast<int32_t>(policy.kv_format), std::vector<int32_t>(ids.begin(), ids.end())};
}

KvManager::KvManager(model::Backend& device)
    : device_(device), pool_(device.Pool()), ranges_(pool_.ranges ? pool_.bytes : 0) {
  device_.SetRowTable(&table_);
}

KvManager::~KvManager() {
  // An owner or prompt row freed before its sharers goes with the last of them.
  for (RowId id = 0; id < static_cast<RowId>(table_.slots.size()); ++id) FreeRow(id);
  device_.SetRowTable(nullptr);
}

// ---- Requests ----

std::vector<int64_t> KvManager::PlacementSizes(const RequestShape& request) const {
  return kv::PlacementSizes(device_, request, [this](const PromptKey& key) { return shared_.contains(key); });
}

bool KvManager::CanPlace(const RequestShape& request) const {
  for (const std::span<const int32_t> ids : {request.cond_ids, request.uncond_ids}) {
    if (!CheckRow(static_cast<int32_t>(ids.size()), request.policy).ok()) return false;
  }
  return CanPlace(PlacementSizes(request));
}

absl::Status KvManager::Place(const RequestShape& request, RequestRows* out) {
  out->rows.clear();
  out->prompts.clear();
  const std::span<const int32_t> ids[2] = {request.cond_ids, request.uncond_ids};
  const auto fail = [&](absl::Status s) {
    Free(out);
    return s;
  };
  if (request.sharing == Sharing::kAcrossRequests) {
    // The shared prompts (found or made), then the rows reading them.
    for (const std::span<const int32_t> prompt : ids) {
      PromptKey key = KeyOf(request.policy, prompt);
      auto it = shared_.find(key);
      if (it == shared_.end()) {
        absl::StatusOr<RowId> row = AllocatePromptRow(static_cast<int32_t>(prompt.size()), request.policy.kv_format);
        if (!row.ok()) return fail(row.status());
        const int64_t bytes = table_.FindAny(*row)->pool_bytes;
        it = shared_.emplace(std::move(key), SharedPrompt{*row, 0, false, bytes}).first;
        shared_bytes_ += bytes;
      }
      out->prompts.push_back(it);
    }
    for (int32_t i = 0; i < 2 * request.images; ++i) {
      SharedPrompt& prompt = out->prompts[i % 2]->second;
      absl::StatusOr<RowId> row = AllocateSharingRow(prompt.row, request.policy);
      if (!row.ok()) return fail(row.status());
      out->rows.push_back(*row);
      ++prompt.readers;
    }
    return absl::OkStatus();
  }
  const bool share = request.sharing == Sharing::kWithinRequest;
  for (int32_t i = 0; i < 2 * request.images; ++i) {
    // Shared: image 0's rows own the prompts' KV, the later images read it.
    absl::StatusOr<RowId> row = share && i >= 2 ? AllocateSharingRow(out->rows[i % 2], request.policy)
                                                : AllocateRow(static_cast<int32_t>(ids[i % 2].size()), request.policy);
    if (!row.ok()) return fail(row.status());
    out->rows.push_back(*row);
  }
  return absl::OkStatus();
}

void KvManager::Free(RequestRows* r) {
  for (RowId row : r->rows) FreeRow(row);
  if (!r->prompts.empty()) {
    for (size_t i = 0; i < r->rows.size(); ++i) --r->prompts[i % 2]->second.readers;
    // After the rows: a prompt row goes with its last reader.
    for (size_t k = 0; k < r->prompts.size(); ++k) {
      if (k == 1 && r->prompts[1] == r->prompts[0]) break;  // one prompt for both rows
      SharedPrompt& prompt = r->prompts[k]->second;
      if (prompt.readers > 0) continue;
      FreeRow(prompt.row);
      shared_bytes_ -= prompt.bytes;
      shared_.erase(r->prompts[k]);
    }
  }
  r->rows.clear();
  r->prompts.clear();
}

// ---- Rows ----

absl::Status KvManager::CheckRow(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const {
  return model::CheckRowRequest(prompt_len, policy, pool_.max_prompt_tokens, pool_.max_l_dec);
}

absl::StatusOr<RowId> KvManager::AllocateRow(int32_t prompt_len, const sparse::ResolvedPolicy& policy) {
  if (absl::Status s = CheckRow(prompt_len, policy); !s.ok()) return s;
  std::unique_ptr<RowState> row = device_.NewRow();
  row->prompt_len = prompt_len;
  row->policy = policy;
  return Place(std::move(row), nullptr);
}

absl::StatusOr<RowId> KvManager::AllocateSharingRow(RowId owner_id, const sparse::ResolvedPolicy& policy) {
  RowState* owner = table_.Find(owner_id);
  if (owner == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("prompt owner ", owner_id, " is not an allocated row"));
  }
  if (owner->prompt_owner != kNoRow) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt owner ", owner_id, " itself shares row ", owner->prompt_owner, "'s prompt KV"));
  }
  if (absl::Status s = CheckRow(owner->prompt_len, policy); !s.ok()) return s;
  if (policy.kv_format != owner->policy.kv_format) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt owner ", owner_id, " stores its KV as ", std::string(sparse::KvFormatName(owner->policy.kv_format)),
        ", the row asks ", std::string(sparse::KvFormatName(policy.kv_format))));
  }
  std::unique_ptr<RowState> row = device_.NewRow();
  row->prompt_len = owner->prompt_len;
  row->policy = policy;
  row->prompt_owner = owner_id;
  absl::StatusOr<RowId> id = Place(std::move(row), owner);
  if (id.ok()) ++owner->prompt_sharers;
  return id;
}

absl::StatusOr<RowId> KvManager::AllocatePromptRow(int32_t prompt_len, sparse::KvFormat format) {
  if (prompt_len <= 0 || prompt_len > pool_.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt_len ", prompt_len, " must be in [1, max_prompt_tokens ", pool_.max_prompt_tokens, "]"));
  }
  if (sparse::KvFormatName(format) == "unknown") {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt row: KV format ", static_cast<int32_t>(format), " is not known"));
  }
  std::unique_ptr<RowState> row = device_.NewRow();
  row->prompt_len = prompt_len;
  row->prompt_row = true;
  row->policy.kv_format = format;  // dense, no decode slots: the prompt alone
  return Place(std::move(row), nullptr);
}

absl::StatusOr<RowId> KvManager::Place(std::unique_ptr<RowState> row, const RowState* prompt_source) {
  row->layout = sparse::LayoutFor(row->policy);
  const int64_t bytes = row->prompt_row            ? device_.PromptRowBytes(row->prompt_len, row->policy.kv_format)
                        : prompt_source != nullptr ? device_.SharingRowBytes(row->prompt_len, row->policy)
                                                   : device_.RowBytes(row->prompt_len, row->policy);
  if (pool_.ranges) {
    absl::StatusOr<int64_t> at = ranges_.Allocate(bytes, "KV pool");
    if (!at.ok()) return at.status();
    row->pool_offset = *at;
  } else if (pool_.bytes > 0 && bytes_in_use_ + bytes > pool_.bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool: a row needs ", bytes, " bytes, ",
                                                     pool_.bytes - bytes_in_use_, " of ", pool_.bytes, " are free"));
  }
  row->pool_bytes = bytes;
  if (absl::Status s = device_.RowPlaced(*row, prompt_source); !s.ok()) {
    if (pool_.ranges) ranges_.Free(row->pool_offset);
    return s;
  }
  bytes_in_use_ += bytes;
  if (!row->prompt_row) ++rows_in_use_;
  RowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    table_.slots[id] = std::move(row);
  } else {
    id = static_cast<RowId>(table_.slots.size());
    table_.slots.push_back(std::move(row));
  }
  return id;
}

void KvManager::Release(RowId id) {
  RowState& row = *table_.slots[id];
  bytes_in_use_ -= row.pool_bytes;
  if (pool_.ranges) ranges_.Free(row.pool_offset);
  table_.slots[id].reset();
  free_ids_.push_back(id);
}

void KvManager::FreeRow(RowId id) {
  RowState* row = table_.Find(id);
  if (row == nullptr) return;
  device_.RowFreed(*row);
  if (!row->prompt_row) --rows_in_use_;
  if (row->prompt_sharers > 0) {
    row->released = true;  // its sharers still read its prompt KV
    return;
  }
  const RowId owner = row->prompt_owner;
  Release(id);
  if (owner == kNoRow) return;
  RowState& o = *table_.slots[owner];  // an owner outlives its sharers
  if (--o.prompt_sharers == 0 && o.released) Release(owner);
}

bool KvManager::CanPlace(std::span<const int64_t> sizes) const {
  if (pool_.ranges) return ranges_.CanAllocateSequence(std::vector<int64_t>(sizes.begin(), sizes.end()));
  if (pool_.bytes <= 0) return true;
  int64_t total = 0;
  for (int64_t size : sizes) total += size;
  return total <= pool_.bytes - bytes_in_use_;
}

}  // namespace argen::kv
