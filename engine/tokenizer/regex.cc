#include "engine/tokenizer/regex.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode_categories.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {

// ---------------------------------------------------------------- program

// One predicate inside a character class: \p{..}, \s, \d, \w or their negations.
struct ClassProperty {
  enum class Kind { kCategories, kSpace, kDigit, kWord } kind = Kind::kCategories;
  CategoryMask mask = 0;
  bool negated = false;

  bool Matches(char32_t c) const {
    bool in = false;
    switch (kind) {
      case Kind::kCategories: in = InCategories(c, mask); break;
      case Kind::kSpace: in = IsWhiteSpace(c); break;
      case Kind::kDigit: in = IsDecimalDigit(c); break;
      case Kind::kWord: in = IsWordChar(c); break;
    }
    return in != negated;
  }
};

struct CharClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  std::vector<ClassProperty> properties;
  std::vector<CharClass> nested;  // [a-z[0-9]]
  bool negated = false;

  bool Matches(char32_t c) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges) {
      if (c >= lo && c <= hi) { in = true; break; }
    }
    if (!in) {
      for (const ClassProperty& p : properties) {
        if (p.Matches(c)) { in = true; break; }
      }
    }
    if (!in) {
      for (const CharClass& n : nested) {
        if (n.Matches(c)) { in = true; break; }
      }
    }
    return in != negated;
  }
};

enum class Op : uint8_t {
  kChar, kClass, kAnyButNewline, kSplit, kJmp,
  kLineStart, kLineEnd, kTextStart, kTextEnd, kTextEndOrFinalNewline,
  kLookahead, kMatch,
};

struct Inst {
  Op op;
  bool negate = false;  // kLookahead: (?! )
  char32_t c = 0;       // kChar
  int32_t x = 0, y = 0; // kSplit: prefer x; kJmp: x; kClass: class index; kLookahead: program index
};

struct RegexProgram {
  std::vector<std::vector<Inst>> programs;  // [0] is the main program, others are lookaheads
  std::vector<CharClass> classes;
};

// ---------------------------------------------------------------- parser

namespace {

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  enum class Kind { kEmpty, kChar, kClass, kAny, kAssert, kConcat, kAlternate, kRepeat, kLookahead } kind;
  char32_t c = 0;
  int32_t class_index = 0;
  Op assert_op = Op::kLineStart;
  std::vector<NodePtr> children;
  int min = 0, max = 0;  // kRepeat; max -1: unbounded
  bool greedy = true;
  bool negate = false;   // kLookahead
};

