// Chameleon's image tokens inside the text vocabulary: VQGAN code c is the
// token "IMGIMG" + the decimal digits of c written as letters A..J + "Z"
// (code 0 "IMGIMGAZ", code 10 "IMGIMGBAZ"). HF transformers'
// ChameleonImageVocabularyMapping reads every vocabulary entry whose name
// starts with "IMGIMG" this way; this is the same rule, checked, so a
// malformed or incomplete map is a load error instead of wrong pixels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace argen::lumina {

inline constexpr char kChameleonImageTokenPrefix[] = "IMGIMG";

// The name of VQGAN code `code` (>= 0).
std::string ChameleonImageTokenName(int32_t code);

// The code a name stands for; nullopt unless it is "IMGIMG", one or more of
// A..J (no leading A unless it is the only digit) and "Z".
std::optional<int32_t> ChameleonImageTokenCode(std::string_view name);

// Where the image tokens sit: ids [first_id, first_id + codebook_size), one
// per code. code_of_offset[id - first_id] is the code of that id.
struct ImageTokenRange {
  int32_t first_id = 0;
  int32_t count = 0;
  std::vector<int32_t> code_of_offset;
  bool identity = false;  // code == id - first_id for every id (the published vocabulary)
};

// From a vocabulary (name, id) list, e.g. config.json's vocabulary_map or the
// tokenizer's vocab. Errors (InvalidArgument, naming `where` and the entry): a
// name with the IMGIMG prefix that is not a valid image token, a code given
// twice, a number of image tokens other than codebook_size, codes not covering
// 0..codebook_size-1, or ids that are not one contiguous range (the sampler
// restricts logits to that range).
absl::StatusOr<ImageTokenRange> BuildImageTokenRange(absl::Span<const std::pair<std::string, int32_t>> vocab,
                                                     int32_t codebook_size, std::string_view where);

}  // namespace argen::lumina
