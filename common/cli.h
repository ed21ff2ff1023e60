// The command-line conventions every argen binary shares, on CLI11:
// --help (with defaults) and --version print to stdout and exit 0; a bad
// command line prints "<program>: <what>" (unknown flags as "unknown flag
// --x") and a pointer to --help on stderr and exits with the binary's usage
// code (2 for all of ours).
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"

namespace argen::cli {

constexpr int kUsageExit = 2;

// Adds --version (VersionLine(program)) and makes --help show defaults.
void Configure(CLI::App& app, std::string_view program);

// Rewrites an error message for the app that failed (e.g. "unexpected
// argument 'x'" -> "unknown command 'x'" where commands are expected).
using MessageRewrite = std::function<std::string(const CLI::App& failed, const std::string& message)>;

// Parses `args` (without the program name). nullopt: go on and run;
// otherwise the process exit code, the help, version or error already printed.
std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                         int usage_code = kUsageExit, const MessageRewrite& rewrite = nullptr);
std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                         int usage_code = kUsageExit);

// CLI11's wording for a parse error, made to say "unknown flag --x" for
// arguments no option takes.
// With `app` (the command that failed), an unknown flag near one of its
// flags adds "(did you mean --seed?)".
std::string ErrorMessage(const CLI::ParseError& error, const CLI::App* app = nullptr);

// For binaries with their own small parsers (the benchmarks): when argv holds
// --help/-h or --version, prints `usage` or the version line to stdout and
// returns 0; otherwise nullopt.
std::optional<int> HelpOrVersion(int argc, const char* const* argv, std::string_view program, std::string_view usage);

// A flag's names: "top_k" -> "--top_k,--top-k", "kv-cache-dtype" ->
// "--kv-cache-dtype,--kv_cache_dtype": both spellings of every long flag are
// accepted, the one given first (help and messages name it); a one-letter
// `short_name` adds "-p".
std::string FlagNames(std::string_view long_name, char short_name = 0);

// Accepts 0 .. 2^64-1 written as decimal digits; "-1" (which CLI11 would wrap
// to 2^64-1) and anything else is an error naming the range.
CLI::Validator Uint64Digits();

// `args` (no program name) as CLI11's parse(vector) wants them: reversed,
// with "--name=" split into "--name" and an empty value.
std::vector<std::string> CliArgs(const std::vector<std::string>& args);

// The arguments an ExtrasError names, flags first; empty for other errors.
std::vector<std::string> UnexpectedArguments(const CLI::ParseError& error);

}  // namespace argen::cli
