// Post-processors (tokenizer.json "post_processor") for a single sequence:
// the special tokens wrapped around the encoded text (e.g. BOS).
// Supported: TemplateProcessing, ByteLevel (ids unchanged), RobertaProcessing,
// BertProcessing, Sequence; null adds nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

// Ids to put before and after the sequence when special tokens are requested.
struct SpecialWrap {
  std::vector<int32_t> prefix, suffix;
};

absl::StatusOr<SpecialWrap> ParsePostProcessor(const nlohmann::json& config, const std::string& where);

}  // namespace argen::tokenizer
