// The current value of a config key as text (for --help defaults and the
// effective configuration logged at startup). Keys not listed here (added
// later without a reader) have none.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/server_config.h"

namespace argen::server {

std::optional<std::string> ConfigValueText(const ServerConfig& config, std::string_view key);

}  // namespace argen::server
