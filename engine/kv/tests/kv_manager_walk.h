// The KV manager's checks over any device's row sizes (header-only, so the
// CPU sizer's test here and the CUDA sizer's in engine/cuda/tests share it):
// a device that computes nothing and checks what the manager tells it, and a
// randomised walk of admission / cancel / sharing sequences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/kv_manager.h"
#include "engine/sparse/policy_params.h"

namespace argen::kv::testing {

class FakeDevice;

// A row whose storage lives until the manager destroys it.
struct FakeRow : model::RowState {
  explicit FakeRow(FakeDevice* d) : device(d) {}
  ~FakeRow() override;
  FakeDevice* device;
  bool placed = false;
};

// A device that stores nothing: it checks every placement against its sizes
// and pool (a row's bytes are its kind's, a range lies in the pool and
// overlaps no live row's) and counts the rows whose storage is alive.
class FakeDevice final : public model::Backend {
 public:
  FakeDevice(const model::RowSizer& sizer, model::KvPool pool) : sizer_(sizer), pool_(pool) {}

  const model::ModelSpec& spec() const override { return spec_; }
  std::string name() const override { return "fake"; }
  int64_t KvBytesPerTokenRow() const override { return 0; }
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return sizer_.RowBytes(prompt_len, policy);
  }
  int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return sizer_.SharingRowBytes(prompt_len, policy);
  }
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override {
    return sizer_.PromptRowBytes(prompt_len, format);
  }
  int64_t PoolBytes() const override { return pool_.bytes; }
  int32_t MaxBatchRows() const override { return 2; }
  model::KvPool Pool() const override { return pool_; }
  void SetRowTable(const model::RowTable* rows) override { table_ = rows; }
  std::unique_ptr<model::RowState> NewRow() const override {
    return std::make_unique<FakeRow>(const_cast<FakeDevice*>(this));
  }
  absl::Status RowPlaced(model::RowState& state, const model::RowState* prompt_source) override {
    if (fail_next_) {
      fail_next_ = false;
      return absl::InternalError("fake device: injected failure");
    }
    FakeRow& row = static_cast<FakeRow&>(state);
    const int64_t want = row.prompt_row             ? sizer_.PromptRowBytes(row.prompt_len, row.policy.kv_format)
                         : prompt_source != nullptr ? sizer_.SharingRowBytes(row.prompt_len, row.policy)
                                                    : sizer_.RowBytes(row.prompt_len, row.policy);
    EXPECT_EQ(row.pool_bytes, want) << "a row placed in other bytes than its kind's";
    if (prompt_source != nullptr) {
      EXPECT_EQ(prompt_source->prompt_len, row.prompt_len);
      EXPECT_EQ(prompt_source->prompt_owner, model::kNoRow) << "a sharer's source must hold its prompt";
      EXPECT_FALSE(prompt_source->released);
    }
    if (pool_.ranges) {
      EXPECT_GE(row.pool_offset, 0);
      EXPECT_LE(row.pool_offset + row.pool_bytes, pool_.bytes) << "a range outside the pool";
      auto next = ranges_.lower_bound(row.pool_offset);
      if (next != ranges_.end()) {
        EXPECT_GE(next->first, row.pool_offset + row.pool_bytes) << "ranges overlap";
      }
      if (next != ranges_.begin()) {
        auto prev = std::prev(next);
        EXPECT_LE(prev->first + prev->second, row.pool_offset) << "ranges overlap";
      }
      ranges_[row.pool_offset] = row.pool_bytes;
    }
    row.placed = true;
    live_bytes_ += row.pool_bytes;
    ++live_rows_;
    ++placed_;
    return absl::OkStatus();
  }
  void RowFreed(model::RowState& row) override {
    EXPECT_FALSE(row.released) << "a row freed twice";
    ++freed_;
  }
  absl::Status Forward(const model::StepPlan&, const model::StepOutputs&) override {
    return absl::UnimplementedError("fake device");
  }
  model::RowState* FindLiveRow(model::RowId) override { return nullptr; }
  model::BatchLimits Limits() const override { return {}; }

  void Forget(const FakeRow& row) {
    live_bytes_ -= row.pool_bytes;
    --live_rows_;
    if (pool_.ranges) ranges_.erase(row.pool_offset);
  }
  void FailNextPlacement() { fail_next_ = true; }
  const model::RowTable* table() const { return table_; }
  int64_t live_bytes() const { return live_bytes_; }
  int32_t live_rows() const { return live_rows_; }
  int32_t placed() const { return placed_; }
  int32_t freed() const { return freed_; }

 private:
  const model::RowSizer& sizer_;
  model::KvPool pool_;
  model::ModelSpec spec_;
  const model::RowTable* table_ = nullptr;
  std::map<int64_t, int64_t> ranges_;  // live rows' ranges: offset -> bytes
  int64_t live_bytes_ = 0;
  int32_t live_rows_ = 0, placed_ = 0, freed_ = 0;
  bool fail_next_ = false;
};

