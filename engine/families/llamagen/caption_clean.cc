#include "engine/families/llamagen/caption_clean.h"

#include <cctype>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "engine/tokenizer/utf8.h"

namespace argen::llamagen {
namespace {

// Decodes one UTF-8 code point at s[i] (invalid bytes pass as themselves).
uint32_t NextCodePoint(const std::string& s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + len > s.size()) len = 1;
  uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) {
      len = 1;
      cp = b;
      break;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  i += len;
  return cp;
}

// urllib.parse.unquote_plus: '+' is a space, %XX a byte.
std::string UnquotePlus(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string Strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string Sub(const std::string& s, const std::regex& re, const char* with) {
  return std::regex_replace(s, re, with);
}

bool IsDash(uint32_t cp) {
  static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x2D, 0x2D},     {0x58A, 0x58A},   {0x5BE, 0x5BE},   {0x1400, 0x1400}, {0x1806, 0x1806}, {0x2010, 0x2015},
      {0x2E17, 0x2E17}, {0x2E1A, 0x2E1A}, {0x2E3A, 0x2E3B}, {0x2E40, 0x2E40}, {0x301C, 0x301C}, {0x3030, 0x3030},
      {0x30A0, 0x30A0}, {0xFE31, 0xFE32}, {0xFE58, 0xFE58}, {0xFE63, 0xFE63}, {0xFF0D, 0xFF0D}};
  for (const auto& [lo, hi] : ranges) {
    if (cp >= lo && cp <= hi) return true;
  }
  return false;
}

// bad_punct_regex's set: #®•©™&@·º½¾¿¡§~)(][}{|\/*
bool IsBadPunct(uint32_t cp) {
  static const std::u32string set =
      U"#\u00AE\u2022\u00A9\u2122&@\u00B7\u00BA\u00BD\u00BE\u00BF\u00A1\u00A7~)(][}{|\\/*";
  return set.find(static_cast<char32_t>(cp)) != std::u32string::npos;
}

// The code-point steps: CJK ranges dropped, runs of dashes to '-', quotes normalised.
std::string CodePointSteps(const std::string& s, bool cjk_and_quotes, bool bad_punct) {
  std::string out;
  bool in_run = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, i);
    if (bad_punct) {
      const bool bad = IsBadPunct(cp);
      if (bad && !in_run) out.push_back(' ');
      in_run = bad;
      if (!bad) tokenizer::AppendUtf8(cp, out);
      continue;
    }
    if (cp >= 0x31C0 && cp <= 0x9FFF) continue;  // the seven CJK ranges, contiguous
    const bool dash = IsDash(cp);
    if (dash) {
      if (!in_run) out.push_back('-');
      in_run = true;
      continue;
    }
    in_run = false;
    if (cjk_and_quotes) {
      if (cp == '`' || cp == 0xB4 || cp == 0xAB || cp == 0xBB || cp == 0x201C || cp == 0x201D || cp == 0xA8) {
        out.push_back('"');
        continue;
      }
      if (cp == 0x2018 || cp == 0x2019) {
        out.push_back('\'');
        continue;
      }
    }
    tokenizer::AppendUtf8(cp, out);
  }
  return out;
}