NodePtr MakeNode(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

class Parser {
 public:
  Parser(std::u32string p, RegexProgram* out) : p_(std::move(p)), out_(out) {}

  absl::StatusOr<NodePtr> ParseAll() {
    auto node = ParseAlternation();
    if (!node.ok()) return node.status();
    if (i_ != p_.size()) return Error("unbalanced ')'");
    return node;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex pattern \"", EncodeUtf8(p_), "\": ", what, " at code point ", i_));
  }
  bool AtEnd() const { return i_ >= p_.size(); }
  char32_t Peek() const { return p_[i_]; }

  absl::StatusOr<NodePtr> ParseAlternation() {
    auto alt = MakeNode(Node::Kind::kAlternate);
    while (true) {
      auto seq = ParseConcat();
      if (!seq.ok()) return seq.status();
      alt->children.push_back(std::move(*seq));
      if (AtEnd() || Peek() != U'|') break;
      ++i_;
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  absl::StatusOr<NodePtr> ParseConcat() {
    auto seq = MakeNode(Node::Kind::kConcat);
    while (!AtEnd() && Peek() != U'|' && Peek() != U')') {
      auto atom = ParseAtom();
      if (!atom.ok()) return atom.status();
      auto quantified = ParseQuantifier(std::move(*atom));
      if (!quantified.ok()) return quantified.status();
      seq->children.push_back(std::move(*quantified));
    }
    return seq;
  }

  // Reads a decimal number; -1 when there is none.
  int ReadNumber() {
    int v = -1;
    while (!AtEnd() && Peek() >= U'0' && Peek() <= U'9') {
      v = (v < 0 ? 0 : v) * 10 + static_cast<int>(Peek() - U'0');
      if (v > 100000) v = 100000;
      ++i_;
    }
    return v;
  }

  absl::StatusOr<NodePtr> ParseQuantifier(NodePtr atom) {
    if (AtEnd()) return atom;
    int min, max;
    const char32_t q = Peek();
    if (q == U'?') {
      min = 0, max = 1, ++i_;
    } else if (q == U'*') {
      min = 0, max = -1, ++i_;
    } else if (q == U'+') {
      min = 1, max = -1, ++i_;
    } else if (q == U'{') {
      const size_t save = i_;
      ++i_;
      min = ReadNumber();
      max = min;
      if (!AtEnd() && Peek() == U',') {
        ++i_;
        max = ReadNumber();  // -1: unbounded
      }
      if (min < 0 || AtEnd() || Peek() != U'}') {  // not an interval: a literal '{'
        i_ = save;
        return atom;
      }
      ++i_;
      if (max >= 0 && max < min) return Error("interval {m,n} with n < m");
      if (min > 1000 || max > 1000) return Error("interval bound over 1000");
    } else {
      return atom;
    }
    if (atom->kind == Node::Kind::kAssert || atom->kind == Node::Kind::kLookahead) {
      return Error("quantifier after an assertion");
    }
    auto rep = MakeNode(Node::Kind::kRepeat);
    rep->min = min, rep->max = max;
    if (!AtEnd() && Peek() == U'?') {
      rep->greedy = false, ++i_;
    } else if (!AtEnd() && Peek() == U'+') {
      return Error("possessive quantifiers are not supported");
    }
    rep->children.push_back(std::move(atom));
    return rep;
  }

  absl::StatusOr<NodePtr> ParseAtom() {
    const char32_t c = Peek();
    ++i_;
    switch (c) {
      case U'(': return ParseGroup();
      case U'[': {
        auto cls = ParseClass();
        if (!cls.ok()) return cls.status();
        return ClassNode(std::move(*cls));
      }
      case U'.': return MakeNode(Node::Kind::kAny);
      case U'^': return AssertNode(Op::kLineStart);
      case U'$': return AssertNode(Op::kLineEnd);
      case U'\\': return ParseEscapeAtom();
      case U'*': case U'+': case U'?': return Error("quantifier without an operand");
      default: {
        auto n = MakeNode(Node::Kind::kChar);
        n->c = c;
        return n;
      }
    }
  }

  NodePtr AssertNode(Op op) {
    auto n = MakeNode(Node::Kind::kAssert);
    n->assert_op = op;
    return n;
  }

  NodePtr ClassNode(CharClass cls) {
    auto n = MakeNode(Node::Kind::kClass);
    n->class_index = static_cast<int32_t>(out_->classes.size());
    out_->classes.push_back(std::move(cls));
    return n;
  }

  absl::StatusOr<NodePtr> ParseGroup() {
    NodePtr look;
    if (!AtEnd() && Peek() == U'?') {
      ++i_;
      if (AtEnd()) return Error("unterminated group");
      const char32_t k = Peek();
      ++i_;
      if (k == U'=' || k == U'!') {
        look = MakeNode(Node::Kind::kLookahead);
        look->negate = (k == U'!');
      } else if (k != U':') {
        return Error("unsupported group syntax (only (?:, (?= and (?! are supported)");
      }
    }
    auto inner = ParseAlternation();
    if (!inner.ok()) return inner.status();
    if (AtEnd() || Peek() != U')') return Error("missing ')'");
    ++i_;
    if (look) {
      look->children.push_back(std::move(*inner));
      return look;
    }
    return inner;
  }

  // Escape that stands for a set (\s \d \w \p{..} and negations); false if not one.
  absl::StatusOr<bool> ParseSetEscape(char32_t e, ClassProperty* prop) {
    using K = ClassProperty::Kind;
    switch (e) {
      case U's': *prop = {K::kSpace, 0, false}; return true;
      case U'S': *prop = {K::kSpace, 0, true}; return true;
      case U'd': *prop = {K::kDigit, 0, false}; return true;
      case U'D': *prop = {K::kDigit, 0, true}; return true;
      case U'w': *prop = {K::kWord, 0, false}; return true;
      case U'W': *prop = {K::kWord, 0, true}; return true;
      case U'p': case U'P': {
        bool negated = (e == U'P');
        if (AtEnd() || Peek() != U'{') return Error("expected '{' after \\p");
        ++i_;
        if (!AtEnd() && Peek() == U'^') negated = !negated, ++i_;
        std::string name;
        while (!AtEnd() && Peek() != U'}') {
          if (Peek() > 0x7F) return Error("bad property name");
          name.push_back(static_cast<char>(Peek()));
          ++i_;
        }
        if (AtEnd()) return Error("unterminated \\p{");
        ++i_;
        const CategoryMask mask = CategoryMaskFromName(name.data(), static_cast<int>(name.size()));
        if (mask == 0) return Error(absl::StrCat("unsupported Unicode property \\p{", name, "}"));
        *prop = {K::kCategories, mask, negated};
        return true;
      }
      default: return false;
    }
  }

  // Escape that stands for one code point (\n, \x41, \u00e9, \., ...).
  absl::StatusOr<char32_t> ParseCharEscape(char32_t e) {
    switch (e) {
      case U'n': return U'\n';
      case U'r': return U'\r';
      case U't': return U'\t';
      case U'f': return U'\f';
      case U'v': return U'\v';
      case U'a': return U'\a';
      case U'e': return char32_t{0x1B};
      case U'0': return char32_t{0};
      case U'x': case U'u': {
        bool braced = !AtEnd() && Peek() == U'{';
        if (braced) ++i_;
        const int max_digits = braced ? 8 : (e == U'x' ? 2 : 4);
        char32_t v = 0;
        int digits = 0;
        while (!AtEnd() && digits < max_digits) {
          const char32_t h = Peek();
          int d;
          if (h >= U'0' && h <= U'9') d = h - U'0';
          else if (h >= U'a' && h <= U'f') d = h - U'a' + 10;
          else if (h >= U'A' && h <= U'F') d = h - U'A' + 10;
          else break;
          v = v * 16 + d, ++digits, ++i_;
        }
        if (digits == 0) return Error("bad hex escape");
        if (braced) {
          if (AtEnd() || Peek() != U'}') return Error("unterminated \\x{");
          ++i_;
        }
        if (v > 0x10FFFF) return Error("code point out of range");
        return v;
      }
      default:
        if ((e >= U'a' && e <= U'z') || (e >= U'A' && e <= U'Z') || (e >= U'1' && e <= U'9')) {
          return Error(absl::StrCat("unsupported escape \\", EncodeUtf8(std::u32string(1, e))));
        }
        return e;  // escaped punctuation or any other literal
    }
  }

  absl::StatusOr<NodePtr> ParseEscapeAtom() {
    if (AtEnd()) return Error("trailing backslash");
    const char32_t e = Peek();
    ++i_;
    switch (e) {
      case U'A': return AssertNode(Op::kTextStart);
      case U'z': return AssertNode(Op::kTextEnd);
      case U'Z': return AssertNode(Op::kTextEndOrFinalNewline);
      default: break;
    }
    ClassProperty prop;
    auto is_set = ParseSetEscape(e, &prop);
    if (!is_set.ok()) return is_set.status();
    if (*is_set) {
      CharClass cls;
      cls.properties.push_back(prop);
      return ClassNode(std::move(cls));
    }
    auto c = ParseCharEscape(e);
    if (!c.ok()) return c.status();
    auto n = MakeNode(Node::Kind::kChar);
    n->c = *c;
    return n;
  }

  // After '['; consumes through the closing ']'.
  absl::StatusOr<CharClass> ParseClass() {
    CharClass cls;
    if (!AtEnd() && Peek() == U'^') cls.negated = true, ++i_;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      char32_t c = Peek();
      if (c == U']' && !first) {
        ++i_;
        return cls;
      }
      first = false;
      if (c == U'[') {
        ++i_;
        auto nested = ParseClass();
        if (!nested.ok()) return nested.status();
        cls.nested.push_back(std::move(*nested));
        continue;
      }
      ++i_;
      char32_t lo = c;
      if (c == U'\\') {
        if (AtEnd()) return Error("trailing backslash");
        const char32_t e = Peek();
        ++i_;
        ClassProperty prop;
        auto is_set = ParseSetEscape(e, &prop);
        if (!is_set.ok()) return is_set.status();
        if (*is_set) {
          cls.properties.push_back(prop);
          continue;
        }
        auto ch = ParseCharEscape(e);
        if (!ch.ok()) return ch.status();
        lo = *ch;
      }
      char32_t hi = lo;
      if (i_ + 1 < p_.size() && Peek() == U'-' && p_[i_ + 1] != U']') {
        ++i_;
        char32_t h = Peek();
        ++i_;
        if (h == U'\\') {
          if (AtEnd()) return Error("trailing backslash");
          const char32_t e = Peek();
          ++i_;
          auto ch = ParseCharEscape(e);
          if (!ch.ok()) return ch.status();
          h = *ch;
        } else if (h == U'[') {
          return Error("bad range end");
        }
        if (h < lo) return Error("character range out of order");
        hi = h;
      }
      cls.ranges.emplace_back(lo, hi);
    }
  }

  std::u32string p_;
  size_t i_ = 0;
  RegexProgram* out_;
};

