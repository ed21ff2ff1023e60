// Test helpers shared by every layer's tests (header-only; no layer below
// depends on it): the source tree, JSON goldens, relative error.
#pragma once

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::test_support {

// The repository root: $ARGEN_SOURCE_DIR (ctest sets it), else ".".
inline std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

// A JSON golden, `relative` to the repository root.
inline nlohmann::json ReadJson(const std::string& relative) {
  std::ifstream in(SourceDir() + "/" + relative);
  EXPECT_TRUE(in.good()) << "cannot open " << relative;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// A raw little-endian float32 golden (a .f32 file written by a goldens
// script), at `path` as given.
inline std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// ||actual - expected|| / ||expected|| over n values
inline double RelativeError(const float* actual, const float* expected, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double diff = static_cast<double>(actual[i]) - expected[i];
    num += diff * diff;
    den += static_cast<double>(expected[i]) * expected[i];
  }
  return std::sqrt(num / den);
}

inline double RelativeError(const float* actual, const std::vector<float>& expected) {
  return RelativeError(actual, expected.data(), expected.size());
}

}  // namespace argen::test_support
