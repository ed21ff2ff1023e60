// "WxH" image sizes in pixels, as the HTTP API's `size` and argen_client's
// --size spell them: digits, 'x', digits (at most 5 each, both > 0), nothing
// else (no sign, no spaces). One parser for every front end.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace argen {

// {width, height}, or nullopt when `text` is not exactly WxH.
std::optional<std::pair<int32_t, int32_t>> ParseImageSize(std::string_view text);

}  // namespace argen