// ---------------------------------------------------------------- compiler

class Compiler {
 public:
  explicit Compiler(RegexProgram* out) : out_(out) {}

  // Compiles node into a new program; returns its index.
  int CompileProgram(const Node& node) {
    const int index = static_cast<int>(out_->programs.size());
    out_->programs.emplace_back();
    std::vector<Inst> code;
    Emit(node, code);
    code.push_back({Op::kMatch});
    out_->programs[index] = std::move(code);
    return index;
  }

 private:
  void Emit(const Node& n, std::vector<Inst>& code) {
    switch (n.kind) {
      case Node::Kind::kEmpty: break;
      case Node::Kind::kChar: code.push_back({Op::kChar, false, n.c}); break;
      case Node::Kind::kClass: code.push_back({Op::kClass, false, 0, n.class_index}); break;
      case Node::Kind::kAny: code.push_back({Op::kAnyButNewline}); break;
      case Node::Kind::kAssert: code.push_back({n.assert_op}); break;
      case Node::Kind::kConcat:
        for (const NodePtr& c : n.children) Emit(*c, code);
        break;
      case Node::Kind::kAlternate: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k < n.children.size(); ++k) {
          if (k + 1 < n.children.size()) {
            const size_t split = code.size();
            code.push_back({Op::kSplit});
            code[split].x = static_cast<int32_t>(code.size());
            Emit(*n.children[k], code);
            jumps.push_back(code.size());
            code.push_back({Op::kJmp});
            code[split].y = static_cast<int32_t>(code.size());
          } else {
            Emit(*n.children[k], code);
          }
        }
        for (size_t j : jumps) code[j].x = static_cast<int32_t>(code.size());
        break;
      }
      case Node::Kind::kRepeat: EmitRepeat(n, code); break;
      case Node::Kind::kLookahead: {
        const int sub = CompileProgram(*n.children[0]);
        Inst inst{Op::kLookahead, n.negate};
        inst.x = sub;
        code.push_back(inst);
        break;
      }
    }
  }

  // A split whose preferred branch depends on greediness; returns its index.
  size_t EmitSplit(bool greedy, std::vector<Inst>& code) {
    code.push_back({Op::kSplit});
    (void)greedy;
    return code.size() - 1;
  }
  static void PatchSplit(Inst& split, bool greedy, int32_t body, int32_t out) {
    split.x = greedy ? body : out;
    split.y = greedy ? out : body;
  }

  void EmitRepeat(const Node& n, std::vector<Inst>& code) {
    const Node& body = *n.children[0];
    for (int k = 0; k < n.min; ++k) Emit(body, code);
    if (n.max < 0) {
      const size_t loop = EmitSplit(n.greedy, code);
      Emit(body, code);
      Inst jmp{Op::kJmp};
      jmp.x = static_cast<int32_t>(loop);
      code.push_back(jmp);
      PatchSplit(code[loop], n.greedy, static_cast<int32_t>(loop + 1), static_cast<int32_t>(code.size()));
      return;
    }
    std::vector<size_t> splits;
    for (int k = n.min; k < n.max; ++k) {
      splits.push_back(EmitSplit(n.greedy, code));
      Emit(body, code);
    }
    const int32_t out = static_cast<int32_t>(code.size());
    for (size_t s : splits) PatchSplit(code[s], n.greedy, static_cast<int32_t>(s + 1), out);
  }

  RegexProgram* out_;
};

