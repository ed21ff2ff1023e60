// Human units on argen_client's command line and in its output: durations
// ("500ms", "2m", plain seconds) and byte counts ("64MiB", plain bytes) in,
// "18.4 ms" and "27.5 MiB" out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"

namespace argen::client {

// "1.5" (seconds), "250ms", "90s", "2m", "1h" -> seconds; nullopt otherwise.
std::optional<double> ParseDurationSeconds(std::string_view text);
// "4096", "64MiB", "64Mi", "1GB", "2k" -> bytes; nullopt otherwise.
std::optional<int64_t> ParseByteCount(std::string_view text);

// CLI11 transforms that turn such a value into plain seconds / bytes.
CLI::Validator DurationSeconds();
CLI::Validator ByteCount();

// 0.0183697 -> "18.4 ms", 3.2 -> "3.20 s", 75 -> "1 min 15 s".
std::string HumanSeconds(double seconds);
// 28852224 -> "27.5 MiB"; below 1 KiB: "512 B".
std::string HumanBytes(int64_t bytes);

}  // namespace argen::client
