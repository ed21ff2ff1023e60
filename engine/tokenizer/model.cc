#include "engine/tokenizer/model.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/word_level_model.h"

namespace argen::tokenizer {

// Vocabularies are dense in practice; ids beyond this are rejected as malformed.
constexpr int64_t kMaxTokenId = 1 << 24;

std::optional<int32_t> Model::TokenToId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> Model::IdToToken(int32_t id) const {
  if (id < 0 || id >= IdLimit() || id_to_token_[id].empty()) return std::nullopt;
  return id_to_token_[id];
}

absl::Status Model::LoadVocab(const nlohmann::json& model, const std::string& where) {
  auto vocab = model.find("vocab");
  if (vocab == model.end() || vocab->is_null()) return FieldError(where, "vocab", "missing");
  if (!vocab->is_object()) return FieldError(where, "vocab", "expected an object {token: id}");
  if (vocab->empty()) return FieldError(where, "vocab", "empty");
  vocab_.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return FieldError(where, "vocab", absl::StrCat("id of token \"", it.key(), "\" is not an integer"));
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokenId) {
      return FieldError(where, "vocab", absl::StrCat("id ", id, " of token \"", it.key(), "\" out of range"));
    }
    if (it.key().empty()) return FieldError(where, "vocab", "empty token string");
    vocab_[it.key()] = static_cast<int32_t>(id);
    if (id >= static_cast<int64_t>(id_to_token_.size())) id_to_token_.resize(id + 1);
    id_to_token_[id] = it.key();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> ParseModel(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing or not an object"));
  std::string type;
  if (auto t = config.find("type"); t != config.end() && !t->is_null()) {
    if (!t->is_string()) return FieldError(where, "type", "expected a string");
    type = t->get<std::string>();
  } else if (config.contains("merges")) {
    type = "BPE";  // older files omit the type
  } else {
    return FieldError(where, "type", "missing");
  }
  if (type == "BPE") return BpeModel::Parse(config, where);
  if (type == "WordLevel") return WordLevelModel::Parse(config, where);
  return FieldError(where, "type", absl::StrCat("model \"", type, "\" is not supported (BPE, WordLevel)"));
}

}  // namespace argen::tokenizer
