// Decoders (tokenizer.json "decoder"): turn token strings back into text.
// Supported: ByteLevel, Fuse, Sequence; null joins tokens with spaces as HF does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings (HF's decode_chain); the caller concatenates them.
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
};

absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& config, const std::string& where);

// The full decode: the decoder's chain then concatenation, or a space join without a decoder.
std::string DecodeTokens(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace argen::tokenizer
