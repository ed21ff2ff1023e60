// T5's tokenizer for LlamaGen's captions: the SentencePiece model spiece.model
// of the T5 directory (libsentencepiece), then </s> (eos), truncated to the
// model's caption slots with the </s> kept: transformers' T5 tokenizer with
// add_special_tokens, truncation and max_length 120 (language/t5.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/families/llamagen/sentencepiece_model.h"

namespace argen::llamagen {

class T5Tokenizer {
 public:
  // `spiece_path`: the SentencePiece model. Errors name the file.
  static absl::StatusOr<std::unique_ptr<T5Tokenizer>> Open(const std::string& spiece_path, int32_t eos_id,
                                                           int32_t max_length);
  ~T5Tokenizer();

  // The caption's ids ending in eos, at most max_length of them. Thread-safe.
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const;
  int32_t vocab_size() const;

 private:
  T5Tokenizer() = default;
  std::unique_ptr<SentencePieceModel> sp_;
  int32_t eos_id_ = 1;
  int32_t max_length_ = 120;
};

}  // namespace argen::llamagen
