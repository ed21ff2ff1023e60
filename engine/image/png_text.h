// PNG text chunks without re-encoding the image: inserts tEXt (or, for text
// beyond printable ASCII, uncompressed UTF-8 iTXt) chunks right after IHDR of
// an encoded PNG, and reads them back. Used for the generation metadata
// (generation_metadata.h) in every image argen_server and argen_generate write.
#pragma once

#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace argen::image {

using TextEntries = std::vector<std::pair<std::string, std::string>>;

// `png` with one chunk per entry inserted after IHDR. Keywords must be 1-79
// printable Latin-1 characters without leading/trailing/double spaces (PNG
// spec 11.3.4); InvalidArgument for a bad keyword or bytes that are not a PNG.
absl::StatusOr<std::string> AddPngText(absl::string_view png, const TextEntries& entries);

// `png` without its text chunks (tEXt, iTXt, zTXt): the image as encoded,
// e.g. to compare a server's PNG with a local encoding of the same pixels.
absl::StatusOr<std::string> RemovePngText(absl::string_view png);

// Every tEXt and uncompressed iTXt chunk, in file order (keyword, text);
// InvalidArgument when `png` is not a well-formed PNG (CRCs checked).
absl::StatusOr<TextEntries> ReadPngText(absl::string_view png);

}  // namespace argen::image
