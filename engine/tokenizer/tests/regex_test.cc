// Oniguruma's semantics on the constructs tokenizer.json patterns use;
// expectations checked against HF tokenizers' Split.
#include "engine/tokenizer/regex.h"

#include <gtest/gtest.h>

#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

// Matched substrings of text, as UTF-8.
std::vector<std::string> Matches(const std::string& pattern, const std::string& text) {
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  if (!re.ok()) return {};
  const std::u32string cps = *DecodeUtf8(text);
  std::vector<std::string> out;
  for (const Regex::Match& m : re->FindAll(cps))
    out.push_back(EncodeUtf8(std::u32string_view(cps).substr(m.begin, m.end - m.begin)));
  return out;
}

using V = std::vector<std::string>;

TEST(RegexTest, LeftmostFirstAlternation) {
  EXPECT_EQ(Matches("a|ab", "ab"), V({"a"}));
  EXPECT_EQ(Matches("ab|a", "ab"), V({"ab"}));
  EXPECT_EQ(Matches("'s|'t|'re| ?\\p{L}+", "it's you're"), V({"it", "'s", " you", "'re"}));
}

TEST(RegexTest, UnicodeClasses) {
  EXPECT_EQ(Matches("\\p{L}+", "héllo wörld 猫"), V({"héllo", "wörld", "猫"}));
  EXPECT_EQ(Matches("\\p{N}+", "a12b٣½"), V({"12", "٣½"}));
  EXPECT_EQ(Matches("\\d+", "1٣½"), V({"1٣"}));
  EXPECT_EQ(Matches("\\s+",
                    "a\x0b"
                    "b\xc2\x85"
                    "c\xc2\xa0"
                    "d\x1c"
                    "e"),
            V({"\x0b", "\xc2\x85", "\xc2\xa0"}));
  EXPECT_EQ(Matches("[^\\s\\p{L}]+", "ab, 12!"), V({",", "12!"}));
  EXPECT_EQ(Matches("\\w+", "é_1٣x y"), V({"é_1٣x", "y"}));
  // Oniguruma's \w takes No and circled letters but not ZWJ (checked with HF Split).
  EXPECT_EQ(Matches("\\w+", "a½b²cⅫdⒶe\u0301f٣g"), V({"a½b²cⅫdⒶe\u0301f٣g"}));
  EXPECT_EQ(Matches("\\w+", "width\u200djoiner"), V({"width", "joiner"}));
}

TEST(RegexTest, DollarMatchesBeforeNewline) {
  EXPECT_EQ(Matches("a\\s*$", "a\nb a"), V({"a", "a"}));
  EXPECT_EQ(Matches("\\s+$", "x  \ny  "), V({"  ", "  "}));
}

TEST(RegexTest, NegativeLookahead) {
  // GPT-2: whitespace not followed by non-space, so "   x" leaves the last space for " x".
  EXPECT_EQ(Matches("\\s+(?!\\S)|\\s+", "a   x  "), V({"  ", " ", "  "}));
  EXPECT_EQ(Matches("a(?=b)", "ab ac"), V({"a"}));
}

TEST(RegexTest, CountedAndLazyRepeats) {
  EXPECT_EQ(Matches("\\p{N}{1,3}", "1234567"), V({"123", "456", "7"}));
  EXPECT_EQ(Matches("a{2}", "aaaaa"), V({"aa", "aa"}));
  EXPECT_EQ(Matches("<.+?>", "<a><b>"), V({"<a>", "<b>"}));
  EXPECT_EQ(Matches("x{,", "x{,"), V({"x{,"}));  // not an interval: literal
}

TEST(RegexTest, ClassesWithRangesAndEscapes) {
  EXPECT_EQ(Matches("[\\r\\n]", "a\r\nb"), V({"\r", "\n"}));
  EXPECT_EQ(Matches("[!-/:-~]+", "ab{}!09"), V({"ab{}!"}));
  EXPECT_EQ(Matches("[一-龥]+", "中文abc汉字"), V({"中文", "汉字"}));
  EXPECT_EQ(Matches("[a-c[x-z]]+", "abxyzdm"), V({"abxyz"}));
  EXPECT_EQ(Matches("\\u00e9|\\x{1F600}", "é😀"), V({"é", "😀"}));
}

TEST(RegexTest, EmptyMatchesAdvance) {
  EXPECT_EQ(Matches("a*", "baa"), V({"", "aa"}));  // as the onig crate: no empty match right after "aa"
}

TEST(RegexTest, PathologicalPatternsFinish) {
  const std::string text(2000, 'a');
  EXPECT_TRUE(Matches("(a*)*b", text).empty());
  EXPECT_TRUE(Matches("(a|aa)+c", text).empty());
}

// Errors are Oniguruma's (HF tokenizers refuses the same patterns).
TEST(RegexTest, MalformedPatternsAreErrors) {
  for (const char* bad : {"(a", "a)", "[abc", "\\p{Nope}", "*a", "\\"}) {
    auto re = Regex::Compile(bad);
    EXPECT_FALSE(re.ok()) << bad;
  }
  auto re = Regex::Compile("(a");
  EXPECT_NE(re.status().message().find("unmatched parenthesis"), std::string::npos) << re.status();
}

// What Oniguruma (and so HF) accepts although other engines refuse it,
// with HF's pieces (checked with tokenizers 0.23 Split).
TEST(RegexTest, OnigurumaOnlyConstructs) {
  EXPECT_EQ(Matches("a{3,1}", "aaaaa"), V({"aaa", "aa"}));
  EXPECT_EQ(Matches("\\q", "aqq"), V({"q", "q"}));
  EXPECT_EQ(Matches("a++b", "aab ab"), V({"aab", "ab"}));
  EXPECT_EQ(Matches("(?<x>ab)+", "ababx ab"), V({"abab", "ab"}));
  EXPECT_EQ(Matches("\\p{Lu}\\p{Ll}+", "HTTPServer iPhone"), V({"Server", "Phone"}));
}

}  // namespace
}  // namespace argen::tokenizer
