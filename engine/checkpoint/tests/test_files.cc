#include "engine/checkpoint/tests/test_files.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/safetensors.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint::testing {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  if (dir == nullptr) {
    std::cerr << "ARGEN_SOURCE_DIR is not set (run through ctest)\n";
    std::abort();
  }
  return dir;
}

std::string TinyDir() { return SourceDir() + "/tests/goldens/tiny"; }
std::string TinyCheckpoint(const std::string& variant) { return TinyDir() + "/" + variant; }

ScratchDir::ScratchDir() {
  std::string templ = (fs::temp_directory_path() / "argen-ckpt-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) std::abort();
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void CopyDir(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

RawTensor FromInfo(const TensorInfo& info) {
  return RawTensor{info.name, std::string(DTypeName(info.dtype)), info.shape,
                   std::string(static_cast<const char*>(info.data), info.nbytes)};
}

std::string SafetensorsBytes(const std::vector<RawTensor>& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  for (const RawTensor& t : tensors) out += t.bytes;
  return out;
}

std::vector<RawTensor> ReadAll(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    std::cerr << file.status() << "\n";
    std::abort();
  }
  std::vector<RawTensor> out;
  for (const TensorInfo& t : (*file)->tensors()) out.push_back(FromInfo(t));
  return out;
}

}  // namespace argen::checkpoint::testing
