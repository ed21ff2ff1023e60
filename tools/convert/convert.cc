#include "tools/convert/convert.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/checkpoint/weights_file.h"
#include "nlohmann/json.hpp"

namespace argen::convert {
namespace {

namespace fs = std::filesystem;
using checkpoint::WeightsFile;

// What argen's safetensors reader accepts; anything else is written as the F32 the Checkpoint API exposes.
bool KeptAsStored(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

uint64_t ElementSize(const std::string& dtype) {
  if (dtype == "F32") return 4;
  return 2;  // F16, BF16 (others are written as F32)
}

struct Item {
  const WeightsFile* file = nullptr;
  size_t index = 0;
  std::string name;
  std::string dtype;  // as written
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// The bytes written for an item: the stored row-major bytes, or the F32 values.
absl::StatusOr<std::string_view> ItemBytes(const Item& item, std::string* scratch) {
  if (KeptAsStored(item.file->RawInfo(item.index).dtype)) {
    auto raw = item.file->RawTensor(item.index, scratch);
    if (!raw.ok()) return raw.status();
    return raw->bytes;
  }
  auto info = item.file->Tensor(item.index);
  if (!info.ok()) return info.status();
  return std::string_view(static_cast<const char*>((*info)->data), (*info)->nbytes);
}

bool IsWeightsFile(const std::string& name) {
  for (const char* suffix :
       {".bin", ".bin.index.json", ".safetensors", ".safetensors.index.json", ".ckpt", ".pt", ".pth"}) {
    if (absl::EndsWith(name, suffix)) return true;
  }
  return false;
}

bool IsSafetensorsOutput(const std::string& name) {
  return name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (absl::StartsWith(name, "model-") && absl::EndsWith(name, ".safetensors"));
}

std::string Header(const std::vector<Item>& items) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const Item& t : items) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // data 8-byte aligned, as the reference writer does
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

absl::Status WriteShard(const std::string& path, const std::vector<Item>& items) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot create"));
  const std::string header = Header(items);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const Item& t : items) {
    std::string scratch;
    auto bytes = ItemBytes(t, &scratch);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() != t.bytes) {
      return absl::InternalError(
          absl::StrCat(t.file->path(), ": tensor '", t.name, "' read ", bytes->size(), " bytes, expected ", t.bytes));
    }
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed (disk full?)"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<WeightsFile>>> OpenInput(const std::string& in) {
  std::error_code ec;
  if (fs::is_directory(in, ec)) return checkpoint::OpenModelWeights(in);
  if (!fs::is_regular_file(in, ec)) return absl::NotFoundError(absl::StrCat(in, ": no such file or directory"));
  auto file = checkpoint::OpenWeightsFile(in);
  if (!file.ok()) return file.status();
  std::vector<std::unique_ptr<WeightsFile>> out;
  out.push_back(std::move(*file));
  return out;
}

// The written files against the input, byte for byte.
absl::Status Verify(const std::string& out_dir, const std::vector<Item>& items) {
  auto written = checkpoint::OpenModelWeights(out_dir);
  if (!written.ok()) return written.status();
  absl::flat_hash_map<std::string, const Item*> by_name;
  for (const Item& item : items) by_name.emplace(item.name, &item);
  size_t n = 0;
  for (const auto& f : *written) {
    for (size_t i = 0; i < f->size(); ++i, ++n) {
      const auto it = by_name.find(f->name(i));
      if (it == by_name.end()) {
        return absl::DataLossError(absl::StrCat(f->path(), ": tensor '", f->name(i), "' was not in the input"));
      }
      const Item& want = *it->second;
      std::string scratch, scratch2;
      auto got = f->RawTensor(i, &scratch);
      if (!got.ok()) return got.status();
      auto expected = ItemBytes(want, &scratch2);
      if (!expected.ok()) return expected.status();
      if (got->dtype != want.dtype || got->shape != want.shape || got->bytes != *expected) {
        return absl::DataLossError(
            absl::StrCat(f->path(), ": tensor '", f->name(i), "' does not read back as written"));
      }
    }
  }
  if (n != items.size()) {
    return absl::DataLossError(absl::StrCat(out_dir, ": read back ", n, " tensors, wrote ", items.size()));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t ParseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return 0;
  const uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::pair<std::string, uint64_t>> units = {{"", 1},
                                                               {"B", 1},
                                                               {"KB", 1000},
                                                               {"MB", 1000'000},
                                                               {"GB", 1000'000'000},
                                                               {"KIB", 1ull << 10},
                                                               {"MIB", 1ull << 20},
                                                               {"GIB", 1ull << 30}};
  for (const auto& [name, scale] : units) {
    if (unit == name) return value * scale;
  }
  return 0;
}

absl::StatusOr<ConvertReport> Convert(const ConvertOptions& options) {
  if (options.in.empty() || options.out.empty()) return absl::InvalidArgumentError("--in and --out are required");
  if (options.max_shard_bytes == 0) return absl::InvalidArgumentError("--max_shard_size must be positive");
  auto files = OpenInput(options.in);
  if (!files.ok()) return files.status();

  ConvertReport report;
  std::vector<Item> items;
  for (const auto& f : *files) {
    for (const std::string& s : f->Skipped()) report.skipped.push_back(absl::StrCat(f->path(), ": ", s));
    for (size_t i = 0; i < f->size(); ++i) {
      const WeightsFile::Raw info = f->RawInfo(i);
      Item item{f.get(), i, f->name(i), KeptAsStored(info.dtype) ? info.dtype : "F32", info.shape, 0};
      uint64_t numel = 1;
      for (int64_t d : info.shape) numel *= static_cast<uint64_t>(d);
      item.bytes = numel * ElementSize(item.dtype);
      items.push_back(std::move(item));
    }
  }
  if (items.empty()) return absl::InvalidArgumentError(absl::StrCat(options.in, ": holds no tensors"));

  // Shards of at most max_shard_bytes (a larger tensor gets a shard of its own).
  std::vector<std::vector<Item>> shards(1);
  uint64_t in_shard = 0;
  for (Item& item : items) {
    if (!shards.back().empty() && in_shard + item.bytes > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += item.bytes;
    report.bytes += item.bytes;
    shards.back().push_back(item);
  }
  report.tensors = static_cast<int64_t>(items.size());

  std::error_code ec;
  fs::create_directories(options.out, ec);
  if (!fs::is_directory(options.out, ec)) {
    return absl::PermissionDeniedError(absl::StrCat(options.out, ": cannot create the output directory"));
  }
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(options.out, ec)) {
    if (IsSafetensorsOutput(entry.path().filename().string())) stale.push_back(entry.path());
  }
  if (!stale.empty() && !options.force) {
    return absl::AlreadyExistsError(absl::StrCat(options.out, ": already holds ", stale.front().filename().string(),
                                                 " (pass --force to replace safetensors weights there)"));
  }

  const size_t n = shards.size();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::vector<std::pair<fs::path, fs::path>> renames;
  for (size_t s = 0; s < n; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, n);
    const std::string file = n == 1 ? "model.safetensors" : name;
    const fs::path final_path = fs::path(options.out) / file;
    const fs::path partial = fs::path(options.out) / (file + ".partial");
    if (absl::Status st = WriteShard(partial.string(), shards[s]); !st.ok()) {
      for (const auto& [p, unused] : renames) fs::remove(p, ec);
      fs::remove(partial, ec);
      return st;
    }
    renames.emplace_back(partial, final_path);
    for (const Item& t : shards[s]) weight_map[t.name] = file;
    report.shards.push_back(file);
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
  for (const auto& [from, to] : renames) fs::rename(from, to, ec);
  if (n > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", report.bytes}};
    index["weight_map"] = weight_map;
    std::ofstream(fs::path(options.out) / "model.safetensors.index.json") << index.dump(2) << "\n";
    report.shards.push_back("model.safetensors.index.json");
  }

  if (fs::is_directory(options.in, ec) && !fs::equivalent(options.in, options.out, ec)) {
    for (const auto& entry : fs::directory_iterator(options.in, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || IsWeightsFile(name)) continue;
      fs::copy_file(entry.path(), fs::path(options.out) / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat(entry.path().string(), ": cannot copy: ", ec.message()));
      report.copied.push_back(name);
    }
  }
  if (absl::Status st = Verify(options.out, items); !st.ok()) return st;
  return report;
}

}  // namespace argen::convert
