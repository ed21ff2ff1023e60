#include "engine/tokenizer/regex.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "oniguruma.h"

namespace argen::tokenizer {

struct RegexProgram {
  regex_t* regex = nullptr;
  ~RegexProgram() {
    if (regex != nullptr) onig_free(regex);
  }
};

namespace {

void InitializeOniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

Regex::Regex(std::shared_ptr<const RegexProgram> program) : program_(std::move(program)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  InitializeOniguruma();
  auto program = std::make_shared<RegexProgram>();
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  // The onig crate's Regex::new: no options, the default (Oniguruma) syntax.
  const int rc = onig_new(&program->regex, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                          ONIG_SYNTAX_ONIGURUMA, &info);
  if (rc != ONIG_NORMAL) {
    program->regex = nullptr;  // onig_new frees it on failure
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return absl::InvalidArgumentError(
        absl::StrCat("regex \"", std::string(pattern), "\": ", reinterpret_cast<const char*>(message)));
  }
  return Regex(std::move(program));
}

std::vector<Regex::Match> Regex::FindAll(std::u32string_view text) const {
  // UTF-8 for Oniguruma, with each byte offset's code point index.
  std::string utf8;
  utf8.reserve(text.size());
  std::vector<size_t> cp_at;  // byte offset -> code point offset (boundaries only)
  cp_at.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t before = utf8.size();
    AppendUtf8(text[i], utf8);
    cp_at.resize(utf8.size(), i);
    cp_at[before] = i;
  }
  cp_at.push_back(text.size());
  const auto* str = reinterpret_cast<const OnigUChar*>(utf8.data());
  const auto* end = str + utf8.size();

  std::vector<Match> matches;
  OnigRegion* region = onig_region_new();
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= utf8.size()) {
    onig_region_clear(region);
    const int r = onig_search(program_->regex, str, end, str + start, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH, or a search error (retry limit)
    const size_t b = static_cast<size_t>(region->beg[0]);
    const size_t e = static_cast<size_t>(region->end[0]);
    if (b == e && have_last && last_end == e) {
      // No empty match right after the previous one: one code point on.
      if (start >= utf8.size()) break;
      const size_t cp = cp_at[start];
      size_t next = start + 1;
      while (next < utf8.size() && cp_at[next] == cp) ++next;
      start = next;
      continue;
    }
    start = e;
    last_end = e;
    have_last = true;
    matches.push_back({cp_at[b], cp_at[e]});
  }
  onig_region_free(region, 1);
  return matches;
}

}  // namespace argen::tokenizer
