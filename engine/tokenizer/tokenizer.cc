#include "engine/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/model.h"
#include "engine/tokenizer/post_processor.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ss.str();
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  return j;
}

// Only normalizers that change nothing are accepted (Janus's tokenizer has none).
absl::Status CheckNormalizer(const nlohmann::json& n, const std::string& where) {
  if (n.is_null()) return absl::OkStatus();
  if (n.is_object() && StringOr(n, "type", "") == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array()) {
    for (size_t i = 0; i < n["normalizers"].size(); ++i) {
      if (absl::Status s = CheckNormalizer(n["normalizers"][i], absl::StrCat(where, ".normalizers[", i, "]"));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  const std::string type = StringOr(n, "type", "?");
  return absl::InvalidArgumentError(absl::StrCat(where, ".type: normalizer \"", type, "\" is not supported"));
}

// tokenizer_config.json's bos_token/eos_token: a string or {"content": ...}.
std::string TokenContent(const nlohmann::json& config, const char* field) {
  auto it = config.find(field);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"];
  return "";
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::LoadFromFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto tok = LoadFromJson(*text, path);
  if (!tok.ok()) return tok.status();
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config, ec)) {
    if (absl::Status s = tok->ApplyTokenizerConfig(config.string()); !s.ok()) return s;
  }
  return tok;
}

absl::StatusOr<Tokenizer> Tokenizer::LoadFromJson(std::string_view json, const std::string& source) {
  // The field readers check types; this catches any access they missed, so a
  // malformed file is an error, never an exception escaping to the caller.
  try {
    return LoadFromJsonChecked(json, source);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed tokenizer.json: ", e.what()));
  }
}

absl::StatusOr<Tokenizer> Tokenizer::LoadFromJsonChecked(std::string_view json, const std::string& source) {
  auto root = ParseJson(json, source);
  if (!root.ok()) return root.status();
  if (!root->is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": top level is not an object"));
  Tokenizer tok;
  tok.source_ = source;
  const auto field = [&](const char* name) -> const nlohmann::json& {
    static const nlohmann::json kNull;
    auto it = root->find(name);
    return it == root->end() ? kNull : *it;
  };
  if (absl::Status s = CheckNormalizer(field("normalizer"), absl::StrCat(source, ": normalizer")); !s.ok()) return s;
  auto model = ParseModel(field("model"), absl::StrCat(source, ": model"));
  if (!model.ok()) return model.status();
  tok.model_ = std::move(*model);
  auto added = AddedTokens::Parse(field("added_tokens"), absl::StrCat(source, ": added_tokens"));
  if (!added.ok()) return added.status();
  tok.added_ = std::move(*added);
  auto pre = ParsePreTokenizer(field("pre_tokenizer"), absl::StrCat(source, ": pre_tokenizer"));
  if (!pre.ok()) return pre.status();
  tok.pre_tokenizer_ = std::move(*pre);
  auto decoder = ParseDecoder(field("decoder"), absl::StrCat(source, ": decoder"));
  if (!decoder.ok()) return decoder.status();
  tok.decoder_ = std::move(*decoder);
  auto wrap = ParsePostProcessor(field("post_processor"), absl::StrCat(source, ": post_processor"));
  if (!wrap.ok()) return wrap.status();
  tok.special_prefix_ = std::move(wrap->prefix);
  tok.special_suffix_ = std::move(wrap->suffix);
  for (int32_t id : tok.special_prefix_) {
    if (!tok.IdToToken(id))
      return absl::InvalidArgumentError(absl::StrCat(source, ": post_processor: id ", id, " has no token"));
  }
  return tok;
}

absl::Status Tokenizer::ApplyTokenizerConfig(const std::string& config_path) {
  auto text = ReadFile(config_path);
  if (!text.ok()) return text.status();
  auto config = ParseJson(*text, config_path);
  if (!config.ok()) return config.status();
  if (!config->is_object())
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": top level is not an object"));
  const std::string cls = StringOr(*config, "tokenizer_class", "");
  if (cls != "LlamaTokenizerFast" && cls != "LlamaTokenizer") return absl::OkStatus();
  // LlamaTokenizerFast.update_post_processor: [bos if add_bos_token] $A [eos if add_eos_token].
  const auto flag = [&](const char* name, bool fallback) -> absl::StatusOr<bool> {
    auto it = config->find(name);
    if (it == config->end() || it->is_null()) return fallback;
    if (!it->is_boolean())
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", name, ": expected a boolean"));
    return it->get<bool>();
  };
  auto add_bos = flag("add_bos_token", true);
  if (!add_bos.ok()) return add_bos.status();
  auto add_eos = flag("add_eos_token", false);
  if (!add_eos.ok()) return add_eos.status();
  special_prefix_.clear();
  special_suffix_.clear();
  for (auto [add, field, out] :
       {std::tuple{*add_bos, "bos_token", &special_prefix_}, std::tuple{*add_eos, "eos_token", &special_suffix_}}) {
    if (!add) continue;
    const std::string content = TokenContent(*config, field);
    auto id = content.empty() ? std::nullopt : TokenToId(content);
    if (!id) {
      return absl::InvalidArgumentError(
          absl::StrCat(config_path, ": ", field, " \"", content, "\" is missing or not in the vocabulary"));
    }
    out->push_back(*id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  auto cps = DecodeUtf8(text);
  if (!cps.ok()) return cps.status();
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = special_prefix_;
  std::vector<std::u32string> pieces;
  for (TextSegment& seg : added_.Split(*cps)) {
    if (seg.token_id >= 0) {
      ids.push_back(seg.token_id);
      continue;
    }
    pieces.clear();
    pieces.push_back(std::move(seg.text));
    if (pre_tokenizer_) pre_tokenizer_->Apply(pieces);
    for (const std::u32string& piece : pieces) {
      if (absl::Status s = model_->Tokenize(piece, ids); !s.ok()) return s;
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), special_suffix_.begin(), special_suffix_.end());
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* added = added_.FindById(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    auto token = model_->IdToToken(id);
    if (!token)
      return absl::InvalidArgumentError(
          absl::StrCat("Decode: token id ", id, " is not in the vocabulary of ", source_));
    tokens.emplace_back(*token);
  }
  return DecodeTokens(decoder_.get(), std::move(tokens));
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_.FindByContent(token)) return added->id;
  return model_->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_.FindById(id)) return added->content;
  if (auto t = model_->IdToToken(id)) return std::string(*t);
  return std::nullopt;
}

int32_t Tokenizer::IdLimit() const {
  int32_t limit = model_->IdLimit();
  for (const AddedToken& t : added_.all()) limit = std::max(limit, t.id + 1);
  return limit;
}

}  // namespace argen::tokenizer
