// Helpers shared by the LlamaGen class- and text-conditional tests
// (header-only): the tiny model's engine, a greedy request, the official
// teacher-forced logits golden and the decoded image golden.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model/create_engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::llamagen::test_util {

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The engine of the tiny model in `dir` (two threads); nullptr, with a test
// failure, when it does not load.
inline std::unique_ptr<model::GenericEngine> TinyEngine(const std::string& dir, bool share_across_requests = false) {
  engine::EngineOptions options;
  options.model_dir = dir;
  options.threads = 2;
  options.share_prompt_kv_across_requests = share_across_requests;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// A request that takes the argmax of the guided logits: generate.py with top_k 1.
inline engine::GenerationRequest GreedyRequest(float cfg_weight) {
  engine::GenerationRequest r;
  r.sampling.cfg_weight = cfg_weight;
  r.sampling.temperature = 0.0f;
  r.sampling.top_k = 0;
  r.sampling.seed = 1;
  return r;
}

// The official generate()'s logits, teacher-forced on its greedy tokens
// (goldens.json's vocab and greedy_tokens; logits.f32 holds [step][cond,
// uncond][vocab]).
struct GreedyLogits {
  int32_t vocab = 0;
  std::vector<int32_t> greedy;
  int32_t steps = 0;
  std::vector<float> all;

  // Step `step`'s logits of the cond (side 0) or uncond (side 1) row.
  std::vector<float> Row(int32_t step, int32_t side) const {
    const float* at = all.data() + (int64_t{step} * 2 + side) * vocab;
    return std::vector<float>(at, at + vocab);
  }
};

// Call it under ASSERT_NO_FATAL_FAILURE: it asserts logits.f32's size.
inline void ReadGreedyLogits(const std::string& dir, const nlohmann::json& golden, GreedyLogits* out) {
  out->vocab = golden["vocab"].get<int32_t>();
  out->greedy = golden["greedy_tokens"].get<std::vector<int32_t>>();
  out->steps = static_cast<int32_t>(out->greedy.size());
  out->all = test_support::ReadF32(dir + "/logits.f32");
  ASSERT_EQ(out->all.size(), size_t(out->steps) * 2 * out->vocab);
}

// `image` against the official VQ decode's bytes (rgb8): each within one
// uint8 level, and off by one on at most 1% of them (truncation ties only).
// Call it under ASSERT_NO_FATAL_FAILURE: it asserts the size.
inline void ExpectImageMatchesRgb8(const engine::RgbImage& image, const std::string& rgb8_path) {
  const std::string rgb8 = ReadBytes(rgb8_path);
  ASSERT_EQ(image.rgb.size(), rgb8.size());
  int off = 0;
  for (size_t i = 0; i < rgb8.size(); ++i) {
    const int diff = std::abs(int{image.rgb[i]} - int{static_cast<uint8_t>(rgb8[i])});
    EXPECT_LE(diff, 1) << "byte " << i;
    off += diff;
  }
  EXPECT_LE(off, static_cast<int>(rgb8.size() / 100));  // truncation ties only
}

}  // namespace argen::llamagen::test_util
