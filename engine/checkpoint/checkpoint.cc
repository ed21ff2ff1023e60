// Checkpoint::Open: a directory as the hub ships it: model.safetensors or
// shards listed in model.safetensors.index.json, else pytorch_model.bin or
// shards listed in pytorch_model.bin.index.json. Only maps files; nothing is
// converted until a tensor is read.
#include "engine/checkpoint/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/weights_file.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Debian's abseil has its own string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0).
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// weight_map of the index file: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  auto text = ReadText(index_path);
  if (!text.ok()) return text.status();
  json index = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(index_path, ": malformed JSON"));
  const auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing object field 'weight_map'"));
  }
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map['", tensor, "'] must be a shard file name string"));
    }
    const std::string file = shard.get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map['", tensor, "'] names '", file, "', not a file in the directory"));
    }
    out.emplace(tensor, file);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map is empty"));
  return out;
}

class FileCheckpoint final : public Checkpoint {
 public:
  explicit FileCheckpoint(std::string dir) : dir_(std::move(dir)) {}

  absl::Status AddFile(std::unique_ptr<WeightsFile> file) {
    for (size_t i = 0; i < file->size(); ++i) {
      auto [it, inserted] = by_name_.emplace(file->name(i), Slot{file.get(), i});
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", file->name(i), "' appears in both ",
                                                       it->second.file->path(), " and ", file->path()));
      }
    }
    files_.push_back(std::move(file));
    return absl::OkStatus();
  }

  // Every tensor the index promises must be in the shard it names.
  absl::Status CheckWeightMap(const std::string& index_path, const std::map<std::string, std::string>& weight_map) {
    for (const auto& [tensor, shard] : weight_map) {
      const auto it = by_name_.find(tensor);
      const std::string shard_path = (fs::path(dir_) / shard).string();
      if (it == by_name_.end()) {
        return absl::NotFoundError(
            absl::StrCat(index_path, ": tensor '", tensor, "' is mapped to ", shard_path, " but is not in it"));
      }
      if (it->second.file->path() != shard_path) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor '", tensor, "' is mapped to ", shard_path,
                                                       " but found in ", it->second.file->path()));
      }
    }
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<WeightsFile>> TakeFiles() {
    by_name_.clear();
    return std::move(files_);
  }

  const std::string& dir() const override { return dir_; }

  bool Has(std::string_view name) const override { return by_name_.contains(Sv(name)); }

  absl::StatusOr<const TensorInfo*> Find(std::string_view name) const override {
    const auto it = by_name_.find(Sv(name));
    if (it == by_name_.end()) {
      return absl::NotFoundError(absl::StrCat(dir_, ": tensor '", Sv(name), "' is missing from the checkpoint"));
    }
    return it->second.file->Tensor(it->second.index);
  }

  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    auto info = Find(name);
    if (!info.ok()) return info.status();
    const TensorInfo& t = **info;
    if (t.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(t.file, ": tensor '", Sv(name), "' has shape ",
                                                     ShapeString(t.shape), ", expected ", ShapeString(shape)));
    }
    std::vector<float> out(t.nbytes / DTypeSize(t.dtype));
    ConvertToF32(t.dtype, t.data, out.size(), out.data());
    return out;
  }

  absl::Status ReadRowsF32(std::string_view name, const int32_t* rows, int64_t n_rows, float* out) const override {
    auto info = Find(name);
    if (!info.ok()) return info.status();
    const TensorInfo& t = **info;
    if (t.shape.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.file, ": tensor '", Sv(name), "' has shape ", ShapeString(t.shape), ", expected 2-D rows"));
    }
    const int64_t n_total = t.shape[0];
    const int64_t width = t.shape[1];
    const size_t row_bytes = static_cast<size_t>(width) * DTypeSize(t.dtype);
    const auto* base = static_cast<const unsigned char*>(t.data);
    for (int64_t i = 0; i < n_rows; ++i) {
      const int32_t r = rows[i];
      if (r < 0 || r >= n_total) {
        return absl::OutOfRangeError(
            absl::StrCat(t.file, ": tensor '", Sv(name), "': row ", r, " is outside [0, ", n_total, ")"));
      }
      ConvertToF32(t.dtype, base + static_cast<size_t>(r) * row_bytes, static_cast<size_t>(width), out + i * width);
    }
    return absl::OkStatus();
  }

 private:
  struct Slot {
    const WeightsFile* file;
    size_t index;
  };
  std::string dir_;
  std::vector<std::unique_ptr<WeightsFile>> files_;
  absl::flat_hash_map<std::string, Slot> by_name_;
};

