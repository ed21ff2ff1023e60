#include "common/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <sstream>

#include "common/edit_distance.h"
#include "common/version.h"

namespace argen::cli {

void Configure(CLI::App& app, std::string_view program) {
  app.name(std::string(program));
  app.set_version_flag("--version", VersionLine(program), "Print the version (git describe, build type) and exit");
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
}

std::string FlagNames(std::string_view long_name, char short_name) {
  const std::string given(long_name);
  std::string other = given;
  const bool hyphens = given.find('-') != std::string::npos;
  std::replace(other.begin(), other.end(), hyphens ? '-' : '_', hyphens ? '_' : '-');
  std::string names = short_name != 0 ? std::string("-") + short_name + "," : std::string();
  names += "--" + given;
  if (other != given) names += ",--" + other;
  return names;
}

CLI::Validator Uint64Digits() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool digits = !value.empty() && value.size() <= 20 &&
                            std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
        errno = 0;
        if (digits) std::strtoull(value.c_str(), nullptr, 10);
        if (!digits || errno == ERANGE) {
          return "\"" + value.substr(0, 32) + "\" is not an integer in [0, 18446744073709551615]";
        }
        return std::string();
      },
      "");
}

std::vector<std::string> CliArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (auto it = args.rbegin(); it != args.rend(); ++it) {
    // "--name=" is an empty value (CLI11 would call it missing).
    if (it->size() > 3 && it->rfind("--", 0) == 0 && it->back() == '=' && it->find('=') == it->size() - 1) {
      out.emplace_back("");
      out.push_back(it->substr(0, it->size() - 1));
    } else {
      out.push_back(*it);
    }
  }
  return out;
}

std::vector<std::string> UnexpectedArguments(const CLI::ParseError& error) {
  const std::string what = error.what();
  // ExtrasError: "The following argument(s) was/were not expected: --a b".
  const std::string marker = "not expected: ";
  const size_t at = what.find(marker);
  std::vector<std::string> words;
  if (at == std::string::npos) return words;
  std::istringstream rest(what.substr(at + marker.size()));
  for (std::string w; rest >> w;) words.push_back(w);
  // Flags first: "--bogus 1" names --bogus, not its value.
  std::stable_partition(words.begin(), words.end(), [](const std::string& w) { return w.rfind("-", 0) == 0; });
  return words;
}

std::string ErrorMessage(const CLI::ParseError& error, const CLI::App* app) {
  const std::vector<std::string> extras = UnexpectedArguments(error);
  if (extras.empty()) return error.what();
  const std::string& first = extras.front();
  if (first.rfind("-", 0) == 0) {
    const size_t eq = first.find('=');
    const std::string flag = eq == std::string::npos ? first : first.substr(0, eq);
    std::string message = "unknown flag " + flag;
    if (app != nullptr && flag.rfind("--", 0) == 0) {
      // Long names compared without dashes or underscores' spelling: --top-k and --top_k alike.
      const auto plain = [](std::string s) {
        std::replace(s.begin(), s.end(), '_', '-');
        return s;
      };
      std::vector<std::string> names;
      for (const CLI::Option* o : app->get_options()) {
        for (const std::string& n : o->get_lnames()) names.push_back(plain(n));
      }
      const std::string closest = ClosestName(plain(flag.substr(2)), names);
      if (!closest.empty()) message += " (did you mean --" + closest + "?)";
    }
    return message;
  }
  return "unexpected argument '" + first + "'";
}

std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                         int usage_code, const MessageRewrite& rewrite) {
  std::vector<std::string> reversed = CliArgs(args);
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& v) {
    out << v.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // The subcommand that failed names itself in the message, when there is one.
    std::string where = app.get_name();
    const CLI::App* failed = &app;
    for (const CLI::App* sub = &app; sub != nullptr;) {
      const std::vector<CLI::App*> chosen = sub->get_subcommands();
      sub = chosen.empty() ? nullptr : chosen.back();
      if (sub != nullptr) {
        where += " " + sub->get_name();
        failed = sub;
      }
    }
    std::string message = ErrorMessage(e, failed);
    if (rewrite) message = rewrite(*failed, message);
    err << where << ": " << message << "\n"
        << "run '" << where << " --help' for the flags\n";
    return usage_code;
  }
  return std::nullopt;
}

std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                         int usage_code) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return Parse(app, args, out, err, usage_code);
}

std::optional<int> HelpOrVersion(int argc, const char* const* argv, std::string_view program, std::string_view usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      if (!usage.empty() && usage.back() != '\n') std::cout << "\n";
      return 0;
    }
    if (a == "--version") {
      std::cout << VersionLine(program) << "\n";
      return 0;
    }
  }
  return std::nullopt;
}

}  // namespace argen::cli
