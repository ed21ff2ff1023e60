#include "client/prompts_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "nlohmann/json.hpp"

namespace argen::client {
namespace {

using nlohmann::json;

absl::Status ApplyField(const std::string& key, const json& v, v1::GenerateRequest& r, std::set<std::string>& ignored) {
  auto want_number = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("field \"", key, "\": expected ", what, ", got ", v.dump()));
  };
  auto integer = [&](int64_t lo, int64_t hi, int64_t& out) -> absl::Status {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return want_number(absl::StrCat("an integer in [", lo, ", ", hi, "]").c_str());
    }
    out = v.get<int64_t>();
    return absl::OkStatus();
  };
  int64_t i = 0;
  if (key == "prompt") {
    if (!v.is_string()) return want_number("a string");
    r.set_prompt(v.get<std::string>());
  } else if (key == "negative_prompt") {
    if (!v.is_string()) return want_number("a string");
    r.set_negative_prompt(v.get<std::string>());
  } else if (key == "request_id") {
    if (!v.is_string()) return want_number("a string");
    r.set_request_id(v.get<std::string>());
  } else if (key == "policy") {
    if (!v.is_string()) return want_number("a string such as \"diagonal:0.9\"");
    absl::StatusOr<v1::SparsityPolicy> p = ParsePolicySpec(v.get<std::string>());
    if (!p.ok()) return p.status();
    // The dtype is no policy parameter (and keys come in name order, so a
    // line's own kv_cache_dtype was applied before "policy").
    const std::string dtype = r.policy().kv_cache_dtype();
    *r.mutable_policy() = *p;
    if (!dtype.empty()) r.mutable_policy()->set_kv_cache_dtype(dtype);
  } else if (key == "kv_cache_dtype") {
    if (!v.is_string()) return want_number("a string, auto or fp8");
    absl::StatusOr<std::string> dtype = ParseKvCacheDtype(v.get<std::string>());
    if (!dtype.ok()) return dtype.status();
    r.mutable_policy()->set_kv_cache_dtype(*dtype);
  } else if (key == "size") {
    if (!v.is_string()) return want_number("a string such as \"512x768\"");
    absl::StatusOr<std::pair<int32_t, int32_t>> size = ParseSizeSpec(v.get<std::string>());
    if (!size.ok()) return size.status();
    r.set_width(size->first);
    r.set_height(size->second);
  } else if (key == "count" || key == "num_images" || key == "n") {  // the CLI's, gRPC's and HTTP's names
    if (absl::Status s = integer(1, 4096, i); !s.ok()) return s;
    r.set_num_images(static_cast<int32_t>(i));
  } else if (key == "seed") {
    if (absl::Status s = integer(0, INT64_MAX, i); !s.ok()) return s;
    r.set_seed(static_cast<uint64_t>(i));
  } else if (key == "top_k") {
    if (absl::Status s = integer(0, 1 << 30, i); !s.ok()) return s;
    r.set_top_k(static_cast<int32_t>(i));
  } else if (key == "n_att" || key == "n_recent" || key == "n_sink") {
    if (absl::Status s = integer(-1, 1 << 24, i); !s.ok()) return s;
    const int32_t x = static_cast<int32_t>(i);
    if (key == "n_att") r.mutable_policy()->set_n_att(x);
    if (key == "n_recent") r.mutable_policy()->set_n_recent(x);
    if (key == "n_sink") r.mutable_policy()->set_n_sink(x);
  } else if (key == "sparsity" || key == "cfg" || key == "cfg_weight" || key == "guidance_scale" ||
             key == "temperature" || key == "top_p") {
    if (!v.is_number()) return want_number("a number");
    const double x = v.get<double>();
    if (key == "sparsity") r.mutable_policy()->set_sparsity(x);
    if (key == "cfg" || key == "cfg_weight" || key == "guidance_scale") r.set_cfg_weight(static_cast<float>(x));
    if (key == "temperature") r.set_temperature(static_cast<float>(x));
    if (key == "top_p") r.set_top_p(static_cast<float>(x));
  } else {
    ignored.insert(key);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PromptsFile> ParsePrompts(const std::string& text, const std::string& source,
                                         const v1::GenerateRequest& base) {
  PromptsFile file;
  std::istringstream in(text);
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    const std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#') continue;
    PromptLine p;
    p.line = number;
    p.request = base;
    auto where = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", number, ": ", why));
    };
    if (line[0] == '{') {
      const json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (object.is_discarded() || !object.is_object()) return where("not a JSON object");
      if (!object.contains("prompt")) return where("no \"prompt\" field");
      for (const auto& [key, value] : object.items()) {
        if (absl::Status s = ApplyField(key, value, p.request, file.ignored_fields); !s.ok()) {
          return where(s.message());
        }
      }
    } else {
      p.request.set_prompt(line);
    }
    file.lines.push_back(std::move(p));
  }
  if (file.lines.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no prompts"));
  return file;
}

absl::StatusOr<PromptsFile> ReadPromptsFile(const std::string& path, const v1::GenerateRequest& base) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--prompts-file ", path, ": cannot be read"));
  std::stringstream s;
  s << in.rdbuf();
  return ParsePrompts(s.str(), path, base);
}

}  // namespace argen::client
