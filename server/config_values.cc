#include "server/config_values.h"

#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/sparse/policy_params.h"

namespace argen::server {
namespace {

using Reader = std::function<std::string(const ServerConfig&)>;

template <typename T>
std::string Text(const T& v) {
  return absl::StrCat(v);
}

// 4294967296 -> "4GiB"; sizes that are no whole binary unit stay in bytes.
std::string Bytes(int64_t v) {
  for (auto [unit, shift] : {std::pair{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}}) {
    if (v > 0 && v % (int64_t{1} << shift) == 0) return absl::StrCat(v >> shift, unit);
  }
  return absl::StrCat(v);
}

const std::map<std::string, Reader, std::less<>>& Readers() {
  static const auto* readers = new std::map<std::string, Reader, std::less<>>{
      {"model_dir", [](const ServerConfig& c) { return c.model_dir; }},
      {"vqgan_dir",
       [](const ServerConfig& c) {
         auto it = c.family_options.find("vqgan_dir");
         return it == c.family_options.end() ? std::string() : it->second;
       }},
      {"backend", [](const ServerConfig& c) { return c.backend; }},
      {"vq_backend", [](const ServerConfig& c) { return c.vq_backend; }},
      {"vq_precision", [](const ServerConfig& c) { return c.vq_precision; }},
      {"weight_dtype", [](const ServerConfig& c) { return c.weight_dtype; }},
      {"threads", [](const ServerConfig& c) { return Text(c.threads); }},
      {"listen_address", [](const ServerConfig& c) { return c.listen_address; }},
      {"port", [](const ServerConfig& c) { return Text(c.port); }},
      {"metrics_address", [](const ServerConfig& c) { return c.metrics_address; }},
      {"metrics_port", [](const ServerConfig& c) { return Text(c.metrics_port); }},
      {"kv_budget_bytes",
       [](const ServerConfig& c) { return c.kv_budget_bytes > 0 ? Bytes(c.kv_budget_bytes) : std::string("auto"); }},
      {"max_batch_rows",
       [](const ServerConfig& c) { return c.max_batch_rows > 0 ? Text(c.max_batch_rows) : std::string("auto"); }},
      {"max_prefill_tokens",
       [](const ServerConfig& c) {
         return c.max_prefill_tokens >= 0 ? Text(c.max_prefill_tokens) : std::string("auto");
       }},
      {"step_log", [](const ServerConfig& c) { return c.step_log; }},
      {"queue_limit", [](const ServerConfig& c) { return Text(c.queue_limit); }},
      {"max_images_per_request", [](const ServerConfig& c) { return Text(c.max_images_per_request); }},
      {"max_message_bytes", [](const ServerConfig& c) { return Bytes(c.max_message_bytes); }},
      {"progress_interval_ms", [](const ServerConfig& c) { return Text(c.progress_interval_ms); }},
      {"image_workers",
       [](const ServerConfig& c) { return c.image_workers == 0 ? std::string("auto") : Text(c.image_workers); }},
      {"drain_timeout_s", [](const ServerConfig& c) { return Text(c.drain_timeout_s); }},
      {"http_address", [](const ServerConfig& c) { return c.http_address; }},
      {"http_port", [](const ServerConfig& c) { return Text(c.http_port); }},
      {"http_threads", [](const ServerConfig& c) { return Text(c.http_threads); }},
      {"http_max_body_bytes", [](const ServerConfig& c) { return Bytes(c.http_max_body_bytes); }},
      {"http.allowed_origins", [](const ServerConfig& c) { return absl::StrJoin(c.http_allowed_origins, ","); }},
      {"http.strict_fields",
       [](const ServerConfig& c) { return std::string(c.http_strict_fields ? "true" : "false"); }},
      {"served_model_names", [](const ServerConfig& c) { return absl::StrJoin(c.served_model_names, ","); }},
      {"priority_aging_s", [](const ServerConfig& c) { return Text(c.priority_aging_s); }},
      {"tls.cert_file", [](const ServerConfig& c) { return c.tls_cert_file; }},
      {"tls.key_file", [](const ServerConfig& c) { return c.tls_key_file; }},
      {"tls.client_ca_file", [](const ServerConfig& c) { return c.tls_client_ca_file; }},
      {"auth.api_keys_file", [](const ServerConfig& c) { return c.api_keys_file; }},
      {"auth.open_health", [](const ServerConfig& c) { return std::string(c.open_health ? "true" : "false"); }},
      {"auth.open_metrics", [](const ServerConfig& c) { return std::string(c.open_metrics ? "true" : "false"); }},
      {"log_format", [](const ServerConfig& c) { return c.log_format; }},
      {"log_level", [](const ServerConfig& c) { return c.log_level; }},
      {"max_prompt_bytes", [](const ServerConfig& c) { return Bytes(c.max_prompt_bytes); }},
      {"share_prompt_kv", [](const ServerConfig& c) { return std::string(c.share_prompt_kv ? "true" : "false"); }},
      {"share_prompt_kv_across_requests",
       [](const ServerConfig& c) { return std::string(c.share_prompt_kv_across_requests ? "true" : "false"); }},
      {"allow_port_sharing",
       [](const ServerConfig& c) { return std::string(c.allow_port_sharing ? "true" : "false"); }},
      {"stream_stall_timeout_s", [](const ServerConfig& c) { return Text(c.stream_stall_timeout_s); }},
      {"stream_buffer_bytes", [](const ServerConfig& c) { return Bytes(c.stream_buffer_bytes); }},
      {"connections.max_concurrent_streams",
       [](const ServerConfig& c) { return Text(c.connections.max_concurrent_streams); }},
      {"connections.max_threads", [](const ServerConfig& c) { return Text(c.connections.max_threads); }},
      {"connections.max_connection_idle_s",
       [](const ServerConfig& c) { return Text(c.connections.max_connection_idle_s); }},
      {"connections.max_connection_age_s",
       [](const ServerConfig& c) { return Text(c.connections.max_connection_age_s); }},
      {"connections.max_connection_age_grace_s",
       [](const ServerConfig& c) { return Text(c.connections.max_connection_age_grace_s); }},
      {"connections.keepalive_time_s", [](const ServerConfig& c) { return Text(c.connections.keepalive_time_s); }},
      {"connections.keepalive_timeout_s",
       [](const ServerConfig& c) { return Text(c.connections.keepalive_timeout_s); }},
      {"default_policy.name",
       [](const ServerConfig& c) { return std::string(sparse::PolicyName(c.default_policy.kind)); }},
      {"default_policy.sparsity", [](const ServerConfig& c) { return Text(c.default_policy.sparsity); }},
      {"default_policy.n_att", [](const ServerConfig& c) { return Text(c.default_policy.n_att); }},
      {"default_policy.n_recent", [](const ServerConfig& c) { return Text(c.default_policy.n_recent); }},
      {"default_policy.n_sink", [](const ServerConfig& c) { return Text(c.default_policy.n_sink); }},
      {"default_policy.kv_cache_dtype",
       [](const ServerConfig& c) { return std::string(sparse::KvFormatName(c.default_policy.kv_format)); }},
      {"default_decoding.parallel_window", [](const ServerConfig& c) { return Text(c.default_parallel_window); }},
      {"default_decoding.speculative_window", [](const ServerConfig& c) { return Text(c.default_speculative_window); }},
      {"default_sampling.cfg_weight", [](const ServerConfig& c) { return Text(c.default_sampling.cfg_weight); }},
      {"default_sampling.temperature", [](const ServerConfig& c) { return Text(c.default_sampling.temperature); }},
      {"default_sampling.top_k", [](const ServerConfig& c) { return Text(c.default_sampling.top_k); }},
      {"default_sampling.top_p", [](const ServerConfig& c) { return Text(c.default_sampling.top_p); }},
  };
  return *readers;
}

}  // namespace

std::optional<std::string> ConfigValueText(const ServerConfig& config, std::string_view key) {
  auto it = Readers().find(key);
  if (it == Readers().end()) return std::nullopt;
  return it->second(config);
}

}  // namespace argen::server
