// The KV manager (engine/kv/kv_manager.h) with the CPU device's row sizes:
// randomised admission / cancel / sharing sequences never place what
// CanPlace did not admit and free everything, in a counted pool (the CPU's)
// and a pool of ranges placed first fit (the CUDA device's kind; its own
// sizes: engine/cuda/tests/kv_manager_cuda_sizer_test.cc); owners and shared
// prompt rows outlive their readers exactly as long as those read them.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "engine/cpu/kv_rows.h"
#include "engine/kv/tests/kv_manager_walk.h"

namespace argen::kv {
namespace {

using testing::FakeDevice;
using testing::WalkPolicy;

model::StackConfig TinyStack() {
  model::StackConfig s;
  s.num_layers = 2;
  s.num_kv_heads = 2;
  s.head_dim = 16;
  s.hidden_size = 64;
  return s;
}

model::KvPool Pool(int64_t bytes, bool ranges) { return {bytes, ranges, 64, std::numeric_limits<int32_t>::max()}; }

const sparse::ResolvedPolicy& Dense() {
  static const sparse::ResolvedPolicy p = WalkPolicy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  return p;
}
const sparse::ResolvedPolicy& Diagonal() {
  static const sparse::ResolvedPolicy p = WalkPolicy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  return p;
}

void Walk(bool ranges, int64_t pool_bytes, uint32_t seed, bool expect_refusals) {
  const cpu::CpuRowSizer sizer(TinyStack());
  FakeDevice device(sizer, Pool(pool_bytes, ranges));
  testing::WalkCounts counts;
  {
    KvManager kv(device);
    EXPECT_EQ(device.table(), &kv.rows());
    ASSERT_NO_FATAL_FAILURE(testing::RandomRequestWalk(kv, device, pool_bytes, 600, seed, &counts));
  }
  EXPECT_EQ(device.table(), nullptr) << "the manager detaches its table";
  EXPECT_GT(counts.added, 50);
  EXPECT_GT(counts.cancelled, 50);
  EXPECT_GT(counts.failed_on_device, 0);
  EXPECT_GT(counts.shared_prompts_found, 0);
  if (expect_refusals) {
    EXPECT_GT(counts.refused, 10) << "the walk never filled the pool";
  } else {
    EXPECT_EQ(counts.refused, 0);
  }
}

// Room for about a dozen dense images of 8-token prompts.
int64_t SmallPool() { return 12 * 2 * cpu::CpuRowSizer(TinyStack()).RowBytes(8, Dense()); }

TEST(KvManagerTest, RandomAdmissionCancelSharingInACountedPool) { Walk(false, SmallPool(), 20241202, true); }

TEST(KvManagerTest, RandomAdmissionCancelSharingInAPoolOfRanges) { Walk(true, SmallPool(), 20241203, true); }

TEST(KvManagerTest, AnUnboundedPoolAdmitsEverything) { Walk(false, 0, 7, false); }

TEST(KvManagerTest, AnOwnerFreedBeforeItsSharersStaysUntilTheLast) {
  for (bool ranges : {false, true}) {
    SCOPED_TRACE(ranges ? "ranges" : "counted");
    const cpu::CpuRowSizer sizer(TinyStack());
    FakeDevice device(sizer, Pool(SmallPool(), ranges));
    KvManager kv(device);
    absl::StatusOr<RowId> owner = kv.AllocateRow(9, Diagonal());
    ASSERT_TRUE(owner.ok()) << owner.status();
    std::vector<RowId> sharers;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<RowId> s = kv.AllocateSharingRow(*owner, Diagonal());
      ASSERT_TRUE(s.ok()) << s.status();
      sharers.push_back(*s);
    }
    const int64_t all = sizer.RowBytes(9, Diagonal()) + 3 * sizer.SharingRowBytes(9, Diagonal());
    EXPECT_EQ(kv.BytesInUse(), all);
    EXPECT_EQ(kv.RowsInUse(), 4);
    kv.FreeRow(*owner);
    EXPECT_EQ(kv.rows().Find(*owner), nullptr) << "a freed owner is hidden at once";
    ASSERT_NE(kv.rows().FindAny(*owner), nullptr) << "its region stays for its sharers";
    EXPECT_EQ(kv.BytesInUse(), all);
    EXPECT_EQ(kv.RowsInUse(), 3);
    EXPECT_EQ(kv.AllocateSharingRow(*owner, Diagonal()).status().code(), absl::StatusCode::kInvalidArgument);
    kv.FreeRow(*owner);  // twice: ignored
    for (size_t i = 0; i < sharers.size(); ++i) {
      kv.FreeRow(sharers[i]);
      if (i + 1 < sharers.size()) {
        EXPECT_NE(kv.rows().FindAny(*owner), nullptr) << "sharer " << i;
        EXPECT_EQ(kv.BytesInUse(), all - static_cast<int64_t>(i + 1) * sizer.SharingRowBytes(9, Diagonal()));
      }
    }
    EXPECT_EQ(kv.rows().FindAny(*owner), nullptr) << "the owner goes with its last sharer";
    EXPECT_EQ(kv.BytesInUse(), 0);
    EXPECT_EQ(device.live_rows(), 0);
  }
}

TEST(KvManagerTest, PromptRowsSharedAcrossRequestsGoWithTheirLastReader) {
  const cpu::CpuRowSizer sizer(TinyStack());
  FakeDevice counted(sizer, Pool(0, false)), ranged(sizer, Pool(SmallPool() * 4, true));
  for (FakeDevice* d : {&counted, &ranged}) {
    KvManager kv(*d);
    const std::vector<int32_t> caption_a = {5, 17, 3, 99}, caption_b = {5, 88, 21}, guidance = {5, 0, 0, 12};
    const sparse::ResolvedPolicy& p = Diagonal();
    const RequestShape a{caption_a, guidance, p, 2, Sharing::kAcrossRequests};
    const RequestShape b{caption_b, guidance, p, 1, Sharing::kAcrossRequests};
    const int64_t prompt_a = sizer.PromptRowBytes(4, p.kv_format), prompt_g = sizer.PromptRowBytes(4, p.kv_format),
                  prompt_b = sizer.PromptRowBytes(3, p.kv_format);
    EXPECT_EQ(kv.Bytes(a).kv_bytes, kv.Bytes(a).own_kv_bytes + prompt_a + prompt_g);
    RequestRows ra, rb;
    ASSERT_TRUE(kv.Place(a, &ra).ok());
    EXPECT_EQ(kv.SharedBytes(), prompt_a + prompt_g);
    EXPECT_EQ(kv.BytesInUse(), kv.Bytes(a).kv_bytes);
    // B finds the guidance prompt resident: it adds its caption's prompt row and its own rows.
    EXPECT_EQ(kv.PlacementSizes(b).size(), 3u);
    ASSERT_TRUE(kv.Place(b, &rb).ok());
    EXPECT_EQ(ra.prompts[1], rb.prompts[1]) << "one guidance prompt row for both";
    EXPECT_EQ(ra.prompts[1]->second.readers, 3);
    EXPECT_EQ(kv.SharedBytes(), prompt_a + prompt_g + prompt_b);
    const RowId guidance_row = ra.prompts[1]->second.row;
    kv.Free(&ra);
    EXPECT_EQ(kv.SharedBytes(), prompt_g + prompt_b) << "A's caption goes with A; the guidance stays for B";
    EXPECT_NE(kv.rows().Find(guidance_row), nullptr);
    EXPECT_EQ(kv.BytesInUse(), kv.Bytes(b).own_kv_bytes + prompt_g + prompt_b);
    kv.Free(&rb);
    EXPECT_EQ(kv.SharedBytes(), 0);
    EXPECT_EQ(kv.BytesInUse(), 0);
    EXPECT_EQ(kv.rows().FindAny(guidance_row), nullptr);
  }
}

TEST(KvManagerTest, SharingWithinARequestCountsThePromptsOnce) {
  const cpu::CpuRowSizer sizer(TinyStack());
  FakeDevice device(sizer, Pool(0, false));
  KvManager kv(device);
  const std::vector<int32_t> cond = {5, 17, 3, 99, 42}, uncond = {5, 0, 12};
  const sparse::ResolvedPolicy& p = Diagonal();
  const RequestShape shared{cond, uncond, p, 3, Sharing::kWithinRequest};
  const RequestShape copies{cond, uncond, p, 3, Sharing::kNone};
  const int64_t owners = sizer.RowBytes(5, p) + sizer.RowBytes(3, p);
  const int64_t readers = sizer.SharingRowBytes(5, p) + sizer.SharingRowBytes(3, p);
  EXPECT_EQ(kv.Bytes(shared).kv_bytes, owners + 2 * readers);
  EXPECT_EQ(kv.Bytes(copies).kv_bytes, 3 * owners);
  RequestRows r;
  ASSERT_TRUE(kv.Place(shared, &r).ok());
  EXPECT_EQ(kv.BytesInUse(), owners + 2 * readers);
  for (size_t i = 2; i < r.rows.size(); ++i) {
    EXPECT_EQ(kv.rows().Find(r.rows[i])->prompt_owner, r.rows[i % 2]) << "image 0's rows own the prompts";
  }
  kv.Free(&r);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

TEST(KvManagerTest, MisuseIsAnInvalidArgumentAndAFullPoolResourceExhausted) {
  const cpu::CpuRowSizer sizer(TinyStack());
  for (bool ranges : {false, true}) {
    SCOPED_TRACE(ranges ? "ranges" : "counted");
    FakeDevice device(sizer, Pool(sizer.RowBytes(9, Dense()) + sizer.SharingRowBytes(9, Dense()), ranges));
    KvManager kv(device);
    const auto expect = [](const absl::Status& s, absl::StatusCode code, const std::string& part) {
      EXPECT_EQ(s.code(), code) << s;
      EXPECT_NE(s.message().find(part), std::string::npos) << s;
    };
    expect(kv.AllocateRow(0, Dense()).status(), absl::StatusCode::kInvalidArgument, "prompt_len");
    expect(kv.AllocateRow(65, Dense()).status(), absl::StatusCode::kInvalidArgument, "max_prompt_tokens");
    expect(kv.AllocateRow(3, sparse::ResolvedPolicy{}).status(), absl::StatusCode::kInvalidArgument, "n_slots");
    expect(kv.AllocatePromptRow(0, sparse::KvFormat::kAuto).status(), absl::StatusCode::kInvalidArgument, "prompt_len");
    expect(kv.AllocatePromptRow(3, static_cast<sparse::KvFormat>(7)).status(), absl::StatusCode::kInvalidArgument,
           "is not known");
    expect(kv.AllocateSharingRow(12345, Dense()).status(), absl::StatusCode::kInvalidArgument,
           "is not an allocated row");
    absl::StatusOr<RowId> owner = kv.AllocateRow(9, Dense());
    ASSERT_TRUE(owner.ok());
    const sparse::ResolvedPolicy fp8 = WalkPolicy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kFp8E4m3);
    expect(kv.AllocateSharingRow(*owner, fp8).status(), absl::StatusCode::kInvalidArgument, "stores its KV as");
    absl::StatusOr<RowId> sharer = kv.AllocateSharingRow(*owner, Dense());
    ASSERT_TRUE(sharer.ok());
    expect(kv.AllocateSharingRow(*sharer, Dense()).status(), absl::StatusCode::kInvalidArgument, "itself shares");
    // The pool is full now.
    EXPECT_FALSE(kv.CanPlace(std::vector<int64_t>{1}));
    expect(kv.AllocateRow(1, Dense()).status(), absl::StatusCode::kResourceExhausted, "KV pool");
    EXPECT_EQ(kv.BytesInUse(), device.Pool().bytes);
  }
}

TEST(KvManagerTest, TheManagerFreesEveryRowItStillHolds) {
  const cpu::CpuRowSizer sizer(TinyStack());
  FakeDevice device(sizer, Pool(0, false));
  {
    KvManager kv(device);
    const std::vector<int32_t> cond = {5, 17, 3}, uncond = {5, 12};
    RequestRows a, b;
    ASSERT_TRUE(kv.Place({cond, uncond, Diagonal(), 2, Sharing::kWithinRequest}, &a).ok());
    ASSERT_TRUE(kv.Place({cond, uncond, Dense(), 2, Sharing::kAcrossRequests}, &b).ok());
    kv.FreeRow(a.rows[0]);  // an owner hidden with sharers left
    EXPECT_GT(device.live_rows(), 0);
  }
  EXPECT_EQ(device.live_rows(), 0);
  EXPECT_EQ(device.live_bytes(), 0);
}

}  // namespace
}  // namespace argen::kv
