#include "engine/families/lumina/chameleon_vocab.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace argen::lumina {

std::string ChameleonImageTokenName(int32_t code) {
  std::string name = kChameleonImageTokenPrefix;
  for (char d : std::to_string(code)) name.push_back(static_cast<char>('A' + (d - '0')));
  name.push_back('Z');
  return name;
}

std::optional<int32_t> ChameleonImageTokenCode(std::string_view name) {
  constexpr size_t kPrefix = sizeof(kChameleonImageTokenPrefix) - 1;
  if (!absl::StartsWith(absl::string_view(name.data(), name.size()), kChameleonImageTokenPrefix) ||
      name.size() < kPrefix + 2 || name.back() != 'Z') {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(kPrefix, name.size() - kPrefix - 1);
  if (digits.size() > 1 && digits[0] == 'A') return std::nullopt;  // a leading zero: not a name Chameleon makes
  int64_t code = 0;
  for (char c : digits) {
    if (c < 'A' || c > 'J') return std::nullopt;
    code = code * 10 + (c - 'A');
    if (code > std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  return static_cast<int32_t>(code);
}

absl::StatusOr<ImageTokenRange> BuildImageTokenRange(absl::Span<const std::pair<std::string, int32_t>> vocab,
                                                     int32_t codebook_size, std::string_view where) {
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(where.data(), where.size()), ": ", what));
  };
  if (codebook_size <= 0) return bad(absl::StrCat("codebook size must be > 0, got ", codebook_size));
  std::vector<std::pair<int32_t, int32_t>> id_code;  // image tokens as (id, code)
  for (const auto& [name, id] : vocab) {
    if (!absl::StartsWith(name, kChameleonImageTokenPrefix)) continue;
    const std::optional<int32_t> code = ChameleonImageTokenCode(name);
    if (!code) return bad(absl::StrCat("\"", name, "\" has the image-token prefix but is not an image token name"));
    if (*code >= codebook_size) {
      return bad(absl::StrCat("\"", name, "\" is code ", *code, ", outside the codebook [0, ", codebook_size, ")"));
    }
    if (id < 0) return bad(absl::StrCat("\"", name, "\" has a negative id ", id));
    id_code.emplace_back(id, *code);
  }
  if (static_cast<int64_t>(id_code.size()) != codebook_size) {
    return bad(
        absl::StrCat(id_code.size(), " image tokens (IMGIMG...Z), expected one per VQGAN code: ", codebook_size));
  }
  std::sort(id_code.begin(), id_code.end());
  ImageTokenRange range;
  range.first_id = id_code.front().first;
  range.count = codebook_size;
  range.code_of_offset.assign(codebook_size, -1);
  std::vector<bool> seen(codebook_size, false);
  for (size_t i = 0; i < id_code.size(); ++i) {
    const auto [id, code] = id_code[i];
    if (id != range.first_id + static_cast<int32_t>(i)) {
      return bad(absl::StrCat("image token ids are not one contiguous range: id ", range.first_id + i,
                              " is missing (next image token id is ", id, ")"));
    }
    if (seen[code])
      return bad(absl::StrCat("code ", code, " has two image tokens (", ChameleonImageTokenName(code), ")"));
    seen[code] = true;
    range.code_of_offset[i] = code;
  }
  range.identity = true;
  for (int32_t i = 0; i < codebook_size; ++i) range.identity = range.identity && range.code_of_offset[i] == i;
  return range;
}

}  // namespace argen::lumina