struct Patterns {
  std::regex person{"<person>"};
  std::regex url1{
      R"(\b((?:https?:(?:\/{1,3}|[a-zA-Z0-9%])|[a-zA-Z0-9.\-]+[.](?:com|co|ru|net|org|edu|gov|it)[\w/-]*\b\/?(?!@))))"};
  std::regex url2{
      R"(\b((?:www:(?:\/{1,3}|[a-zA-Z0-9%])|[a-zA-Z0-9.\-]+[.](?:com|co|ru|net|org|edu|gov|it)[\w/-]*\b\/?(?!@))))"};
  std::regex nickname{R"(@[\w\d]+\b)"};
  std::regex quot{"&quot;?"};
  std::regex amp{"&amp"};
  std::regex ip{R"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})"};
  std::regex article{R"(\d:\d\d\s+$)"};
  std::regex backslash_n{R"(\\n)"};
  std::regex hash_short{R"(#\d{1,3}\b)"};
  std::regex hash_long{R"(#\d{5,}\b)"};
  std::regex long_number{R"(\b\d{6,}\b)"};
  std::regex filename{R"([\S]+\.(?:png|jpg|jpeg|bmp|webp|eps|pdf|apk|mp4))"};
  std::regex quotes{R"([\"\']{2,})"};
  std::regex dots{R"([\.]{2,})"};
  std::regex spaced_dot{R"(\s+\.\s+)"};
  std::regex dash_or_underscore{R"((?:\-|\_))"};
  std::regex id1{R"(\b[a-zA-Z]{1,3}\d{3,15}\b)"};
  std::regex id2{R"(\b[a-zA-Z]+\d+[a-zA-Z]+\b)"};
  std::regex id3{R"(\b\d+[a-zA-Z]+\d+\b)"};
  std::regex shipping{R"((worldwide\s+)?(free\s+)?shipping)"};
  std::regex download{R"((free\s)?download(\sfree)?)"};
  std::regex click{R"(\bclick\b\s(?:for|on)\s\w+)"};
  std::regex image_ext{R"(\b(?:png|jpg|jpeg|bmp|webp|eps|pdf|apk|mp4)(\simage[s]?)?)"};
  std::regex page{R"(\bpage\s+\d+\b)"};
  std::regex mixed_id{R"(\b\d*[a-zA-Z]+\d+[a-zA-Z]+\d+[a-zA-Z\d]*\b)"};
  std::regex dimensions{"\\b\\d+\\.?\\d*(?:x|\xD1\x85|\xC3\x97)\\d+\\.?\\d*\\b"};  // x, Cyrillic х, ×
  std::regex colon{R"(\b\s+\:\s+)"};
  std::regex punct_space{R"((\D[,\./])\b)"};
  std::regex spaces{R"(\s+)"};
  std::regex quoted{R"(^[\"\']([\w\W]+)[\"\']$)"};
  std::regex lead_punct{R"(^[\'\_,\-\:;])"};
  std::regex trail_punct{R"([\'\_,\-\:\-\+]$)"};
  std::regex dot_word{R"(^\.\S+$)"};
};

const Patterns& P() {
  static const Patterns* p = new Patterns();
  return *p;
}

std::string CleanOnce(const std::string& input) {
  const Patterns& p = P();
  std::string c = UnquotePlus(input);
  c = Strip(c);
  for (char& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  c = Sub(c, p.person, "person");
  c = Sub(c, p.url1, "");
  c = Sub(c, p.url2, "");
  c = Sub(c, p.nickname, "");
  c = CodePointSteps(c, /*cjk_and_quotes=*/true, /*bad_punct=*/false);
  c = Sub(c, p.quot, "");
  c = Sub(c, p.amp, "");
  c = Sub(c, p.ip, " ");
  c = Sub(c, p.article, "");
  c = Sub(c, p.backslash_n, " ");
  c = Sub(c, p.hash_short, "");
  c = Sub(c, p.hash_long, "");
  c = Sub(c, p.long_number, "");
  c = Sub(c, p.filename, "");
  c = Sub(c, p.quotes, "\"");
  c = Sub(c, p.dots, " ");
  c = CodePointSteps(c, false, /*bad_punct=*/true);
  c = Sub(c, p.spaced_dot, " ");
  if (std::distance(std::sregex_iterator(c.begin(), c.end(), p.dash_or_underscore), std::sregex_iterator()) > 3) {
    c = Sub(c, p.dash_or_underscore, " ");
  }
  c = Strip(c);  // basic_clean (ftfy and html.unescape not reproduced)
  c = Sub(c, p.id1, "");
  c = Sub(c, p.id2, "");
  c = Sub(c, p.id3, "");
  c = Sub(c, p.shipping, "");
  c = Sub(c, p.download, "");
  c = Sub(c, p.click, "");
  c = Sub(c, p.image_ext, "");
  c = Sub(c, p.page, "");
  c = Sub(c, p.mixed_id, " ");
  c = Sub(c, p.dimensions, "");
  c = Sub(c, p.colon, ": ");
  c = Sub(c, p.punct_space, "$1 ");
  c = Sub(c, p.spaces, " ");
  c = Sub(c, p.quoted, "$1");
  c = Sub(c, p.lead_punct, "");
  c = Sub(c, p.trail_punct, "");
  c = Sub(c, p.dot_word, "");
  return Strip(c);
}

}  // namespace

std::string CleanCaption(const std::string& caption) { return CleanOnce(CleanOnce(caption)); }

}  // namespace argen::llamagen
