#include "engine/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/unicode_categories.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

// A cover of a piece by consecutive spans, each flagged as a delimiter match or not.
struct Span {
  size_t begin, end;
  bool is_match;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<SplitBehavior> ParseBehavior(const nlohmann::json& config, const std::string& where) {
  auto name = RequiredString(config, "behavior", where);
  if (!name.ok()) return name.status();
  if (*name == "Removed") return SplitBehavior::kRemoved;
  if (*name == "Isolated") return SplitBehavior::kIsolated;
  if (*name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (*name == "Contiguous") return SplitBehavior::kContiguous;
  return FieldError(where, "behavior", absl::StrCat("unknown value \"", *name, "\""));
}

// Spans from delimiter matches (sorted, non-overlapping), as HF's Pattern::find_matches.
std::vector<Span> CoverWithMatches(size_t length, const std::vector<std::pair<size_t, size_t>>& matches) {
  std::vector<Span> spans;
  if (length == 0) return {{0, 0, false}};
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != length) spans.push_back({prev, length, false});
  return spans;
}

// Merges spans by behavior (HF's NormalizedString::split) and appends the non-empty pieces.
void EmitPieces(const std::u32string& piece, std::vector<Span> spans, SplitBehavior behavior,
                std::vector<std::u32string>& out) {
  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      merged = std::move(spans);
      break;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) merged.push_back(s);
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (const Span& s : merged) {
    if (s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

// Every character satisfying a predicate is one match (HF's Pattern for Fn(char) -> bool).
std::vector<std::pair<size_t, size_t>> CharMatches(const std::u32string& piece,
                                                   const std::function<bool(char32_t)>& pred) {
  std::vector<std::pair<size_t, size_t>> m;
  for (size_t i = 0; i < piece.size(); ++i) {
    if (pred(piece[i])) m.emplace_back(i, i + 1);
  }
  return m;
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void Apply(std::vector<std::u32string>& pieces) const override {
    for (const auto& s : steps_) s->Apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// Base for pre-tokenizers that split each piece independently.
class PieceSplitter : public PreTokenizer {
 public:
  void Apply(std::vector<std::u32string>& pieces) const override {
    std::vector<std::u32string> out;
    out.reserve(pieces.size() * 2);
    for (const std::u32string& p : pieces) SplitPiece(p, out);
    pieces = std::move(out);
  }

 protected:
  virtual void SplitPiece(const std::u32string& piece, std::vector<std::u32string>& out) const = 0;
};

class RegexSplit final : public PieceSplitter {
 public:
  RegexSplit(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

 protected:
  void SplitPiece(const std::u32string& piece, std::vector<std::u32string>& out) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    for (const Regex::Match& m : regex_.FindAll(piece)) matches.emplace_back(m.begin, m.end);
    std::vector<Span> spans = CoverWithMatches(piece.size(), matches);
    if (invert_) {
      for (Span& s : spans) s.is_match = !s.is_match;
    }
    EmitPieces(piece, std::move(spans), behavior_, out);
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class StringSplit final : public PieceSplitter {
 public:
  StringSplit(std::u32string delimiter, SplitBehavior behavior, bool invert)
      : delimiter_(std::move(delimiter)), behavior_(behavior), invert_(invert) {}

 protected:
  void SplitPiece(const std::u32string& piece, std::vector<std::u32string>& out) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    if (!delimiter_.empty()) {
      for (size_t at = piece.find(delimiter_); at != std::u32string::npos;
           at = piece.find(delimiter_, at + delimiter_.size())) {
        matches.emplace_back(at, at + delimiter_.size());
      }
    }
    std::vector<Span> spans = CoverWithMatches(piece.size(), matches);
    if (invert_) {
      for (Span& s : spans) s.is_match = !s.is_match;
    }
    EmitPieces(piece, std::move(spans), behavior_, out);
  }

 private:
  std::u32string delimiter_;
  SplitBehavior behavior_;
  bool invert_;
};

class PredicateSplit final : public PieceSplitter {
 public:
  PredicateSplit(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}

 protected:
  void SplitPiece(const std::u32string& piece, std::vector<std::u32string>& out) const override {
    EmitPieces(piece, CoverWithMatches(piece.size(), CharMatches(piece, pred_)), behavior_, out);
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

// Optionally prefixes a space, optionally splits with GPT-2's pattern, then
// maps every UTF-8 byte to its printable stand-in.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<PreTokenizer> splitter)
      : add_prefix_space_(add_prefix_space), splitter_(std::move(splitter)) {}

  void Apply(std::vector<std::u32string>& pieces) const override {
    if (add_prefix_space_) {
      for (std::u32string& p : pieces) {
        if (p.empty() || p[0] != U' ') p.insert(p.begin(), U' ');
      }
    }
    if (splitter_) splitter_->Apply(pieces);
    std::string bytes;
    for (std::u32string& p : pieces) {
      bytes.clear();
      for (char32_t c : p) AppendUtf8(c, bytes);
      p.clear();
      for (char b : bytes) p.push_back(ByteToChar(static_cast<uint8_t>(b)));
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<PreTokenizer> splitter_;
};

// HF's Whitespace: the pieces matched by \w+|[^\w\s]+ in the Rust regex
// crate's Unicode classes (not Oniguruma's), i.e. maximal runs of word
// characters and maximal runs of other non-space characters.
class WhitespacePreTokenizer final : public PieceSplitter {
 protected:
  void SplitPiece(const std::u32string& piece, std::vector<std::u32string>& out) const override {
    enum Kind { kSpace, kWord, kOther };
    const auto kind = [](char32_t c) { return IsRustWordChar(c) ? kWord : IsWhiteSpace(c) ? kSpace : kOther; };
    size_t i = 0;
    while (i < piece.size()) {
      const Kind k = kind(piece[i]);
      size_t j = i + 1;
      while (j < piece.size() && kind(piece[j]) == k) ++j;
      if (k != kSpace) out.push_back(piece.substr(i, j - i));
      i = j;
    }
  }
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParseSplit(const nlohmann::json& config, const std::string& where) {
  auto behavior = ParseBehavior(config, where);
  if (!behavior.ok()) return behavior.status();
  auto invert = OptionalBool(config, "invert", false, where);
  if (!invert.ok()) return invert.status();
  auto pattern = config.find("pattern");
  if (pattern == config.end() || !pattern->is_object()) return FieldError(where, "pattern", "missing or not an object");
  if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
    auto regex = Regex::Compile(r->get<std::string>());
    if (!regex.ok()) return FieldError(where, "pattern.Regex", regex.status().message());
    return std::make_unique<RegexSplit>(std::move(*regex), *behavior, *invert);
  }
  if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
    auto cps = DecodeUtf8(s->get<std::string>());
    if (!cps.ok()) return FieldError(where, "pattern.String", cps.status().message());
    return std::make_unique<StringSplit>(std::move(*cps), *behavior, *invert);
  }
  return FieldError(where, "pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& config,
                                                                const std::string& where) {
  if (config.is_null()) return nullptr;
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object"));
  auto type = RequiredString(config, "type", where);
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    auto list = config.find("pretokenizers");
    if (list == config.end() || !list->is_array()) return FieldError(where, "pretokenizers", "missing or not an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = ParsePreTokenizer((*list)[i], absl::StrCat(where, ".pretokenizers[", i, "]"));
      if (!step.ok()) return step.status();
      if (*step) steps.push_back(std::move(*step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (*type == "Split") return ParseSplit(config, where);
  if (*type == "Digits") {
    auto individual = OptionalBool(config, "individual_digits", false, where);
    if (!individual.ok()) return individual.status();
    return std::make_unique<PredicateSplit>(IsNumeric,
                                            *individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (*type == "ByteLevel") {
    auto prefix = OptionalBool(config, "add_prefix_space", true, where);
    if (!prefix.ok()) return prefix.status();
    auto use_regex = OptionalBool(config, "use_regex", true, where);
    if (!use_regex.ok()) return use_regex.status();
    std::unique_ptr<PreTokenizer> splitter;
    if (*use_regex) {
      auto regex = Regex::Compile(kGpt2SplitPattern);
      if (!regex.ok()) return regex.status();
      splitter = std::make_unique<RegexSplit>(std::move(*regex), SplitBehavior::kIsolated, false);
    }
    return std::make_unique<ByteLevelPreTokenizer>(*prefix, std::move(splitter));
  }
  if (*type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (*type == "WhitespaceSplit") {
    return std::make_unique<PredicateSplit>(IsWhiteSpace, SplitBehavior::kRemoved);
  }
  return FieldError(where, "type", absl::StrCat("pre-tokenizer \"", *type, "\" is not supported"));
}

}  // namespace argen::tokenizer
