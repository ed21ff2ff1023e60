#include "engine/checkpoint/weights_file.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/torch_file.h"

namespace argen::checkpoint {
namespace {

class SafetensorsWeights final : public WeightsFile {
 public:
  explicit SafetensorsWeights(std::unique_ptr<SafetensorsFile> file) : file_(std::move(file)) {}
  const std::string& path() const override { return file_->path(); }
  size_t size() const override { return file_->tensors().size(); }
  const std::string& name(size_t i) const override { return file_->tensors()[i].name; }
  absl::StatusOr<const TensorInfo*> Tensor(size_t i) const override { return &file_->tensors()[i]; }
  absl::StatusOr<Raw> RawTensor(size_t i, std::string*) const override {
    const TensorInfo& t = file_->tensors()[i];
    return Raw{std::string(DTypeName(t.dtype)), t.shape, std::string_view(static_cast<const char*>(t.data), t.nbytes)};
  }
  Raw RawInfo(size_t i) const override {
    const TensorInfo& t = file_->tensors()[i];
    return Raw{std::string(DTypeName(t.dtype)), t.shape, {}};
  }

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

class TorchWeights final : public WeightsFile {
 public:
  explicit TorchWeights(std::unique_ptr<TorchFile> file) : file_(std::move(file)) {}
  const std::string& path() const override { return file_->path(); }
  size_t size() const override { return file_->tensors().size(); }
  const std::string& name(size_t i) const override { return file_->tensors()[i].name; }
  absl::StatusOr<const TensorInfo*> Tensor(size_t i) const override { return file_->Tensor(i); }
  absl::StatusOr<Raw> RawTensor(size_t i, std::string* scratch) const override {
    auto bytes = file_->RawBytes(i, scratch);
    if (!bytes.ok()) return bytes.status();
    const TorchTensor& t = file_->tensors()[i];
    return Raw{std::string(pickle::StorageTypeDType(t.type)), t.shape, *bytes};
  }
  Raw RawInfo(size_t i) const override {
    const TorchTensor& t = file_->tensors()[i];
    return Raw{std::string(pickle::StorageTypeDType(t.type)), t.shape, {}};
  }
  std::vector<std::string> Skipped() const override {
    std::vector<std::string> out;
    for (const std::string& s : file_->skipped()) {
      out.push_back(file_->state_dict_key().empty() ? s
                                                    : absl::StrCat(s, " (next to '", file_->state_dict_key(), "')"));
    }
    return out;
  }

 private:
  std::unique_ptr<TorchFile> file_;
};

// The first bytes, to tell the formats apart before mapping the file.
std::string Head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightsFile>> OpenWeightsFile(const std::string& path) {
  const std::string head = Head(path, 512);
  const auto* bytes = reinterpret_cast<const unsigned char*>(head.data());
  // A safetensors header is an 8-byte length and then JSON ('{'); torch files are zips (or refused legacy forms).
  const bool safetensors =
      absl::EndsWith(path, ".safetensors") || (head.size() > 8 && head[8] == '{' && !LooksLikeZip(bytes, head.size()));
  if (safetensors) {
    auto file = SafetensorsFile::Open(path);
    if (!file.ok()) return file.status();
    return std::unique_ptr<WeightsFile>(new SafetensorsWeights(std::move(*file)));
  }
  auto file = TorchFile::Open(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<WeightsFile>(new TorchWeights(std::move(*file)));
}

}  // namespace argen::checkpoint
