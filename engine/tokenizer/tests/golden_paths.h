// Locates tests/goldens/tokenizer through ARGEN_SOURCE_DIR (set by argen_test),
// and loads its goldens and the Chameleon tokenizer (the tokenizer tests and
// Lumina-mGPT's prompt tests share them).
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer::testing {

inline std::string GoldenDir() {
  const char* root = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/goldens/tokenizer";
}

inline nlohmann::json LoadGoldens() {
  std::ifstream in(GoldenDir() + "/goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

inline std::string ChameleonDir() { return GoldenDir() + "/chameleon"; }

inline nlohmann::json LoadChameleonGoldens() {
  std::ifstream in(ChameleonDir() + "/goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

inline Tokenizer LoadChameleon() {
  auto tok = Tokenizer::LoadFromFile(ChameleonDir() + "/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(*tok);
}

}  // namespace argen::tokenizer::testing