inline FakeRow::~FakeRow() {
  if (placed) device->Forget(*this);
}

inline sparse::ResolvedPolicy WalkPolicy(sparse::PolicyKind kind, double sparsity, sparse::KvFormat format) {
  sparse::PolicyParams params;
  params.kind = kind;
  params.sparsity = sparsity;
  params.kv_format = format;
  absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(params, 24);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : sparse::ResolvedPolicy{};
}

// Dense, diagonal, a score policy (h2o) and fp8 KV (another prompt format).
inline std::vector<sparse::ResolvedPolicy> WalkPolicies() {
  return {WalkPolicy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto),
          WalkPolicy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto),
          WalkPolicy(sparse::PolicyKind::kH2O, 0.5, sparse::KvFormat::kAuto),
          WalkPolicy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3)};
}

// The ledger against the table and the device after any step: the bytes in
// use are the live and hidden rows' (each once), every hidden row still has
// sharers, every sharer's owner is in the table, and the device holds exactly
// the table's rows.
inline void ExpectLedgerMatchesTable(const KvManager& kv, const FakeDevice& device, int64_t pool_bytes) {
  int64_t bytes = 0, prompt_bytes = 0;
  int32_t rows = 0, live = 0;
  const model::RowTable& table = kv.rows();
  for (size_t id = 0; id < table.slots.size(); ++id) {
    const model::RowState* row = table.slots[id].get();
    if (row == nullptr) continue;
    bytes += row->pool_bytes;
    ++rows;
    if (row->prompt_row) prompt_bytes += row->pool_bytes;
    if (!row->released && !row->prompt_row) ++live;
    if (row->released) {
      EXPECT_GT(row->prompt_sharers, 0) << "row " << id << " hidden with no sharer left";
    }
    if (row->prompt_owner != model::kNoRow) {
      ASSERT_NE(table.FindAny(row->prompt_owner), nullptr) << "row " << id << " outlived its owner";
    }
  }
  EXPECT_EQ(kv.BytesInUse(), bytes);
  EXPECT_EQ(device.live_bytes(), bytes);
  EXPECT_EQ(device.live_rows(), rows);
  EXPECT_EQ(kv.RowsInUse(), live);
  EXPECT_EQ(kv.SharedBytes(), prompt_bytes);  // the walk makes prompt rows through requests only
  if (pool_bytes > 0) {
    EXPECT_LE(kv.BytesInUse(), pool_bytes);
  }
}

struct WalkCounts {
  int added = 0, refused = 0, cancelled = 0, failed_on_device = 0, shared_prompts_found = 0;
};

