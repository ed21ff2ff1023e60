#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace argen::fuzz {

const std::string& ScratchDir() {
  static const std::string* dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    auto* path = new std::string((base / ("argen-fuzz-" + std::to_string(getpid()))).string());
    fs::create_directories(*path, ec);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDir(), ignored);
    });
    return path;
  }();
  return *dir;
}

std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

std::string WriteScratchFile(const std::string& name, const std::string& text) {
  return WriteScratchFile(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

std::string SourceDir() {
  if (const char* dir = std::getenv("ARGEN_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return ARGEN_FUZZ_SOURCE_DIR;
}

}  // namespace argen::fuzz
