// A text tokenizer loaded from a Hugging Face tokenizer.json, reproducing HF
// tokenizers' Encode/Decode for the configurations Janus-Pro (DeepSeek-LLM
// byte-level BPE) and simple WordLevel files use: added/special tokens,
// pre-tokenizers (Sequence, Split, Digits, ByteLevel, Whitespace,
// WhitespaceSplit), models BPE and WordLevel, ByteLevel/Fuse decoders and
// single-sequence post-processors. Immutable after loading; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tokenizer/added_tokens.h"

namespace argen::tokenizer {

class Model;
class PreTokenizer;
class Decoder;

class Tokenizer {
 public:
  // Reads tokenizer.json. If a tokenizer_config.json sits next to it and names
  // a Llama tokenizer class, its bos/eos settings replace the post-processor
  // as transformers' LlamaTokenizerFast does. Errors name the file and field.
  static absl::StatusOr<Tokenizer> LoadFromFile(const std::string& path);
  // `source` names the data in error messages (e.g. a file path).
  static absl::StatusOr<Tokenizer> LoadFromJson(std::string_view json, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text must be valid UTF-8. add_special_tokens applies the post-processor (e.g. BOS).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens = true) const;
  // Error for an id no token has.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Added tokens first, then the model vocabulary (as HF's token_to_id).
  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  int32_t IdLimit() const;  // largest id + 1
  const AddedTokens& added_tokens() const { return added_; }
  const std::string& source() const { return source_; }

 private:
  Tokenizer();
  static absl::StatusOr<Tokenizer> LoadFromJsonChecked(std::string_view json, const std::string& source);
  absl::Status ApplyTokenizerConfig(const std::string& config_path);

  std::string source_;
  AddedTokens added_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<int32_t> special_prefix_, special_suffix_;
};

}  // namespace argen::tokenizer
