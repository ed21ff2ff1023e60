#include "engine/tokenizer/decoder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

// Maps each token's characters back to bytes (a token with an unmapped
// character keeps its own UTF-8), then reads all bytes as lossy UTF-8.
class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    std::string token_bytes;
    for (const std::string& t : tokens) {
      auto cps = DecodeUtf8(t);
      bool mapped = cps.ok();
      token_bytes.clear();
      if (mapped) {
        for (char32_t c : *cps) {
          const int b = CharToByte(c);
          if (b < 0) {
            mapped = false;
            break;
          }
          token_bytes.push_back(static_cast<char>(b));
        }
      }
      bytes += mapped ? token_bytes : t;
    }
    tokens.assign(1, Utf8Lossy(bytes));
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override { tokens.assign(1, absl::StrJoin(tokens, "")); }
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& config, const std::string& where) {
  if (config.is_null()) return nullptr;
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object"));
  auto type = RequiredString(config, "type", where);
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (*type == "Fuse") return std::make_unique<FuseDecoder>();
  if (*type == "Sequence") {
    auto list = config.find("decoders");
    if (list == config.end() || !list->is_array()) return FieldError(where, "decoders", "missing or not an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = ParseDecoder((*list)[i], absl::StrCat(where, ".decoders[", i, "]"));
      if (!step.ok()) return step.status();
      if (*step) steps.push_back(std::move(*step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  return FieldError(where, "type", absl::StrCat("decoder \"", *type, "\" is not supported"));
}

std::string DecodeTokens(const Decoder* decoder, std::vector<std::string> tokens) {
  if (decoder == nullptr) return absl::StrJoin(tokens, " ");
  decoder->DecodeChain(tokens);
  return absl::StrJoin(tokens, "");
}

}  // namespace argen::tokenizer
