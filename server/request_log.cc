#include "server/request_log.h"

#include <atomic>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/logger.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace argen::server::log {
namespace {

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> logger;
  std::atomic<Format> format{Format::kText};
};

State& GetState() {
  static State* state = new State();
  return *state;
}

void Install(State& s, Format format, spdlog::level::level_enum level, spdlog::sink_ptr sink) {
  if (sink == nullptr) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("argen", std::move(sink));
  const char* pattern =
      format == Format::kJson ? R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})" : "%Y-%m-%dT%H:%M:%S.%eZ %l %v";
  logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // one line per event, never lost on exit
  s.logger = std::move(logger);
  s.format.store(format);
}

std::shared_ptr<spdlog::logger> Logger() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.logger == nullptr) Install(s, Format::kText, spdlog::level::info, nullptr);
  return s.logger;
}

// key=value for text lines; strings with spaces, quotes or '=' are quoted.
std::string TextValue(const nlohmann::ordered_json& v) {
  if (!v.is_string()) return v.dump();
  const std::string& s = v.get_ref<const std::string&>();
  bool plain = !s.empty();
  for (char c : s) plain = plain && absl::ascii_isgraph(static_cast<unsigned char>(c)) && c != '"' && c != '=';
  return plain ? s : nlohmann::ordered_json(s).dump();
}

void AppendText(std::string& line, const std::string& prefix, const nlohmann::ordered_json& fields) {
  for (const auto& [key, value] : fields.items()) {
    if (value.is_object()) {
      AppendText(line, prefix + key + ".", value);
    } else {
      absl::StrAppend(&line, " ", prefix, key, "=", TextValue(value));
    }
  }
}

}  // namespace

absl::StatusOr<Format> ParseFormat(std::string_view text) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return absl::InvalidArgumentError(absl::StrCat("\"", std::string(text), "\" is not text or json"));
}

absl::StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view text) {
  for (auto [name, level] : {std::pair{"trace", spdlog::level::trace},
                             {"debug", spdlog::level::debug},
                             {"info", spdlog::level::info},
                             {"warning", spdlog::level::warn},
                             {"warn", spdlog::level::warn},
                             {"error", spdlog::level::err},
                             {"off", spdlog::level::off}}) {
    if (text == name) return level;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(text), "\" is not a log level (trace, debug, info, warning, error, off)"));
}

void Configure(Format format, spdlog::level::level_enum level, spdlog::sink_ptr sink) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  Install(s, format, level, std::move(sink));
}

void Event(spdlog::level::level_enum level, std::string_view event, std::string_view message,
           const nlohmann::ordered_json& fields) {
  std::shared_ptr<spdlog::logger> logger = Logger();
  if (!logger->should_log(level)) return;
  std::string line;
  if (GetState().format.load() == Format::kJson) {
    nlohmann::ordered_json object = {{"event", event}, {"msg", message}};
    for (const auto& [key, value] : fields.items()) object[key] = value;
    line = object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    line = line.substr(1, line.size() - 2);  // the pattern supplies the braces
  } else {
    line = absl::StrCat(std::string(event), ": ", std::string(message));
    AppendText(line, "", fields);
  }
  logger->log(level, "{}", line);
}

void LogRequest(const RequestRecord& r) {
  nlohmann::ordered_json fields = {
      {"request_id", r.request_id},
      {"transport", r.transport},
      {"peer", r.peer},
      {"policy", r.policy},
      {"params", r.policy_params},
      {"images", r.images_sent},
      {"images_requested", r.images_requested},
      {"queue_wait_s", r.queue_wait_seconds},
      {"total_s", r.total_seconds},
      {"status", absl::StatusCodeToString(r.status.code())},
  };
  if (r.has_seed) fields["seed"] = r.seed;
  if (!r.status.ok()) fields["error"] = std::string(r.status.message());
  spdlog::level::level_enum level = spdlog::level::info;
  switch (r.status.code()) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      level = spdlog::level::warn;
      break;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      level = spdlog::level::err;
      break;
    default:
      break;
  }
  Event(level, "request",
        absl::StrCat(r.policy, " x", r.images_requested, " ", absl::StatusCodeToString(r.status.code()), " in ",
                     r.total_seconds, " s"),
        fields);
}

}  // namespace argen::server::log
