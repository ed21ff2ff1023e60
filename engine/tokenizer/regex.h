// tokenizer.json patterns (Split pre-tokenizers, ByteLevel's GPT-2 pattern)
// on Oniguruma, the engine HF tokenizers itself uses (through the onig
// crate): the same syntax (ONIG_SYNTAX_ONIGURUMA, UTF-8) and the same
// iteration over matches, so matching is HF's by construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::tokenizer {

struct RegexProgram;  // the compiled Oniguruma regex, defined in regex.cc

class Regex {
 public:
  // Error names the pattern and Oniguruma's reason.
  static absl::StatusOr<Regex> Compile(std::string_view pattern_utf8);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  struct Match {
    size_t begin = 0, end = 0;  // code point offsets
  };
  // All non-overlapping matches, leftmost-first, as the onig crate's
  // find_iter: an empty match right where the previous match ended is
  // skipped by moving one code point on. Thread-safe. A search Oniguruma
  // gives up on (its backtracking retry limit) ends the list there.
  std::vector<Match> FindAll(std::u32string_view text) const;

 private:
  explicit Regex(std::shared_ptr<const RegexProgram> program);
  std::shared_ptr<const RegexProgram> program_;
};

}  // namespace argen::tokenizer
