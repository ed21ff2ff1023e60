#include "engine/tokenizer/unicode_categories.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace argen::tokenizer {
namespace {

struct CategoryRun {
  char32_t first, last;
  uint8_t category;
};

constexpr CategoryRun kRuns[] = {
#include "engine/tokenizer/unicode_categories_table.inc"
};

constexpr CategoryMask Mask(std::initializer_list<GeneralCategory> cats) {
  CategoryMask m = 0;
  for (GeneralCategory c : cats) m |= MaskOf(c);
  return m;
}

using GC = GeneralCategory;
constexpr CategoryMask kLetter = Mask({GC::kLu, GC::kLl, GC::kLt, GC::kLm, GC::kLo});
constexpr CategoryMask kMark = Mask({GC::kMn, GC::kMc, GC::kMe});
constexpr CategoryMask kNumber = Mask({GC::kNd, GC::kNl, GC::kNo});
constexpr CategoryMask kPunct = Mask({GC::kPc, GC::kPd, GC::kPs, GC::kPe, GC::kPi, GC::kPf, GC::kPo});
constexpr CategoryMask kSymbol = Mask({GC::kSm, GC::kSc, GC::kSk, GC::kSo});
constexpr CategoryMask kSeparator = Mask({GC::kZs, GC::kZl, GC::kZp});
constexpr CategoryMask kOther = Mask({GC::kCn, GC::kCc, GC::kCf, GC::kCs, GC::kCo});

constexpr const char* kShortNames[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                       "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                       "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};

struct NamedMask {
  const char* name;
  CategoryMask mask;
};
constexpr NamedMask kGroupNames[] = {
    {"L", kLetter}, {"Letter", kLetter}, {"M", kMark},      {"Mark", kMark},
    {"N", kNumber}, {"Number", kNumber}, {"P", kPunct},     {"Punctuation", kPunct},
    {"S", kSymbol}, {"Symbol", kSymbol}, {"Z", kSeparator}, {"Separator", kSeparator},
    {"C", kOther},  {"Other", kOther},
};

}  // namespace

GeneralCategory CategoryOf(char32_t cp) {
  auto it = std::upper_bound(std::begin(kRuns), std::end(kRuns), cp,
                             [](char32_t c, const CategoryRun& r) { return c < r.first; });
  if (it == std::begin(kRuns)) return GC::kCn;
  --it;
  return cp <= it->last ? static_cast<GC>(it->category) : GC::kCn;
}

CategoryMask CategoryMaskFromName(const char* name, int len) {
  for (const NamedMask& g : kGroupNames) {
    if (static_cast<int>(std::strlen(g.name)) == len && std::memcmp(g.name, name, len) == 0) return g.mask;
  }
  if (len == 2) {
    for (int i = 0; i < static_cast<int>(std::size(kShortNames)); ++i) {
      if (std::memcmp(kShortNames[i], name, 2) == 0) return CategoryMask{1} << i;
    }
  }
  return 0;
}

bool IsLetter(char32_t cp) { return InCategories(cp, kLetter); }
bool IsNumeric(char32_t cp) { return InCategories(cp, kNumber); }
bool IsDecimalDigit(char32_t cp) { return CategoryOf(cp) == GC::kNd; }
bool IsAlphanumeric(char32_t cp) { return InCategories(cp, kLetter | kNumber); }
// Other_Alphabetic symbols (circled / squared Latin letters): alphabetic though in So.
bool IsAlphabeticSymbol(char32_t cp) {
  return (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
         (cp >= 0x1F170 && cp <= 0x1F189);
}

bool IsWordChar(char32_t cp) {
  return InCategories(cp, kLetter | kMark | kNumber | MaskOf(GC::kPc)) || IsAlphabeticSymbol(cp);
}

bool IsRustWordChar(char32_t cp) {
  return InCategories(cp, kLetter | kMark | MaskOf(GC::kNl) | MaskOf(GC::kNd) | MaskOf(GC::kPc)) ||
         IsAlphabeticSymbol(cp) || cp == 0x200C || cp == 0x200D;
}

bool IsWhiteSpace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace argen::tokenizer
