// The server's log (spdlog, on stderr): startup and shutdown lines and one
// structured line per request, as text or JSON (config keys log_format,
// log_level; docs/serving.md, Logs).
//
//   text: 2026-11-30T10:15:02.123Z info request id=01J... peer=ipv4:10.0.0.7:41234 ...
//   json: {"time":"2026-11-30T10:15:02.123456Z","level":"info","event":"request","msg":"...",...}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "spdlog/common.h"
#include "spdlog/sinks/sink.h"

namespace argen::server::log {

enum class Format { kText, kJson };

absl::StatusOr<Format> ParseFormat(std::string_view text);                    // text | json
absl::StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view text);  // trace .. off

// Installs the process-wide argen logger, writing to stderr unless `sink` is
// given (tests). Until called, the logger is text at info level on stderr.
void Configure(Format format, spdlog::level::level_enum level, spdlog::sink_ptr sink = nullptr);

// One log line: `event` names what happened (startup, serving, draining,
// request, ...), `message` says it in words, `fields` are extra key/values.
void Event(spdlog::level::level_enum level, std::string_view event, std::string_view message,
           const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());

// What the per-request line reports.
struct RequestRecord {
  std::string transport;  // grpc | http
  std::string request_id;
  std::string peer;    // grpc::ServerContext::peer(), e.g. ipv4:127.0.0.1:4242
  std::string policy;  // canonical name, "invalid" when the name was not a policy
  // sparsity, n_att, n_recent, n_sink, kv_cache_dtype
  nlohmann::ordered_json policy_params = nlohmann::ordered_json::object();
  uint64_t seed = 0;
  bool has_seed = false;
  int32_t images_requested = 0;
  int32_t images_sent = 0;
  double queue_wait_seconds = 0;
  double total_seconds = 0;
  absl::Status status;
};

// Level: info for OK and for the client's own doing (invalid fields,
// cancellation, deadlines), warning for load shedding (RESOURCE_EXHAUSTED,
// UNAVAILABLE), error for server faults.
void LogRequest(const RequestRecord& record);

}  // namespace argen::server::log
