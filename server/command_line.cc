// argen_server's command line on CLI11 (declared in server_config.h):
// --config FILE, --version, --help, and --KEY VALUE / --KEY=VALUE for every
// config key, in the order given.
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cli.h"
#include "server/config_values.h"
#include "server/server_config.h"

namespace argen::server {
namespace {

constexpr char kDescription[] =
    "argen_server: serves text-to-image generation over gRPC (argen.v1.ArGen), with health,\n"
    "reflection and Prometheus /metrics. Settings come from --config FILE (configs/argen.yaml\n"
    "documents every key), then from --KEY=VALUE flags with the same dotted key names, which win.";

// The app with every key; parsed values land in `cl` (when not null).
std::unique_ptr<CLI::App> BuildApp(CommandLine* cl) {
  auto app = std::make_unique<CLI::App>(kDescription, "argen_server");
  cli::Configure(*app, "argen_server");
  app->add_option(
         "--config",
         [cl](const std::vector<std::string>& v) {
           if (cl != nullptr) cl->config_path = v.back();
           return true;
         },
         "YAML config file")
      ->type_name("FILE")
      ->expected(1);
  const ServerConfig defaults;
  for (const ConfigKey& k : ConfigKeys()) {
    const std::string key = k.name;
    CLI::Option* opt = app->add_option(
        "--" + key,
        [cl, key](const std::vector<std::string>& values) {
          if (cl != nullptr) {
            for (const std::string& v : values) cl->overrides.emplace_back(key, v);
          }
          return true;
        },
        k.meaning);
    opt->type_name("VALUE")->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if (std::optional<std::string> d = ConfigValueText(defaults, key); d && !d->empty()) opt->default_str(*d);
  }
  // A family option (ServerConfig::family_options), repeatable: --family_option vqgan_dir=/path.
  // After the keys: CLI11 applies options in the order they are declared, so it wins over --vqgan_dir.
  app->add_option(
         "--family_option",
         [cl](const std::vector<std::string>& values) {
           if (cl == nullptr) return true;
           for (const std::string& v : values) {
             const size_t eq = v.find('=');
             // Without KEY=: SetConfigValue's error for the section itself.
             if (eq == std::string::npos || eq == 0) {
               cl->overrides.emplace_back("family_options", v);
             } else {
               cl->overrides.emplace_back(kFamilyOptionsPrefix + v.substr(0, eq), v.substr(eq + 1));
             }
           }
           return true;
         },
         "an option of the model's family, KEY=VALUE (Lumina-mGPT: vqgan_dir); repeatable")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // One more name for the model (ServerConfig::served_model_names), repeatable: --served_model_name dall-e-3.
  app->add_option(
         "--served_model_name",
         [cl](const std::vector<std::string>& values) {
           if (cl != nullptr) cl->overrides.emplace_back("served_model_names", absl::StrJoin(values, ","));
           return true;
         },
         "another name the HTTP API accepts for the model (e.g. dall-e-3); repeatable")
      ->type_name("NAME")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->footer(
      "Exit codes: 0 after a drained shutdown (SIGTERM/SIGINT), 1 when the model fails to load\n"
      "or a port cannot be bound, 2 for a bad command line or config.");
  return app;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv) {
  CommandLine cl;
  std::unique_ptr<CLI::App> app = BuildApp(&cl);
  std::vector<std::string> args = cli::CliArgs(std::vector<std::string>(argv + 1, argv + argc));
  try {
    app->parse(args);
  } catch (const CLI::CallForHelp&) {
    cl.help = true;
  } catch (const CLI::CallForAllHelp&) {
    cl.help = true;
  } catch (const CLI::CallForVersion&) {
    cl.version = true;
  } catch (const CLI::ParseError& e) {
    std::string message = cli::ErrorMessage(e, app.get());
    if (message.rfind("unknown flag ", 0) == 0) {
      absl::StrAppend(&message, " (not a config key)");
    }
    return absl::InvalidArgumentError(message);
  }
  return cl;
}

std::string ConfigHelp() { return BuildApp(nullptr)->help(); }

}  // namespace argen::server
