#include "engine/tokenizer/added_tokens.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/unicode_categories.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

bool IsWordBoundaryChar(char32_t c) { return IsAlphanumeric(c) || c == U'_'; }

}  // namespace

absl::StatusOr<AddedTokens> AddedTokens::Parse(const nlohmann::json& list, const std::string& where) {
  AddedTokens out;
  if (list.is_null()) return out;
  if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an array"));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    const nlohmann::json& t = list[i];
    if (!t.is_object()) return absl::InvalidArgumentError(absl::StrCat(at, ": expected an object"));
    AddedToken token;
    auto id = t.find("id");
    if (id == t.end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() >= (1 << 24)) {
      return FieldError(at, "id", "missing or not a valid id");
    }
    token.id = static_cast<int32_t>(id->get<int64_t>());
    auto content = RequiredString(t, "content", at);
    if (!content.ok()) return content.status();
    if (content->empty()) return FieldError(at, "content", "empty");
    token.content = *content;
    auto cps = DecodeUtf8(token.content);
    if (!cps.ok()) return FieldError(at, "content", cps.status().message());
    for (auto [field, value] : {std::pair{"single_word", &token.single_word}, std::pair{"lstrip", &token.lstrip},
                                std::pair{"rstrip", &token.rstrip}, std::pair{"normalized", &token.normalized},
                                std::pair{"special", &token.special}}) {
      auto v = OptionalBool(t, field, false, at);
      if (!v.ok()) return v.status();
      *value = *v;
    }
    const size_t index = out.tokens_.size();
    out.by_id_[token.id] = index;
    out.by_content_[token.content] = index;
    out.by_first_char_[token.normalized ? 1 : 0][(*cps)[0]].push_back(index);
    out.patterns_.push_back(std::move(*cps));
    out.tokens_.push_back(std::move(token));
  }
  return out;
}

const AddedToken* AddedTokens::FindById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::FindByContent(std::string_view content) const {
  auto it = by_content_.find(absl::string_view(content.data(), content.size()));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

std::vector<TextSegment> AddedTokens::Split(const std::u32string& text) const {
  std::vector<TextSegment> first, out;
  SplitPass(0, text, first);
  for (TextSegment& seg : first) {
    if (seg.token_id >= 0) {
      out.push_back(std::move(seg));
    } else {
      SplitPass(1, std::move(seg.text), out);
    }
  }
  return out;
}

void AddedTokens::SplitPass(int pass, std::u32string text, std::vector<TextSegment>& out) const {
  const auto& by_first_char = by_first_char_[pass];
  if (by_first_char.empty()) {
    if (!text.empty()) out.push_back({std::move(text), -1});
    return;
  }
  size_t consumed = 0;  // text before this is already emitted
  size_t pos = 0;       // where the leftmost-longest search resumes
  while (pos < text.size()) {
    // Leftmost start with any match, then the longest pattern there (Aho-Corasick LeftmostLongest).
    size_t start = pos, best = SIZE_MAX, best_len = 0;
    for (; start < text.size() && best == SIZE_MAX; ++start) {
      auto cand = by_first_char.find(text[start]);
      if (cand == by_first_char.end()) continue;
      for (size_t k : cand->second) {
        const std::u32string& p = patterns_[k];
        if (p.size() > best_len && text.compare(start, p.size(), p) == 0) best = k, best_len = p.size();
      }
      if (best != SIZE_MAX) break;
    }
    if (best == SIZE_MAX) break;
    size_t stop = start + best_len;
    pos = stop;
    const AddedToken& token = tokens_[best];
    if (token.single_word) {
      const bool left_ok = start == 0 || !IsWordBoundaryChar(text[start - 1]);
      const bool right_ok = stop == text.size() || !IsWordBoundaryChar(text[stop]);
      if (!left_ok || !right_ok) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > consumed && IsWhiteSpace(text[s - 1])) --s;
      start = s;
    }
    if (token.rstrip) {
      while (stop < text.size() && IsWhiteSpace(text[stop])) ++stop;
    }
    if (consumed < start) out.push_back({text.substr(consumed, start - consumed), -1});
    out.push_back({{}, token.id});
    consumed = stop;
    pos = stop;
  }
  if (consumed < text.size()) out.push_back({text.substr(consumed), -1});
}

}  // namespace argen::tokenizer
