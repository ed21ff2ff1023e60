// Fuzzes a whole .safetensors file: the 8-byte length, the JSON header and
// the data offsets (engine/checkpoint/safetensors.cc), then the checkpoint
// view of it (Checkpoint::Open on a directory holding it as
// model.safetensors) and the f32 conversion of every tensor it lists.
#include <filesystem>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "tests/fuzz/fuzz_driver.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using argen::checkpoint::Checkpoint;
  using argen::checkpoint::SafetensorsFile;
  static const std::string dir = [] {
    std::string d = argen::fuzz::ScratchDir() + "/ckpt";
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string path = dir + "/model.safetensors";
  argen::fuzz::WriteScratchFile("ckpt/model.safetensors", data, size);

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::Open(dir);
  if (file.ok() != ckpt.ok()) __builtin_trap();  // the directory view must agree with the file
  if (!file.ok()) return 0;
  for (const argen::checkpoint::TensorInfo& t : (*file)->tensors()) {
    if (t.nbytes > (size_t{1} << 24)) continue;  // an honest large shape; nothing more to parse
    absl::StatusOr<std::vector<float>> values = (*ckpt)->LoadF32(t.name, t.shape);
    if (!values.ok()) __builtin_trap();  // a header that opened must convert with its own shape
    if (t.shape.size() == 2 && t.shape[0] > 0) {
      const int32_t rows[2] = {0, static_cast<int32_t>(t.shape[0] - 1)};
      std::vector<float> out(2 * static_cast<size_t>(t.shape[1]));
      if (!(*ckpt)->ReadRowsF32(t.name, rows, 2, out.data()).ok()) __builtin_trap();
    }
  }
  return 0;
}
