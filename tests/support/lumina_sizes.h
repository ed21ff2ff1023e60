// The small Lumina-format model (models/argen-lumina-scenes-v1) asking for
// other image sizes, for the tests of per-request sizes (header-only): every
// file but config.json symlinked into a fresh directory, config.json
// rewritten with argen_image_sizes (the first size is the default; the
// shipped config allows 384 x 384 only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::test_support {

// Removes a directory when it goes out of scope (a static one: when the test program ends).
struct RemovedDir {
  std::filesystem::path path;
  ~RemovedDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// `root`/argen-lumina-scenes-v1 made as above for `sizes` (W, H in pixels); returns it.
inline std::filesystem::path LuminaModelWithSizes(const std::filesystem::path& root,
                                                  const std::vector<std::pair<int32_t, int32_t>>& sizes) {
  namespace fs = std::filesystem;
  const fs::path src = fs::absolute(fs::path(SourceDir()) / "models/argen-lumina-scenes-v1");
  const fs::path dir = root / src.filename();
  fs::create_directories(dir);
  for (const fs::directory_entry& entry : fs::directory_iterator(src)) {
    if (entry.path().filename() != "config.json") fs::create_symlink(entry.path(), dir / entry.path().filename());
  }
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [w, h] : sizes) list.push_back(nlohmann::json::array({w, h}));
  config["argen_image_sizes"] = list;
  std::ofstream(dir / "config.json") << config.dump();
  return dir;
}

}  // namespace argen::test_support