// ---------------------------------------------------------------- matcher

// Runs programs over one text. Bit pc * (n + 1) + pos of visited[p] marks a
// state already explored: without captures, a state that failed once fails
// again (whatever the start), so each is explored at most once. After a
// successful attempt the bits it set are cleared, since states on the
// successful path did not fail. One bit per state keeps long inputs cheap.
class Matcher {
 public:
  Matcher(const RegexProgram& prog, std::u32string_view text) : prog_(prog), text_(text) {
    visited_.resize(prog.programs.size());
  }

  // End of the highest-priority match of program p anchored at start, or -1.
  int64_t MatchAt(int p, size_t start) {
    const std::vector<Inst>& code = prog_.programs[p];
    const size_t width = text_.size() + 1;
    std::vector<uint64_t>& visited = visited_[p];
    if (visited.empty()) visited.assign((code.size() * width + 63) / 64, 0);
    size_t max_pos = start;
    const size_t base = stack_.size();
    stack_.emplace_back(0, start);
    int64_t result = -1;
    while (stack_.size() > base && result < 0) {
      auto [pc, pos] = stack_.back();
      stack_.pop_back();
      while (true) {
        const size_t bit = static_cast<size_t>(pc) * width + pos;
        uint64_t& word = visited[bit >> 6];
        const uint64_t mask = uint64_t{1} << (bit & 63);
        if (word & mask) break;
        word |= mask;
        if (pos > max_pos) max_pos = pos;
        const Inst& in = code[pc];
        bool ok = true;
        switch (in.op) {
          case Op::kChar: ok = pos < text_.size() && text_[pos] == in.c; if (ok) ++pos; break;
          case Op::kClass: ok = pos < text_.size() && prog_.classes[in.x].Matches(text_[pos]); if (ok) ++pos; break;
          case Op::kAnyButNewline: ok = pos < text_.size() && text_[pos] != U'\n'; if (ok) ++pos; break;
          case Op::kSplit:
            stack_.emplace_back(in.y, pos);
            pc = in.x;
            continue;
          case Op::kJmp: pc = in.x; continue;
          case Op::kLineStart: ok = pos == 0 || text_[pos - 1] == U'\n'; break;
          case Op::kLineEnd: ok = pos == text_.size() || text_[pos] == U'\n'; break;
          case Op::kTextStart: ok = pos == 0; break;
          case Op::kTextEnd: ok = pos == text_.size(); break;
          case Op::kTextEndOrFinalNewline:
            ok = pos == text_.size() || (pos + 1 == text_.size() && text_[pos] == U'\n');
            break;
          case Op::kLookahead: ok = (MatchAt(in.x, pos) >= 0) != in.negate; break;
          case Op::kMatch: result = static_cast<int64_t>(pos); break;
        }
        if (!ok || result >= 0) break;
        ++pc;
      }
    }
    stack_.resize(base);
    // States on a successful path did not fail: forget what this attempt marked.
    if (result >= 0) {
      for (size_t pc = 0; pc < code.size(); ++pc) {
        for (size_t pos = start; pos <= max_pos; ++pos) {
          const size_t bit = pc * width + pos;
          visited[bit >> 6] &= ~(uint64_t{1} << (bit & 63));
        }
      }
    }
    return result;
  }

