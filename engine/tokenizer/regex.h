// A small regular-expression engine over code points for tokenizer.json
// patterns (Split pre-tokenizers, ByteLevel's GPT-2 pattern). It follows
// Oniguruma's Ruby syntax as HF tokenizers uses it: leftmost-first
// (Perl-style) alternation, Unicode \s \d \w \p{..}, '$' matching at the end
// of the text or before '\n', '.' not matching '\n', lookahead (?= ) (?! ).
// Matching is a backtracking VM with a visited set over (instruction,
// position), so every search is linear in pattern size x text length and a
// pathological pattern cannot hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::tokenizer {

struct RegexProgram;  // compiled form, defined in regex.cc

class Regex {
 public:
  // Error names the unsupported or malformed construct and its position.
  static absl::StatusOr<Regex> Compile(std::string_view pattern_utf8);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  struct Match {
    size_t begin = 0, end = 0;  // code point offsets
  };
  // All non-overlapping matches, leftmost-first, like Oniguruma's find_iter;
  // after an empty match the search resumes one code point further.
  std::vector<Match> FindAll(std::u32string_view text) const;

 private:
  explicit Regex(std::shared_ptr<const RegexProgram> program);
  std::shared_ptr<const RegexProgram> program_;
};

}  // namespace argen::tokenizer
