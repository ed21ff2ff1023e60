// The KV manager: the one owner of a device's rows (engine/model/backend.h),
// device-agnostic host bookkeeping. It keeps the table of rows (their
// RowState: prompt length, policy, prompt-KV owner / sharers / hidden, prompt
// rows), places them in the device's pool (Backend::Pool: byte ranges first
// fit, or counted bytes) in the sizes the device's RowSizer gives, and is the
// one ledger admission asks. The backend only sets up and computes on the
// storage of the rows it is told about (Backend::RowPlaced / RowFreed) and
// finds a batch's rows in this table (Backend::SetRowTable).
//
// Requests: a request's rows are `images` CFG pairs (cond, uncond), placed
// in one order (PlacementSizes) by Place and asked about by CanPlace, so the
// admission answer is exactly whether Place succeeds now:
//   * Sharing::kNone: every row holds its prompt (RowBytes);
//   * kWithinRequest: image 0's rows own the prompts, every later image's
//     rows read them (SharingRowBytes);
//   * kAcrossRequests: the request's cond and uncond prompts are prompt rows
//     shared by every placed request with the same tokens and KV format
//     (found, or made first: PromptRowBytes), and every row reads one.
// Freeing: an owner freed before its sharers is hidden and stays (counted)
// until its last sharer goes; a shared prompt row goes with its last reader.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/kv/range_allocator.h"
#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "kernels/sparse/policy_types.h"

namespace argen::kv {

using model::RowId;

enum class Sharing { kNone, kWithinRequest, kAcrossRequests };

// The rows of one request, as the engine places them.
struct RequestShape {
  std::span<const int32_t> cond_ids, uncond_ids;  // the prompts' token ids
  sparse::ResolvedPolicy policy;
  int32_t images = 1;  // CFG pairs
  Sharing sharing = Sharing::kNone;
};

// A prompt shared across requests: its KV format and tokens.
using PromptKey = std::pair<int32_t, std::vector<int32_t>>;
// Its prompt row, held while a placed request reads it.
struct SharedPrompt {
  RowId row = model::kNoRow;
  int32_t readers = 0;  // rows of placed requests reading it
  bool filled = false;  // prefilled by an earlier backend call (the engine sets it)
  int64_t bytes = 0;
};
using SharedPrompts = std::map<PromptKey, SharedPrompt>;

// What Place made for one request.
struct RequestRows {
  std::vector<RowId> rows;  // cond, uncond per image
  // kAcrossRequests: the shared prompts its cond and uncond rows read.
  std::vector<SharedPrompts::iterator> prompts;
};

// The pool bytes of a request: at most (kv_bytes: its shared prompts made
// too) and at least (own_kv_bytes: its own rows) what Place adds.
struct RequestBytes {
  int64_t kv_bytes = 0;
  int64_t own_kv_bytes = 0;
};

// The pool sizes Place allocates for `request`, in its order; `resident`
// says whether a shared prompt is placed already (kAcrossRequests). The
// device's sizes: CUDA pool sizing asks this without a device (CudaRowSizer).
template <typename Resident>
std::vector<int64_t> PlacementSizes(const model::RowSizer& sizer, const RequestShape& request, Resident&& resident);
// The same for a request of the given prompt lengths (sharing within a
// request at most: no tokens needed).
std::vector<int64_t> PlacementSizes(const model::RowSizer& sizer, int32_t cond_len, int32_t uncond_len,
                                    const sparse::ResolvedPolicy& policy, int32_t images, Sharing sharing);
RequestBytes BytesOf(const model::RowSizer& sizer, const RequestShape& request);
PromptKey KeyOf(const sparse::ResolvedPolicy& policy, std::span<const int32_t> ids);

class KvManager {
 public:
  // Manages `device`'s rows (it must outlive the manager) and points its row
  // table here.
  explicit KvManager(model::Backend& device);
  ~KvManager();  // frees every row
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  // ---- Requests ----
  std::vector<int64_t> PlacementSizes(const RequestShape& request) const;
  // Whether Place(request) would succeed now: every row valid and the sizes fit.
  bool CanPlace(const RequestShape& request) const;
  // Places every row of `request` into `out` (empty); on error nothing of it stays.
  absl::Status Place(const RequestShape& request, RequestRows* out);
  // Frees a placed request's rows (then the shared prompts nobody reads); `rows` ends empty.
  void Free(RequestRows* rows);
  RequestBytes Bytes(const RequestShape& request) const { return BytesOf(device_, request); }
  // Bytes of the prompt rows shared across requests.
  int64_t SharedBytes() const { return shared_bytes_; }

  // ---- Rows ----
  // A row of prompt_len positions and the policy's decode slots.
  absl::StatusOr<RowId> AllocateRow(int32_t prompt_len, const sparse::ResolvedPolicy& policy);
  // A row with the prompt length of `owner` (a live row or prompt row that
  // is not itself a sharer) and `policy`, reading the owner's prompt KV;
  // policy.kv_format must be the owner's.
  absl::StatusOr<RowId> AllocateSharingRow(RowId owner, const sparse::ResolvedPolicy& policy);
  // A prompt row (backend.h): one prompt's KV in `format`.
  absl::StatusOr<RowId> AllocatePromptRow(int32_t prompt_len, sparse::KvFormat format);
  // Unknown and already freed ids are ignored.
  void FreeRow(RowId id);
  // Whether allocations of these pool sizes, in this order, would all succeed now.
  bool CanPlace(std::span<const int64_t> sizes) const;

  int64_t BytesInUse() const { return bytes_in_use_; }
  // Live rows that are not prompt rows.
  int32_t RowsInUse() const { return rows_in_use_; }
  const model::RowTable& rows() const { return table_; }

 private:
  absl::StatusOr<RowId> Place(std::unique_ptr<model::RowState> row, const model::RowState* prompt_source);
  void Release(RowId id);
  absl::Status CheckRow(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const;

  model::Backend& device_;
  const model::KvPool pool_;
  RangeAllocator ranges_;  // pool_.ranges
  int64_t bytes_in_use_ = 0;
  int32_t rows_in_use_ = 0;
  model::RowTable table_;
  std::vector<RowId> free_ids_;
  SharedPrompts shared_;
  int64_t shared_bytes_ = 0;
};

// ---- implementation of the template ----

template <typename Resident>
std::vector<int64_t> PlacementSizes(const model::RowSizer& sizer, const RequestShape& r, Resident&& resident) {
  if (r.sharing != Sharing::kAcrossRequests) {
    return PlacementSizes(sizer, static_cast<int32_t>(r.cond_ids.size()), static_cast<int32_t>(r.uncond_ids.size()),
                          r.policy, r.images, r.sharing);
  }
  const std::span<const int32_t> ids[2] = {r.cond_ids, r.uncond_ids};
  std::vector<int64_t> sizes;
  for (int k = 0; k < 2; ++k) {
    if (k == 1 && std::ranges::equal(ids[1], ids[0])) break;  // one prompt for both rows
    if (resident(KeyOf(r.policy, ids[k]))) continue;
    sizes.push_back(sizer.PromptRowBytes(static_cast<int32_t>(ids[k].size()), r.policy.kv_format));
  }
  for (int32_t i = 0; i < r.images; ++i) {
    for (int k = 0; k < 2; ++k) sizes.push_back(sizer.SharingRowBytes(static_cast<int32_t>(ids[k].size()), r.policy));
  }
  return sizes;
}

}  // namespace argen::kv
