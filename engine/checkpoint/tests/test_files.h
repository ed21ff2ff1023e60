// Test helpers: the source tree, scratch directories, and a minimal
// safetensors writer for building bad inputs from good ones at test time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"

namespace argen::checkpoint::testing {

// $ARGEN_SOURCE_DIR (set by argen_test); aborts the test binary if unset.
std::string SourceDir();
std::string TinyDir();  // tests/goldens/tiny
std::string TinyCheckpoint(const std::string& variant);

// A fresh empty directory under the system temp dir, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, const std::string& bytes);
void CopyDir(const std::string& from, const std::string& to);

// One tensor to write; dtype is the safetensors spelling ("F32", "I8", ...).
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

RawTensor FromInfo(const TensorInfo& info);
// Serialises tensors to safetensors bytes (header padded to 8 bytes, as writers do).
std::string SafetensorsBytes(const std::vector<RawTensor>& tensors);
// Reads every tensor of a safetensors file (through the code under test's reader).
std::vector<RawTensor> ReadAll(const std::string& path);

}  // namespace argen::checkpoint::testing
