// Fuzzes model.safetensors.index.json: the weight_map and the shard names it
// gives (engine/checkpoint/checkpoint.cc), over a directory holding two small
// valid shards. Names must never escape the directory.
#include <filesystem>
#include <fstream>

#include "engine/checkpoint/checkpoint.h"
#include "tests/fuzz/fuzz_driver.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// A safetensors file with F32 tensors `names` of shape [2, 2].
std::string Shard(const std::vector<std::string>& names) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) header += ",";
    header += "\"" + names[i] + "\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + 16) + "]}";
    data.append(16, static_cast<char>(i + 1));
  }
  header += "}";
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
  return out + header + data;
}

const std::string& Dir() {
  static const std::string* dir = [] {
    auto* d = new std::string(argen::fuzz::ScratchDir() + "/sharded");
    std::filesystem::create_directories(*d);
    std::ofstream(*d + "/model-00001-of-00002.safetensors", std::ios::binary) << Shard({"a.weight", "b.weight"});
    std::ofstream(*d + "/model-00002-of-00002.safetensors", std::ios::binary) << Shard({"c.weight"});
    return d;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = Dir();
  argen::fuzz::WriteScratchFile("sharded/model.safetensors.index.json", data, size);
  absl::StatusOr<std::unique_ptr<argen::checkpoint::Checkpoint>> ckpt = argen::checkpoint::Checkpoint::Open(dir);
  if (!ckpt.ok()) return 0;
  for (const char* name : {"a.weight", "b.weight", "c.weight", "d.weight"}) {
    if (!(*ckpt)->Has(name)) continue;
    absl::StatusOr<const argen::checkpoint::TensorInfo*> info = (*ckpt)->Find(name);
    if (!info.ok()) __builtin_trap();
    // Every tensor found lives in one of the two shards of this directory.
    if (std::filesystem::path((*info)->file).parent_path() != std::filesystem::path(dir)) __builtin_trap();
    if (!(*ckpt)->LoadF32(name, {2, 2}).ok()) __builtin_trap();
  }
  return 0;
}
