#include "engine/tokenizer/word_level_model.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {

absl::StatusOr<std::unique_ptr<Model>> WordLevelModel::Parse(const nlohmann::json& config, const std::string& where) {
  auto model = std::unique_ptr<WordLevelModel>(new WordLevelModel());
  if (absl::Status s = model->LoadVocab(config, where); !s.ok()) return s;
  auto unk = OptionalString(config, "unk_token", where);
  if (!unk.ok()) return unk.status();
  model->unk_token_ = unk->empty() ? "<unk>" : *unk;  // HF's default
  model->unk_id_ = model->TokenToId(model->unk_token_);
  return model;
}

absl::Status WordLevelModel::Tokenize(std::u32string_view piece, std::vector<int32_t>& ids) const {
  const std::string word = EncodeUtf8(piece);
  if (auto id = TokenToId(word)) {
    ids.push_back(*id);
  } else if (unk_id_) {
    ids.push_back(*unk_id_);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("WordLevel: \"", word, "\" is not in the vocab and unk token \"", unk_token_, "\" is missing"));
  }
  return absl::OkStatus();
}

}  // namespace argen::tokenizer
