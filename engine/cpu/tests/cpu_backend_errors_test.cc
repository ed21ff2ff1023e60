// Bad batches are rejected with messages naming the field, before any state
// changes: a rejected Decode leaves the rows able to continue.
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/sparse/policy_params.h"

namespace argen::cpu {
namespace {

class CpuBackendErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::BackendOptions options;
    options.max_batch_rows = 4;
    loaded_ = testing::LoadTinyBackend("tests/goldens/tiny/tiny-mha", 0.0f, options);
    ASSERT_NE(loaded_.backend, nullptr);
    kv_ = std::make_unique<kv::KvManager>(backend());
    absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 64);
    ASSERT_TRUE(dense.ok());
    policy_ = *dense;
    for (int i = 0; i < 2; ++i) rows_.push_back(*kv().AllocateRow(3, policy_));
  }
  model::Backend& backend() { return *loaded_.backend; }
  kv::KvManager& kv() { return *kv_; }

  absl::Status Prefill(std::vector<model::RowId> rows, std::vector<int32_t> tokens, std::vector<int32_t> offsets) {
    const std::vector<model::SamplingSpec> sampling(rows.size() / 2);
    std::vector<int32_t> sampled(rows.size() / 2);
    return backend().Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr});
  }
  absl::Status Decode(std::vector<model::RowId> rows, int32_t token, int32_t step, float temperature = 1.0f) {
    std::vector<model::SamplingSpec> sampling(1);
    sampling[0].temperature = temperature;
    std::vector<int32_t> sampled(1), tokens = {token}, steps = {step};
    return backend().Decode({rows, tokens, steps, sampling}, {sampled, nullptr});
  }
  static void ExpectMentions(const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  }

  testing::LoadedBackend loaded_;
  std::unique_ptr<kv::KvManager> kv_;  // the backend's rows
  sparse::ResolvedPolicy policy_;
  std::vector<model::RowId> rows_;
};

TEST_F(CpuBackendErrorsTest, BadPrefillBatches) {
  ExpectMentions(Prefill({rows_[0]}, {1, 2, 3}, {0, 3}), "even");
  ExpectMentions(Prefill({rows_[0], 12345}, {1, 2, 3, 1, 2, 3}, {0, 3, 6}), "rows[1]");
  ExpectMentions(Prefill({rows_[0], rows_[0]}, {1, 2, 3, 1, 2, 3}, {0, 3, 6}), "twice");
  ExpectMentions(Prefill(rows_, {1, 2, 3, 1, 2}, {0, 3, 5}), "prompt_len");
  ExpectMentions(Prefill(rows_, {1, 2, 3, 1, 2, 3}, {0, 3, 7}), "token_offsets");
  ExpectMentions(Prefill(rows_, {1, 2, 3, 1, 512, 3}, {0, 3, 6}), "tokens[4]");
  ExpectMentions(Decode(rows_, 1, 0), "prefilled");
  EXPECT_TRUE(Prefill(rows_, {1, 2, 3, 1, 0, 3}, {0, 3, 6}).ok());
  ExpectMentions(Prefill(rows_, {1, 2, 3, 1, 0, 3}, {0, 3, 6}), "already prefilled");
}

TEST_F(CpuBackendErrorsTest, BadDecodeBatchesLeaveRowsUsable) {
  ASSERT_TRUE(Prefill(rows_, {1, 2, 3, 1, 0, 3}, {0, 3, 6}).ok());
  ExpectMentions(Decode(rows_, 64, 0), "image_tokens[0]");
  ExpectMentions(Decode(rows_, -1, 0), "image_tokens[0]");
  ExpectMentions(Decode(rows_, 1, 1), "steps[0]");
  ExpectMentions(Decode(rows_, 1, 0, -1.0f), "temperature");  // 0 is greedy, valid
  const model::RowId other = *kv().AllocateRow(4, policy_);
  ExpectMentions(Decode({rows_[0], other}, 1, 0), "prefilled");  // pairs may differ in length, not in progress
  const std::vector<model::RowId> too_many = {rows_[0], rows_[1], rows_[0], rows_[1], rows_[0], rows_[1]};
  std::vector<model::SamplingSpec> sampling(3);
  std::vector<int32_t> sampled(3), tokens = {1, 1, 1}, steps = {0, 0, 0};
  ExpectMentions(backend().Decode({too_many, tokens, steps, sampling}, {sampled, nullptr}), "max_batch_rows");
  // l_dec = 64 decode positions fit (the engine feeds only 63 of them).
  for (int32_t t = 0; t < 64; ++t) ASSERT_TRUE(Decode(rows_, 1, t).ok()) << t;
  ExpectMentions(Decode(rows_, 1, 64), "l_dec");
  kv().FreeRow(rows_[0]);
  ExpectMentions(Decode(rows_, 1, 64), "not an allocated row");
}

TEST_F(CpuBackendErrorsTest, AllocateRowChecksItsArguments) {
  ExpectMentions(kv().AllocateRow(0, policy_).status(), "prompt_len");
  ExpectMentions(kv().AllocateRow(5000, policy_).status(), "max_prompt_tokens");
  ExpectMentions(kv().AllocateRow(3, sparse::ResolvedPolicy{}).status(), "n_slots");
}

}  // namespace
}  // namespace argen::cpu