 private:
  const RegexProgram& prog_;
  std::u32string_view text_;
  std::vector<std::vector<uint64_t>> visited_;
  std::vector<std::pair<int32_t, size_t>> stack_;
};

}  // namespace

// ---------------------------------------------------------------- Regex

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern_utf8) {
  auto cps = DecodeUtf8(pattern_utf8);
  if (!cps.ok()) return absl::InvalidArgumentError(absl::StrCat("regex pattern: ", cps.status().message()));
  auto program = std::make_shared<RegexProgram>();
  Parser parser(std::move(*cps), program.get());
  auto root = parser.ParseAll();
  if (!root.ok()) return root.status();
  Compiler(program.get()).CompileProgram(**root);
  return Regex(std::move(program));
}

Regex::Regex(std::shared_ptr<const RegexProgram> program) : program_(std::move(program)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

std::vector<Regex::Match> Regex::FindAll(std::u32string_view text) const {
  // The onig crate's find_iter: an empty match right where the previous match
  // ended is skipped by moving one code point on.
  std::vector<Match> matches;
  Matcher matcher(*program_, text);
  size_t last_end = 0;
  int64_t last_match_end = -1;
  while (last_end <= text.size()) {
    int64_t end = -1;
    size_t s = last_end;
    for (; s <= text.size(); ++s) {
      end = matcher.MatchAt(0, s);
      if (end >= 0) break;
    }
    if (end < 0) break;
    if (static_cast<size_t>(end) == s && end == last_match_end) {
      ++last_end;
      continue;
    }
    matches.push_back({s, static_cast<size_t>(end)});
    last_end = static_cast<size_t>(end);
    last_match_end = end;
  }
  return matches;
}

}  // namespace argen::tokenizer
