#include "engine/tokenizer/post_processor.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"

namespace argen::tokenizer {
namespace {

absl::StatusOr<SpecialWrap> ParseTemplate(const nlohmann::json& config, const std::string& where) {
  auto single = config.find("single");
  if (single == config.end() || !single->is_array()) return FieldError(where, "single", "missing or not an array");
  auto specials = config.find("special_tokens");
  SpecialWrap wrap;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const nlohmann::json& piece = (*single)[i];
    const std::string at = absl::StrCat("single[", i, "]");
    if (piece.contains("Sequence")) {
      if (seen_sequence) return FieldError(where, at, "more than one $A in the single template");
      seen_sequence = true;
      continue;
    }
    // Member(), never a const operator[] on a key that may be missing (that
    // is an assertion, or undefined behaviour without one).
    const nlohmann::json* special = Member(piece, "SpecialToken");
    const nlohmann::json* id = special != nullptr ? Member(*special, "id") : nullptr;
    if (id == nullptr || !id->is_string()) {
      return FieldError(where, at, "expected {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}");
    }
    const std::string name = id->get<std::string>();
    const nlohmann::json* entry = specials != config.end() ? Member(*specials, name) : nullptr;
    if (entry == nullptr) {
      return FieldError(where, "special_tokens", absl::StrCat("no entry for \"", name, "\""));
    }
    const nlohmann::json* ids_field = Member(*entry, "ids");
    if (ids_field == nullptr || !ids_field->is_array()) {
      return FieldError(where, absl::StrCat("special_tokens.", name, ".ids"), "expected an array");
    }
    const nlohmann::json& ids = *ids_field;
    for (const nlohmann::json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return FieldError(where, absl::StrCat("special_tokens.", name, ".ids"), "expected non-negative integers");
      }
      (seen_sequence ? wrap.suffix : wrap.prefix).push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (!seen_sequence) return FieldError(where, "single", "template has no $A sequence");
  return wrap;
}

// "cls": ["<s>", 0] style entries of RobertaProcessing / BertProcessing.
absl::StatusOr<int32_t> PairId(const nlohmann::json& config, const char* field, const std::string& where) {
  auto it = config.find(field);
  if (it == config.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    return FieldError(where, field, "expected [token, id]");
  }
  return static_cast<int32_t>((*it)[1].get<int64_t>());
}

}  // namespace

absl::StatusOr<SpecialWrap> ParsePostProcessor(const nlohmann::json& config, const std::string& where) {
  if (config.is_null()) return SpecialWrap{};
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object"));
  auto type = RequiredString(config, "type", where);
  if (!type.ok()) return type.status();
  if (*type == "TemplateProcessing") return ParseTemplate(config, where);
  if (*type == "ByteLevel") return SpecialWrap{};
  if (*type == "RobertaProcessing" || *type == "BertProcessing") {
    auto cls = PairId(config, "cls", where);
    if (!cls.ok()) return cls.status();
    auto sep = PairId(config, "sep", where);
    if (!sep.ok()) return sep.status();
    return SpecialWrap{{*cls}, {*sep}};
  }
  if (*type == "Sequence") {
    auto list = config.find("processors");
    if (list == config.end() || !list->is_array()) return FieldError(where, "processors", "missing or not an array");
    SpecialWrap wrap;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = ParsePostProcessor((*list)[i], absl::StrCat(where, ".processors[", i, "]"));
      if (!step.ok()) return step.status();
      // Each step wraps the result of the previous ones.
      step->prefix.insert(step->prefix.end(), wrap.prefix.begin(), wrap.prefix.end());
      wrap.suffix.insert(wrap.suffix.end(), step->suffix.begin(), step->suffix.end());
      wrap.prefix = std::move(step->prefix);
    }
    return wrap;
  }
  return FieldError(where, "type", absl::StrCat("post-processor \"", *type, "\" is not supported"));
}

}  // namespace argen::tokenizer
