// One torch.save checkpoint file (pytorch_model.bin, *.pt, *.pth, a Lightning
// *.ckpt), read without Python: the zip archive is memory-mapped, data.pkl is
// read by the restricted unpickler (pickle.h) and each tensor becomes a view
// of its storage record in the mapping. Nothing is copied or converted at
// open; a tensor's storage is CRC-checked the first time the tensor is read.
//
// What is accepted (docs/checkpoint-format.md):
//  - a state dict: a dict (OrderedDict) of name -> tensor; plain values (None,
//    numbers, strings) among the tensors are skipped;
//  - a dict that holds the state dict under "state_dict" (Lightning), "model"
//    (DDP trainers, LlamaGen) or "module" (DeepSpeed): the other entries
//    (optimizer states, callbacks, loops, hyper-parameters, an
//    argparse.Namespace of args) are skipped unread and may use names the reader does not
//    interpret (e.g. pytorch_lightning callback classes), since nothing is
//    called; names that only serve code execution are refused anywhere.
//  - In a bare state dict every name the unpickler does not interpret is refused.
// Strided views are copied to row-major on first read (a view that repeats
// elements is refused); F64 and integer tensors are exposed as F32.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/mapped_file.h"
#include "engine/checkpoint/pickle.h"
#include "engine/checkpoint/zip_archive.h"

namespace argen::checkpoint {

struct TorchTensor {
  std::string name;
  pickle::StorageType type = pickle::StorageType::kF32;
  std::vector<int64_t> shape, stride;
  int64_t offset = 0;      // elements into the storage
  size_t storage = 0;      // index into the file's storage records
  bool contiguous = true;  // row-major with no gaps: readable in place
  int64_t numel() const;
};

class TorchFile {
 public:
  // Errors name the file and, where one is at fault, the tensor.
  static absl::StatusOr<std::unique_ptr<TorchFile>> Open(const std::string& path);
  // The same over bytes in memory (tests, fuzzing); `path` only names them.
  static absl::StatusOr<std::unique_ptr<TorchFile>> FromBytes(const std::string& path, std::string bytes);

  const std::string& path() const { return path_; }
  const std::vector<TorchTensor>& tensors() const { return tensors_; }
  // "<key>: <what it holds>" for each entry next to the state dict that was not read.
  const std::vector<std::string>& skipped() const { return skipped_; }
  // Which top-level key held the state dict ("" when the file is a bare state dict).
  const std::string& state_dict_key() const { return state_dict_key_; }

  // The tensor for the Checkpoint API: F32/F16/BF16 in place when contiguous;
  // otherwise a row-major copy (F64 and integers converted to F32) made once.
  absl::StatusOr<const TensorInfo*> Tensor(size_t i) const;
  // Row-major bytes in the stored dtype: the mapping itself when contiguous,
  // else a copy into *scratch.
  absl::StatusOr<std::string_view> RawBytes(size_t i, std::string* scratch) const;

 private:
  struct StorageRecord {
    const ZipEntry* entry = nullptr;
    pickle::StorageType type = pickle::StorageType::kF32;
    std::string key;
  };
  struct Lazy {
    bool ready = false;
    std::string buffer;  // the copy, when not read in place
  };

  TorchFile() = default;
  absl::Status Init();
  absl::Status CheckArchive(const unsigned char* data, size_t size);
  absl::Status ReadStateDict(const pickle::Graph& graph, const std::string& root);
  absl::Status AddTensor(const pickle::Graph& graph, const std::string& root, const std::string& name, uint32_t value);
  absl::Status VerifyStorage(size_t storage) const;
  std::string_view StorageBytes(size_t storage) const;

  std::string path_;
  std::unique_ptr<MappedFile> mapped_;
  std::string owned_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  ZipArchive zip_;
  std::vector<StorageRecord> storages_;
  absl::flat_hash_map<std::string, size_t> storage_index_;  // by key
  std::vector<TorchTensor> tensors_;
  std::vector<std::string> skipped_;
  std::string state_dict_key_;

  mutable std::mutex mu_;                  // guards infos_ and lazy_
  mutable std::vector<TensorInfo> infos_;  // one per tensor; data set when ready
  mutable std::vector<Lazy> lazy_;
  // Per storage: its CRC is checked once, concurrently with other storages'.
  mutable std::unique_ptr<std::once_flag[]> crc_once_;
  mutable std::vector<absl::Status> crc_status_;
};

// Whether the bytes start like a zip archive (torch.save's format since 1.6).
bool LooksLikeZip(const unsigned char* data, size_t size);

}  // namespace argen::checkpoint
