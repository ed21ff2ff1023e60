// Tokenizer models (tokenizer.json "model"): map one pre-tokenized piece to ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one piece (code points, after pre-tokenization).
  virtual absl::Status Tokenize(std::u32string_view piece, std::vector<int32_t>& ids) const = 0;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string_view> IdToToken(int32_t id) const;
  int32_t IdLimit() const { return static_cast<int32_t>(id_to_token_.size()); }  // max id + 1

 protected:
  // Fills the vocabulary from a {"token": id} object; errors name `where`.vocab.
  absl::Status LoadVocab(const nlohmann::json& model, const std::string& where);

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // "" for ids without a token
};

// From the "model" object (types BPE and WordLevel). Errors name `where` and the field.
absl::StatusOr<std::unique_ptr<Model>> ParseModel(const nlohmann::json& config, const std::string& where);

}  // namespace argen::tokenizer
