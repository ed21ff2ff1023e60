// Test-side writers for torch.save-style archives, to build whole checkpoints
// (the engine's .bin-vs-safetensors test) and bad inputs (malicious globals,
// lying sizes) at test time. The layout follows what torch.save writes (the
// goldens in tests/goldens/torch/ are made by torch.save itself and check the
// reader; this writer is checked against the reader on them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/checkpoint/tests/test_files.h"

namespace argen::checkpoint::testing {

// Emits pickle opcodes (protocol 2 unless told otherwise).
class PickleBuilder {
 public:
  PickleBuilder& Proto(int version = 2);
  PickleBuilder& Global(std::string_view module, std::string_view name);
  PickleBuilder& Mark();
  PickleBuilder& Tuple();  // from the mark
  PickleBuilder& Tuple1();
  PickleBuilder& Tuple2();
  PickleBuilder& Tuple3();
  PickleBuilder& EmptyTuple();
  PickleBuilder& EmptyList();
  PickleBuilder& EmptyDict();
  PickleBuilder& Append();
  PickleBuilder& Appends();  // from the mark
  PickleBuilder& SetItem();
  PickleBuilder& SetItems();  // from the mark
  PickleBuilder& Unicode(std::string_view s);
  PickleBuilder& Int(int64_t v);
  PickleBuilder& Float(double v);
  PickleBuilder& Bool(bool v);
  PickleBuilder& None();
  PickleBuilder& Reduce();
  PickleBuilder& Build();
  PickleBuilder& PersId();
  PickleBuilder& Put(uint32_t memo);
  PickleBuilder& Get(uint32_t memo);
  PickleBuilder& Pop();
  PickleBuilder& Stop();
  PickleBuilder& Raw(std::string_view bytes);
  // torch._utils._rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())
  PickleBuilder& Tensor(std::string_view storage_class, std::string_view key, int64_t numel, int64_t offset,
                        const std::vector<int64_t>& size, const std::vector<int64_t>& stride);
  const std::string& bytes() const { return out_; }

 private:
  PickleBuilder& Op(char op);
  PickleBuilder& Ints(const std::vector<int64_t>& v);
  std::string out_;
};

struct ZipOptions {
  bool align64 = true;  // torch.save pads local headers so data starts on 64-byte boundaries
  bool zip64 = false;   // ZIP64 extra fields in every central entry, ZIP64 end record and locator
  bool crc = true;      // false: CRC fields 0 (torch set_crc32_options(False))
};

// A stored (uncompressed) zip archive of the records, in order.
std::string ZipBytes(const std::vector<std::pair<std::string, std::string>>& records, const ZipOptions& options = {});

// A torch.save archive: <archive>/data.pkl, byteorder, data/<key> records, version.
std::string TorchArchive(const std::string& archive, const std::string& data_pkl,
                         const std::vector<std::pair<std::string, std::string>>& storages,
                         const ZipOptions& options = {});

// The storage class torch pickles for a safetensors dtype spelling ("BF16" -> "BFloat16Storage").
std::string StorageClass(std::string_view dtype);

// A whole torch.save file of a state dict (one contiguous storage per tensor),
// optionally inside a Lightning-style dict {"epoch": 1, "state_dict": ...}.
std::string TorchSaveBytes(const std::vector<RawTensor>& tensors, const std::string& archive = "archive",
                           bool lightning = false, const ZipOptions& options = {});

// Writes a checkpoint directory the way the hub ships the official Janus-Pro
// .bin weights: pytorch_model.bin (shards = 1) or pytorch_model-0000N-of-0000M.bin
// + pytorch_model.bin.index.json, from tensors read elsewhere; config.json and
// tokenizer.json are copied from `source_dir`.
void WriteTorchCheckpointDir(const std::vector<RawTensor>& tensors, const std::string& source_dir,
                             const std::string& out_dir, int shards);

}  // namespace argen::checkpoint::testing
