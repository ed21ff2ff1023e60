// WordLevel model: each pre-tokenized piece is one vocabulary entry, or unk.
#pragma once

#include <memory>
#include <string>

#include "engine/tokenizer/model.h"

namespace argen::tokenizer {

class WordLevelModel final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Parse(const nlohmann::json& config, const std::string& where);
  absl::Status Tokenize(std::u32string_view piece, std::vector<int32_t>& ids) const override;

 private:
  std::string unk_token_;
  std::optional<int32_t> unk_id_;
};

}  // namespace argen::tokenizer
