// A CFG pair's logits against a transformers golden (header-only), shared by
// the Chameleon-architecture logits tests (Lumina, Anole). The golden's
// goldens.json gives image_token_ids [first, end), vocab_size, logits_file
// (float32 rows of vocab_size) and sequences.{cond,uncond}.{ids, prefill,
// first_row}: each sequence's prompt is its first `prefill` ids, the rest are
// decode steps, and first_row is its first row in logits_file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/kv/kv_manager.h"
#include "engine/model/backend.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::test_support {

// The golden's image-token columns: ids [first, first + count).
struct ImageTokenColumns {
  int32_t first = 0;
  int32_t count = 0;
};

inline ImageTokenColumns ImageTokenColumnsOf(const nlohmann::json& golden) {
  const int32_t first = golden["image_token_ids"][0].get<int32_t>();
  return {first, golden["image_token_ids"][1].get<int32_t>() - first};
}

// Prefills the pair (cond and uncond prompts, one call) on `be`, then decodes
// both rows on the shared tokens, and expects each step's logits over the
// image-token columns within `tolerance` relative error of the golden's rows
// of `logits_path`. `after_allocate` (optional) runs once both rows are
// allocated, given the prompt lengths and the dense policy. The rows are freed
// at the end. Call it under ASSERT_NO_FATAL_FAILURE.
inline void ExpectCfgPairLogitsMatchGolden(
    model::Backend& be, kv::KvManager& kv, const nlohmann::json& golden, const std::string& logits_path,
    double tolerance,
    const std::function<void(int32_t cond_prefill, int32_t uncond_prefill, const sparse::ResolvedPolicy& dense)>&
        after_allocate = {}) {
  const auto [first, count] = ImageTokenColumnsOf(golden);
  const int32_t vocab = golden["vocab_size"].get<int32_t>();
  const std::vector<float> all = ReadF32(logits_path);
  auto expected = [&](int32_t row) {
    return std::vector<float>(all.begin() + int64_t{row} * vocab + first,
                              all.begin() + int64_t{row} * vocab + first + count);
  };
  const nlohmann::json& cond = golden["sequences"]["cond"];
  const nlohmann::json& uncond = golden["sequences"]["uncond"];
  const auto cond_ids = cond["ids"].get<std::vector<int32_t>>();
  const auto uncond_ids = uncond["ids"].get<std::vector<int32_t>>();
  const int32_t cp = cond["prefill"].get<int32_t>(), up = uncond["prefill"].get<int32_t>();
  const int32_t steps = static_cast<int32_t>(cond_ids.size()) - cp;
  ASSERT_EQ(steps, static_cast<int32_t>(uncond_ids.size()) - up);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, steps + 1);
  ASSERT_TRUE(dense.ok());
  std::vector<model::RowId> rows = {*kv.AllocateRow(cp, *dense), *kv.AllocateRow(up, *dense)};
  if (after_allocate) after_allocate(cp, up, *dense);

  std::vector<int32_t> tokens(cond_ids.begin(), cond_ids.begin() + cp);
  tokens.insert(tokens.end(), uncond_ids.begin(), uncond_ids.begin() + up);
  const std::vector<int32_t> offsets = {0, cp, cp + up};
  const std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1, -1);
  std::vector<float> logits(2 * count);
  ASSERT_TRUE(be.Prefill({rows, offsets, tokens, sampling}, {sampled, logits.data()}).ok());
  const int32_t c0 = cond["first_row"].get<int32_t>(), u0 = uncond["first_row"].get<int32_t>();
  EXPECT_LE(RelativeError(logits.data(), expected(c0 + cp - 1)), tolerance) << "prefill cond";
  EXPECT_LE(RelativeError(logits.data() + count, expected(u0 + up - 1)), tolerance) << "prefill uncond";
  for (int32_t s = 0; s < steps; ++s) {
    // Both rows are fed the same token: an image token, or one the recipe
    // forces (Lumina's goldens have ids 67 and 11, outside the image range).
    ASSERT_EQ(cond_ids[cp + s], uncond_ids[up + s]);
    const std::vector<int32_t> input = {cond_ids[cp + s]}, step = {s};
    ASSERT_TRUE(be.Decode({rows, input, step, sampling}, {sampled, logits.data()}).ok());
    EXPECT_LE(RelativeError(logits.data(), expected(c0 + cp + s)), tolerance) << "decode cond " << s;
    EXPECT_LE(RelativeError(logits.data() + count, expected(u0 + up + s)), tolerance) << "decode uncond " << s;
  }
  for (model::RowId r : rows) kv.FreeRow(r);
}

}  // namespace argen::test_support
