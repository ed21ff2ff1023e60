#include "engine/tokenizer/byte_level.h"

#include <array>

namespace argen::tokenizer {
namespace {

// Printable Latin-1 bytes map to themselves; the other 68 bytes map, in byte
// order, to U+0100 onwards.
struct ByteTables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 0x144> to_byte{};
  ByteTables() {
    to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

char32_t ByteToChar(uint8_t byte) { return Tables().to_char[byte]; }

int CharToByte(char32_t c) { return c < Tables().to_byte.size() ? Tables().to_byte[c] : -1; }

}  // namespace argen::tokenizer
