// Test helpers of Emu3's GPU vision decoder tests (cuda_emu3vq_decoder_test,
// cuda_emu3vq_bf16_test): the tiny random tokenizer in either naming, random
// code grids, and random weights at any shape (the published one included).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::vq::testing {

using emu3vq::CodeGrid;
using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqNaming;
using emu3vq::Emu3VqWeights;
using test_support::ReadJson;
using test_support::SourceDir;

struct Tiny {
  Emu3VqConfig config;
  Emu3VqWeights weights;
};

inline Tiny LoadTiny(Emu3VqNaming naming) {
  Tiny t;
  const std::string rel = naming == Emu3VqNaming::kBaai ? "tests/goldens/tiny/tiny-emu3-gen/vision_tokenizer"
                                                        : "tests/goldens/tiny/tiny-emu3-gen-hf";
  const nlohmann::json config = ReadJson(rel + "/config.json");
  absl::StatusOr<Emu3VqConfig> c = naming == Emu3VqNaming::kBaai ? emu3vq::ParseBaaiVqConfig(config, rel)
                                                                 : emu3vq::ParseHfVqConfig(config["vq_config"], rel);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return t;
  t.config = *c;
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(SourceDir() + "/" + rel);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return t;
  absl::StatusOr<Emu3VqWeights> w = emu3vq::LoadEmu3VqWeights(emu3vq::CheckpointTensorSource(**ckpt), t.config, naming,
                                                              naming == Emu3VqNaming::kBaai ? "" : "vqmodel.");
  EXPECT_TRUE(w.ok()) << w.status();
  if (w.ok()) t.weights = *std::move(w);
  return t;
}

inline CodeGrid RandomGrid(int32_t h, int32_t w, int32_t codebook_size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> code(0, codebook_size - 1);
  CodeGrid g{h, w, std::vector<int32_t>(static_cast<size_t>(h) * w)};
  for (int32_t& c : g.codes) c = code(rng);
  return g;
}

// Random weights in the published tokenizer's shape (BAAI/Emu3-VisionTokenizer's
// decoder: the Emu3VqConfig defaults), scaled so activations stay O(1): conv
// weights uniform with variance 1 / fan_in, norms' gammas near 1, BatchNorm
// variances in [0.5, 1.5].
inline emu3vq::TensorSource RandomSource(uint32_t seed) {
  auto rng = std::make_shared<std::mt19937>(seed);
  return [rng](const std::string& name, const std::vector<int64_t>& shape) -> absl::StatusOr<std::vector<float>> {
    int64_t count = 1, fan_in = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      count *= shape[i];
      if (i > 0) fan_in *= shape[i];
    }
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(count);
    const bool vector = shape.size() == 1;
    const bool norm = name.find("norm") != std::string::npos;
    const bool codebook = name.find("embedding") != std::string::npos;
    const float limit = std::sqrt(3.0f / static_cast<float>(fan_in));
    for (float& x : v) {
      const float r = u(*rng);
      if (name.ends_with("running_var")) {
        x = 1.0f + 0.5f * r;
      } else if (vector && norm && name.ends_with(".weight")) {
        x = 1.0f + 0.1f * r;  // GroupNorm / BatchNorm gamma
      } else if (vector) {
        x = 0.05f * r;  // biases, betas, running means
      } else if (codebook) {
        x = r;
      } else {
        x = limit * r;
      }
    }
    return v;
  };
}

}  // namespace argen::vq::testing
