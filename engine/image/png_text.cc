#include "engine/image/png_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "zlib.h"

namespace argen::image {
namespace {

constexpr absl::string_view kSignature("\x89PNG\r\n\x1a\n", 8);

uint32_t ReadU32(absl::string_view s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

void AppendU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

uint32_t Crc(absl::string_view type_and_data) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(type_and_data.data()), static_cast<uInt>(type_and_data.size())));
}

void AppendChunk(std::string& out, absl::string_view type, absl::string_view data) {
  AppendU32(out, static_cast<uint32_t>(data.size()));
  const std::string body = absl::StrCat(type, data);
  out += body;
  AppendU32(out, Crc(body));
}

bool PrintableAscii(absl::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E) {
      if (c != '\n') return false;  // tEXt allows newlines
    }
  }
  return true;
}

absl::Status CheckKeyword(absl::string_view k) {
  bool ok =
      !k.empty() && k.size() <= 79 && k.front() != ' ' && k.back() != ' ' && k.find("  ") == absl::string_view::npos;
  for (char c : k) ok = ok && static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) <= 0x7E;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("PNG text keyword \"", k, "\" is not 1-79 printable characters"));
}

struct Chunk {
  absl::string_view type, data;
  size_t end = 0;  // offset just past the chunk's CRC
};

// The chunk at `at`, its CRC checked.
absl::StatusOr<Chunk> ChunkAt(absl::string_view png, size_t at) {
  if (at + 12 > png.size()) return absl::InvalidArgumentError("PNG: truncated chunk");
  const uint32_t length = ReadU32(png, at);
  if (length > png.size() || at + 12 + length > png.size()) {
    return absl::InvalidArgumentError("PNG: chunk runs past the end");
  }
  Chunk c;
  c.type = png.substr(at + 4, 4);
  c.data = png.substr(at + 8, length);
  c.end = at + 12 + length;
  if (Crc(png.substr(at + 4, 4 + length)) != ReadU32(png, at + 8 + length)) {
    return absl::InvalidArgumentError(absl::StrCat("PNG: bad CRC in chunk ", c.type));
  }
  return c;
}

}  // namespace

absl::StatusOr<std::string> AddPngText(absl::string_view png, const TextEntries& entries) {
  if (png.substr(0, 8) != kSignature) return absl::InvalidArgumentError("not a PNG (no signature)");
  absl::StatusOr<Chunk> ihdr = ChunkAt(png, 8);
  if (!ihdr.ok()) return ihdr.status();
  if (ihdr->type != "IHDR") return absl::InvalidArgumentError("PNG: first chunk is not IHDR");
  std::string out(png.substr(0, ihdr->end).data(), ihdr->end);
  for (const auto& [keyword, text] : entries) {
    if (absl::Status s = CheckKeyword(keyword); !s.ok()) return s;
    if (PrintableAscii(text)) {
      AppendChunk(out, "tEXt", absl::StrCat(keyword, absl::string_view("\0", 1), text));
    } else {
      // iTXt: keyword, NUL, compression flag 0, method 0, empty language, NUL,
      // empty translated keyword, NUL, UTF-8 text.
      AppendChunk(out, "iTXt", absl::StrCat(keyword, absl::string_view("\0\0\0\0\0", 5), text));
    }
  }
  absl::StrAppend(&out, png.substr(ihdr->end));
  return out;
}

absl::StatusOr<std::string> RemovePngText(absl::string_view png) {
  if (png.substr(0, 8) != kSignature) return absl::InvalidArgumentError("not a PNG (no signature)");
  std::string out(png.substr(0, 8).data(), 8);
  for (size_t at = 8; at < png.size();) {
    absl::StatusOr<Chunk> c = ChunkAt(png, at);
    if (!c.ok()) return c.status();
    if (c->type != "tEXt" && c->type != "iTXt" && c->type != "zTXt") absl::StrAppend(&out, png.substr(at, c->end - at));
    at = c->end;
  }
  return out;
}

absl::StatusOr<TextEntries> ReadPngText(absl::string_view png) {
  if (png.substr(0, 8) != kSignature) return absl::InvalidArgumentError("not a PNG (no signature)");
  TextEntries entries;
  bool ended = false;
  for (size_t at = 8; at < png.size() && !ended;) {
    absl::StatusOr<Chunk> c = ChunkAt(png, at);
    if (!c.ok()) return c.status();
    at = c->end;
    const size_t nul = c->data.find('\0');
    if (c->type == "tEXt" && nul != absl::string_view::npos) {
      entries.emplace_back(std::string(c->data.substr(0, nul)), std::string(c->data.substr(nul + 1)));
    } else if (c->type == "iTXt" && nul != absl::string_view::npos && nul + 2 < c->data.size() &&
               c->data[nul + 1] == '\0') {
      // Skip compression flag/method, language tag, translated keyword.
      size_t p = nul + 3;
      const size_t lang_end = c->data.find('\0', p);
      if (lang_end == absl::string_view::npos) continue;
      const size_t tkey_end = c->data.find('\0', lang_end + 1);
      if (tkey_end == absl::string_view::npos) continue;
      entries.emplace_back(std::string(c->data.substr(0, nul)), std::string(c->data.substr(tkey_end + 1)));
    }
    ended = c->type == "IEND";
  }
  if (!ended) return absl::InvalidArgumentError("PNG: no IEND chunk (truncated?)");
  return entries;
}

}  // namespace argen::image
