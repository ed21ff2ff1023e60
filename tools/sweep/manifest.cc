#include "tools/sweep/manifest.h"

#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::sweep {

std::string ImageFileName(int32_t prompt_index, int32_t image) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d_%d.png", prompt_index, image);
  return buf;
}

std::string ToJsonLine(const ManifestEntry& e) {
  nlohmann::json j = {{"prompt_index", e.prompt_index},
                      {"tag", e.tag},
                      {"prompt", e.prompt},
                      {"policy", e.policy},
                      {"sparsity", e.sparsity},
                      {"config", e.config},
                      {"seed", e.seed},
                      {"image", e.image},
                      {"path", e.path},
                      {"decode_s", e.decode_s}};
  if (e.class_id >= 0) j["class_id"] = e.class_id;
  return j.dump();
}

absl::StatusOr<ManifestEntry> ParseManifestLine(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  ManifestEntry e;
  try {
    e.prompt_index = j.at("prompt_index").get<int32_t>();
    e.tag = j.at("tag").get<std::string>();
    e.prompt = j.at("prompt").get<std::string>();
    e.policy = j.at("policy").get<std::string>();
    e.sparsity = j.at("sparsity").get<double>();
    e.config = j.at("config").get<std::string>();
    e.seed = j.at("seed").get<uint64_t>();
    e.image = j.at("image").get<int32_t>();
    e.path = j.at("path").get<std::string>();
    e.decode_s = j.at("decode_s").get<double>();
    if (j.contains("class_id")) e.class_id = j.at("class_id").get<int32_t>();
  } catch (const nlohmann::json::exception& ex) {
    return absl::InvalidArgumentError(ex.what());
  }
  return e;
}

absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("manifest \"", path, "\" cannot be read"));
  std::vector<ManifestEntry> entries;
  std::string line;
  for (int32_t n = 1; std::getline(in, line); ++n) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<ManifestEntry> e = ParseManifestLine(line);
    // A killed run may leave a partial last line; earlier lines must be whole.
    if (!e.ok()) {
      if (in.peek() == EOF) break;
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": ", e.status().message()));
    }
    entries.push_back(*std::move(e));
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<ManifestWriter>> ManifestWriter::Open(const std::string& path, bool append) {
  std::ofstream out(path, append ? std::ios::app : std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("manifest \"", path, "\" cannot be written"));
  return std::unique_ptr<ManifestWriter>(new ManifestWriter(path, std::move(out)));
}

absl::Status ManifestWriter::Write(const ManifestEntry& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << ToJsonLine(entry) << '\n';
  out_.flush();
  if (!out_) return absl::DataLossError(absl::StrCat("manifest \"", path_, "\": write failed"));
  return absl::OkStatus();
}

}  // namespace argen::sweep
