// argen_server configuration: a YAML file (configs/argen.yaml documents every
// key) with command-line overrides using the same key names
// (--kv_budget_bytes=8GiB, --default_policy.name=diagonal). Unknown keys and
// bad values are errors naming the key and where it came from.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/sparse/policy_params.h"

namespace argen::server {

// gRPC transport limits (config section `connections`); 0 means gRPC's default.
struct ConnectionLimits {
  int32_t max_concurrent_streams = 256;   // per connection (HTTP/2 SETTINGS)
  int32_t max_threads = 512;              // sync-server threads: one per open stream
  double max_connection_idle_s = 0;       // close connections idle this long; 0: never
  double max_connection_age_s = 0;        // GOAWAY connections older than this; 0: never
  double max_connection_age_grace_s = 0;  // then wait this long for their streams; 0: forever
  double keepalive_time_s = 60;           // ping an idle connection this often
  double keepalive_timeout_s = 20;        // close it when a ping is not answered in time
};

struct ServerConfig {
  std::string model_dir;  // required
  // Options only the model's family understands, by name (engine::EngineOptions::family_options;
  // the family refuses a key it does not take): YAML section family_options, flag
  // --family_option KEY=VALUE, and Lumina-mGPT's vqgan_dir also as key / flag vqgan_dir.
  std::map<std::string, std::string> family_options;
  std::string backend = "cpu";        // cpu | cuda
  std::string vq_backend = "auto";    // auto | cpu | cuda: the VQ image decoder (auto: cuda with backend cuda)
  std::string vq_precision = "auto";  // auto | bf16 | tf32 | fp32: the GPU VQ decoder's arithmetic
  std::string weight_dtype = "auto";  // auto | fp8: the decoder layers' projections (engine/model/weight_format.h)
  int32_t threads = 0;                // CPU threads for the engine; 0: auto (ResolvedThreads)
  std::string listen_address = "0.0.0.0";
  int32_t port = 50051;  // 0: any free port
  std::string metrics_address = "0.0.0.0";
  int32_t metrics_port = 9464;      // 0: any free port; -1: no metrics endpoint
  int64_t kv_budget_bytes = 0;      // 0: auto (ResolvedKvBudget)
  int32_t max_batch_rows = 0;       // 0: auto (ResolvedMaxBatchRows)
  int64_t max_prefill_tokens = -1;  // prompt tokens one step prefills; -1: auto; 0: no bound
  std::string step_log;             // one line per decode step to this file; empty: off
  int32_t queue_limit = 64;
  int32_t max_images_per_request = 16;
  bool share_prompt_kv = true;  // a request's images read one copy of each prompt's KV
  // Requests with the same prompt (every guidance row of one length) read one copy of its KV.
  bool share_prompt_kv_across_requests = false;
  int64_t max_message_bytes = int64_t{64} << 20;
  int32_t progress_interval_ms = 250;
  int32_t image_workers = 0;  // 0: auto (ResolvedImageWorkers)
  double drain_timeout_s = 60;
  std::string log_format = "text";  // text | json
  std::string log_level = "info";   // trace | debug | info | warning | error | off
  // Hardening (docs/reliability.md).
  int64_t max_prompt_bytes = 0;                     // 0: max_prompt_tokens x 32 (server/prompt_limits.h)
  bool allow_port_sharing = false;                  // SO_REUSEPORT on the gRPC and metrics ports
  double stream_stall_timeout_s = 30;               // a stream write blocked this long: request cancelled
  int64_t stream_buffer_bytes = int64_t{32} << 20;  // events waiting for a slow client, per stream
  ConnectionLimits connections;
  sparse::PolicyParams default_policy;  // dense unless configured
  engine::SamplingParams default_sampling;
  // default_decoding.parallel_window: a request's parallel_window when it sets none (0: off).
  int32_t default_parallel_window = 0;
  // default_decoding.speculative_window: a request's speculative_window when
  // it sets none and decodes dense, without parallel decoding (0: off).
  int32_t default_speculative_window = 0;
  // The OpenAI-compatible HTTP API (server/http_images_api.h).
  std::string http_address = "0.0.0.0";
  int32_t http_port = -1;     // 0: any free port; -1: off
  int32_t http_threads = 32;  // HTTP connections served at once
  int64_t http_max_body_bytes = int64_t{1} << 20;
  // Origins whose browser pages may call the HTTP API (CORS); "*": any; empty: none.
  std::vector<std::string> http_allowed_origins;
  // Unknown request fields: 400 (true) or ignored with a Warning header (false).
  bool http_strict_fields = false;
  // Other names the HTTP API answers to for the model (`model`, /v1/models),
  // e.g. dall-e-3 for apps that hard-code one.
  std::vector<std::string> served_model_names;
  double priority_aging_s = 10;  // a queued request rises one priority level per this wait
  // TLS for gRPC and HTTP (server/tls_config.h); all empty: plaintext.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  // API keys (server/auth.h); empty: no keys, every caller allowed.
  std::string api_keys_file;
  bool open_health = true;   // HTTP /health and /ready need no key
  bool open_metrics = true;  // /metrics needs no key
  // Every key the YAML file or a flag set (SetConfigValue), in order.
  std::vector<std::string> keys_set;
  bool WasSet(std::string_view key) const;
};

// The model family's sampling defaults (engine::ModelInfo::default_sampling)
// for each default_sampling.* key the config did not set: e.g. Lumina-mGPT's
// cfg 4 and top-k 2000 unless the YAML or a flag says otherwise.
void ApplyModelSamplingDefaults(ServerConfig& config, const engine::SamplingParams& model_defaults);

// Every key with a one-line meaning, in file order (for --help and docs).
struct ConfigKey {
  const char* name;
  const char* meaning;
};
const std::vector<ConfigKey>& ConfigKeys();

// The keys of family options: family_options.KEY (the YAML section
// family_options; the flag --family_option KEY=VALUE).
inline constexpr char kFamilyOptionsPrefix[] = "family_options.";

// Sets one dotted key from its text form; errors name the key.
absl::Status SetConfigValue(ServerConfig& config, const std::string& key, const std::string& value);

// Parses YAML text (a mapping, sections nested one level) onto `config`.
// `source` names the file in error messages.
absl::Status ApplyConfigYaml(ServerConfig& config, const std::string& yaml_text, const std::string& source);

// image_workers with "auto" resolved: backend cuda min(cores, 8) (the GPU decodes
// in milliseconds; PNG encoding on host threads is then the image path's
// bound), else 1 (the CPU VQ decoder uses every core for one image).
int32_t ResolvedImageWorkers(const ServerConfig& config);

// threads with 0 (auto) resolved for the engine: backend cpu, every core but
// one (at least 1): the image path (VQ decode, PNG and preview encoding)
// needs a core of its own, or streamed partial images arrive late (issue
// 34); backend cuda 0 (the backend's own choice). `cores`: the machine's.
int32_t ResolvedThreads(const ServerConfig& config, unsigned cores);
int32_t ResolvedThreads(const ServerConfig& config);  // with this machine's cores

// kv_budget_bytes with "auto" resolved for the engine: backend cpu 4 GiB, backend
// cuda 0 (the engine sizes the pool from the card's free memory).
int64_t ResolvedKvBudget(const ServerConfig& config);
// max_batch_rows with "auto" resolved for the engine: backend cpu 64, backend cuda
// 0 (sized with the pool, engine/cuda/pool_sizing.h).
int32_t ResolvedMaxBatchRows(const ServerConfig& config);
// max_prefill_tokens with "auto" resolved: 4 x the engine's max_batch_rows (a
// step that prefills then costs a few decode steps at full batch).
int64_t ResolvedMaxPrefillTokens(const ServerConfig& config, int32_t engine_max_batch_rows);

// Cross-field checks after everything is applied (model_dir set, ...).
absl::Status ValidateConfig(const ServerConfig& config);

struct CommandLine {
  std::string config_path;                                     // --config
  std::vector<std::pair<std::string, std::string>> overrides;  // --key=value, in order
  bool help = false;
  bool version = false;
};
// On CLI11 (server/command_line.cc). Errors: "unknown flag --x (...)", "--port:
// 1 required VALUE missing"; --help and --version set their fields.
absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv);

// The whole recipe: file (when given), then overrides, then validation.
absl::StatusOr<ServerConfig> LoadServerConfig(const CommandLine& command_line);

// The --help text: every key with its meaning and default.
std::string ConfigHelp();

}  // namespace argen::server
