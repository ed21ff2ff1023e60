// Pre-tokenizers from tokenizer.json: they cut text into pieces the model
// tokenizes independently (Sequence, Split, Digits, ByteLevel, Whitespace,
// WhitespaceSplit), with HF tokenizers' semantics.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces pieces by their sub-pieces; empty pieces are dropped.
  virtual void Apply(std::vector<std::u32string>& pieces) const = 0;
};

// From the "pre_tokenizer" object; null gives nullptr. Errors name `where`
// (e.g. "tokenizer.json pre_tokenizer") and the field at fault.
absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& config, const std::string& where);

}  // namespace argen::tokenizer