// A hub layout: one weights file, or shards listed by an index file.
struct Layout {
  const char* single;
  const char* index;
};
// In order of preference: safetensors maps faster (no pickle, no CRC pass).
constexpr Layout kLayouts[] = {{"model.safetensors", "model.safetensors.index.json"},
                               {"pytorch_model.bin", "pytorch_model.bin.index.json"}};

absl::Status OpenSharded(FileCheckpoint& ckpt, const std::string& dir, const std::string& index_path) {
  auto weight_map = ReadWeightMap(index_path);
  if (!weight_map.ok()) return weight_map.status();
  std::map<std::string, std::string> first_tensor_of_shard;  // for the missing-shard message
  for (const auto& [tensor, shard] : *weight_map) first_tensor_of_shard.emplace(shard, tensor);
  std::error_code ec;
  for (const auto& [shard, tensor] : first_tensor_of_shard) {
    const std::string shard_path = (fs::path(dir) / shard).string();
    if (!fs::exists(shard_path, ec)) {
      return absl::NotFoundError(absl::StrCat(index_path, ": shard ", shard_path, " (holding tensor '", tensor,
                                              "' and others) does not exist"));
    }
    auto file = OpenWeightsFile(shard_path);
    if (!file.ok()) return file.status();
    if (auto s = ckpt.AddFile(std::move(*file)); !s.ok()) return s;
  }
  return ckpt.CheckWeightMap(index_path, *weight_map);
}

}  // namespace

namespace {

absl::StatusOr<std::unique_ptr<FileCheckpoint>> OpenDirectory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": not a checkpoint directory"));
  }
  auto ckpt = std::make_unique<FileCheckpoint>(dir);
  for (const Layout& layout : kLayouts) {
    const std::string index_path = (fs::path(dir) / layout.index).string();
    const std::string single_path = (fs::path(dir) / layout.single).string();
    if (fs::exists(index_path, ec)) {
      if (auto s = OpenSharded(*ckpt, dir, index_path); !s.ok()) return s;
      return ckpt;
    }
    if (fs::exists(single_path, ec)) {
      auto file = OpenWeightsFile(single_path);
      if (!file.ok()) return file.status();
      if (auto s = ckpt->AddFile(std::move(*file)); !s.ok()) return s;
      return ckpt;
    }
  }
  return absl::NotFoundError(absl::StrCat(dir,
                                          ": no weights: none of model.safetensors, model.safetensors.index.json, ",
                                          "pytorch_model.bin, pytorch_model.bin.index.json exists"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  auto ckpt = OpenDirectory(dir);
  if (!ckpt.ok()) return ckpt.status();
  return std::unique_ptr<Checkpoint>(std::move(*ckpt));
}

absl::StatusOr<std::vector<std::unique_ptr<WeightsFile>>> OpenModelWeights(const std::string& dir) {
  auto ckpt = OpenDirectory(dir);
  if (!ckpt.ok()) return ckpt.status();
  return (*ckpt)->TakeFiles();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpointFile(const std::string& path) {
  auto file = OpenWeightsFile(path);
  if (!file.ok()) return file.status();
  auto ckpt = std::make_unique<FileCheckpoint>(fs::path(path).parent_path().string());
  if (auto s = ckpt->AddFile(std::move(*file)); !s.ok()) return s;
  return std::unique_ptr<Checkpoint>(std::move(ckpt));
}

}  // namespace argen::checkpoint