// Random requests (1-4 images; no sharing, within the request or across
// requests; captions and guidance prompts from small sets so prompts repeat)
// are placed while CanPlace says they fit and cancelled in random order. The
// answer must be exactly whether Place succeeds; a placed request adds its
// PlacementSizes (between its own_kv_bytes and kv_bytes); a refused or failed
// one leaves nothing; everything is freed at the end.
inline void RandomRequestWalk(KvManager& kv, FakeDevice& device, int64_t pool_bytes, int iterations, uint32_t seed,
                              WalkCounts* counts) {
  const std::vector<sparse::ResolvedPolicy> policies = WalkPolicies();
  const std::vector<std::vector<int32_t>> captions = {
      {5, 17, 3, 99, 42, 7, 1, 64, 12}, {5, 88, 21}, {5, 88, 21, 30, 9, 3, 61, 2, 44, 71, 12}, {9, 9, 9, 9}};
  const std::vector<std::vector<int32_t>> guidance = {{5, 0, 0, 0, 0, 0, 0, 0, 12}, {5, 0, 12}, {5, 88, 21}};
  const Sharing modes[] = {Sharing::kNone, Sharing::kWithinRequest, Sharing::kAcrossRequests};
  std::mt19937 rng(seed);
  std::vector<RequestRows> live;
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    if (live.empty() || rng() % 3 != 0) {
      RequestShape shape;
      shape.cond_ids = captions[rng() % captions.size()];
      shape.uncond_ids = guidance[rng() % guidance.size()];  // {5, 88, 21}: cond and uncond may be one prompt
      shape.policy = policies[rng() % policies.size()];
      shape.images = 1 + static_cast<int32_t>(rng() % 4);
      shape.sharing = modes[rng() % 3];
      const std::vector<int64_t> sizes = kv.PlacementSizes(shape);
      int64_t sum = 0;
      for (int64_t s : sizes) sum += s;
      const RequestBytes bytes = kv.Bytes(shape);
      const bool fits = kv.CanPlace(shape);
      // Sometimes the device fails to set a row up (it is then told nothing more).
      const bool fail_on_device = fits && rng() % 17 == 0;
      const int64_t before = kv.BytesInUse();
      const int32_t placed_before = device.placed();
      if (fail_on_device) device.FailNextPlacement();
      RequestRows r;
      const absl::Status s = kv.Place(shape, &r);
      if (fail_on_device) {
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
        ++counts->failed_on_device;
      } else {
        ASSERT_EQ(s.ok(), fits) << "CanPlace disagrees with Place: " << s;
        if (!s.ok()) {
          EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
        }
      }
      if (!s.ok()) {
        EXPECT_EQ(kv.BytesInUse(), before) << "a refused request left rows behind";
        EXPECT_TRUE(r.rows.empty() && r.prompts.empty());
        if (!fits) ++counts->refused;
      } else {
        EXPECT_EQ(kv.BytesInUse() - before, sum) << "Place took other bytes than PlacementSizes";
        EXPECT_LE(kv.BytesInUse() - before, bytes.kv_bytes);
        EXPECT_GE(kv.BytesInUse() - before, bytes.own_kv_bytes);
        EXPECT_EQ(device.placed() - placed_before, static_cast<int32_t>(sizes.size()));
        EXPECT_EQ(r.rows.size(), 2u * shape.images);
        if (shape.sharing == Sharing::kAcrossRequests) {
          EXPECT_EQ(r.prompts.size(), 2u);
          if (static_cast<int64_t>(sizes.size()) < 2 * shape.images + 2) ++counts->shared_prompts_found;
        }
        live.push_back(std::move(r));
        ++counts->added;
      }
    } else {
      const size_t victim = rng() % live.size();
      RequestRows r = std::move(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      kv.Free(&r);
      EXPECT_TRUE(r.rows.empty() && r.prompts.empty());
      ++counts->cancelled;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectLedgerMatchesTable(kv, device, pool_bytes));
  }
  for (RequestRows& r : live) kv.Free(&r);
  ASSERT_NO_FATAL_FAILURE(ExpectLedgerMatchesTable(kv, device, pool_bytes));
  EXPECT_EQ(kv.BytesInUse(), 0);
  EXPECT_EQ(kv.SharedBytes(), 0);
  EXPECT_EQ(kv.RowsInUse(), 0);
  EXPECT_EQ(device.live_rows(), 0);
  EXPECT_EQ(device.freed(), device.placed()) << "every placed row is freed exactly once";
}

}  // namespace argen::kv::testing
