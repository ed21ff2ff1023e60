#include "engine/checkpoint/tests/torch_fuzz.h"

#include <string>
#include <vector>

#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/pickle.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/checkpoint/torch_file.h"

namespace argen::checkpoint::testing {
namespace {

constexpr uint64_t kMaxStorageBytes = 1 << 20;  // per fuzz input, for the built archive

void ReadEverything(const TorchFile& file) {
  volatile float sink = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TorchTensor& t = file.tensors()[i];
    std::string scratch;
    auto raw = file.RawBytes(i, &scratch);
    auto info = file.Tensor(i);
    if (raw.ok() != info.ok() && raw.ok() && t.type != pickle::StorageType::kI64 &&
        t.type != pickle::StorageType::kI32) {
      __builtin_trap();  // only integers f32 cannot hold may fail after the raw read
    }
    if (raw.ok() && raw->size() != static_cast<size_t>(t.numel()) * pickle::StorageElementSize(t.type)) {
      __builtin_trap();
    }
    if (!info.ok()) continue;
    const TensorInfo& ti = **info;
    if (ti.nbytes != static_cast<size_t>(t.numel()) * DTypeSize(ti.dtype) || ti.shape != t.shape ||
        (ti.nbytes > 0 && ti.data == nullptr)) {
      __builtin_trap();
    }
    std::vector<float> out(ti.nbytes / DTypeSize(ti.dtype));
    ConvertToF32(ti.dtype, ti.data, out.size(), out.data());  // touches every byte
    for (float v : out) sink = sink + v;
  }
  for (const std::string& s : file.skipped()) sink = sink + static_cast<float>(s.size());
}

}  // namespace

void FuzzTorchCheckpoint(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (auto file = TorchFile::FromBytes("fuzz.bin", bytes); file.ok()) ReadEverything(**file);

  auto graph = pickle::Unpickle(bytes, "fuzz: data.pkl");
  if (!graph.ok()) return;
  std::vector<std::pair<std::string, std::string>> storages;
  uint64_t total = 0;
  for (const pickle::Storage& s : graph->storages) {
    const uint64_t n = static_cast<uint64_t>(s.numel) * pickle::StorageElementSize(s.type);
    if (s.numel > static_cast<int64_t>(kMaxStorageBytes) || total + n > kMaxStorageBytes) continue;
    total += n;
    std::string record(n, '\0');
    for (size_t i = 0; i < record.size(); ++i) record[i] = static_cast<char>(i * 31 + 7);
    storages.emplace_back(s.key, std::move(record));
  }
  auto file = TorchFile::FromBytes("fuzz.bin", TorchArchive("fuzz", bytes, storages));
  if (file.ok()) ReadEverything(**file);
}

}  // namespace argen::checkpoint::testing
