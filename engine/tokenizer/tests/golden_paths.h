// Locates tests/goldens/tokenizer through ARGEN_SOURCE_DIR (set by argen_test).
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace argen::tokenizer::testing
