// Added tokens (tokenizer.json "added_tokens"): matched in the raw text before
// pre-tokenization, leftmost-longest, with HF's single_word / lstrip / rstrip
// rules; as HF, tokens with normalized=false are extracted first, then those
// with normalized=true from the remaining text (no normalizer is supported, so
// "normalized" text equals the raw text).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A cut of the text: either plain text to pre-tokenize or one added token.
struct TextSegment {
  std::u32string text;
  int32_t token_id = -1;  // >= 0: an added token
};

class AddedTokens {
 public:
  static absl::StatusOr<AddedTokens> Parse(const nlohmann::json& list, const std::string& where);

  std::vector<TextSegment> Split(const std::u32string& text) const;
  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& all() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::u32string> patterns_;  // content as code points, parallel to tokens_
  absl::flat_hash_map<int32_t, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_content_;
  // Candidates per first code point; [0]: normalized=false tokens, [1]: normalized=true.
  absl::flat_hash_map<char32_t, std::vector<size_t>> by_first_char_[2];
  void SplitPass(int pass, std::u32string text, std::vector<TextSegment>& out) const;
};

}  // namespace argen::tokenizer
