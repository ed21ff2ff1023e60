#include "server/server_config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/model/sampler.h"
#include "engine/model/weight_format.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "engine/vq/vq_precision.h"
#include "server/byte_size.h"
#include "yaml-cpp/yaml.h"

namespace argen::server {
namespace {

using Setter = std::function<absl::Status(ServerConfig&, const std::string&)>;

struct KeyDef {
  ConfigKey key;
  Setter set;
};

absl::Status Bad(const std::string& value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("\"", value, "\" is not ", want));
}

// An integer field reached through `field` (plain members and nested ones).
Setter IntAt(std::function<int32_t&(ServerConfig&)> field, int64_t min, int64_t max) {
  return [=](ServerConfig& c, const std::string& v) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &x) || x < min || x > max) {
      return Bad(v, absl::StrCat("an integer in [", min, ", ", max, "]"));
    }
    field(c) = static_cast<int32_t>(x);
    return absl::OkStatus();
  };
}

Setter Int(int32_t ServerConfig::*field, int64_t min, int64_t max) {
  return IntAt([field](ServerConfig& c) -> int32_t& { return c.*field; }, min, max);
}

Setter Bytes(int64_t ServerConfig::*field, int64_t min) {
  return [=](ServerConfig& c, const std::string& v) {
    absl::StatusOr<int64_t> x = ParseByteSize(v);
    if (!x.ok()) return x.status();
    if (*x < min) return Bad(v, absl::StrCat("a byte size >= ", min));
    c.*field = *x;
    return absl::OkStatus();
  };
}

Setter Text(std::string ServerConfig::*field) {
  return [=](ServerConfig& c, const std::string& v) {
    if (v.empty()) return Bad(v, "a non-empty string");
    c.*field = v;
    return absl::OkStatus();
  };
}

// A file path; empty turns the feature off.
Setter OptionalPath(std::string ServerConfig::*field) {
  return [=](ServerConfig& c, const std::string& v) {
    c.*field = std::string(absl::StripAsciiWhitespace(v));
    return absl::OkStatus();
  };
}

Setter Bool(bool ServerConfig::*field) {
  return [=](ServerConfig& c, const std::string& v) {
    const std::string x = absl::AsciiStrToLower(absl::StripAsciiWhitespace(v));
    if (x == "true" || x == "yes" || x == "on" || x == "1") {
      c.*field = true;
    } else if (x == "false" || x == "no" || x == "off" || x == "0") {
      c.*field = false;
    } else {
      return Bad(v, "true or false");
    }
    return absl::OkStatus();
  };
}

// A double in [min, max) or [min, max] checked by `ok`.
absl::StatusOr<double> ParseDouble(const std::string& v, std::function<bool(double)> ok, absl::string_view want) {
  double x = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(v), &x) || !ok(x)) return Bad(v, want);
  return x;
}

// A sampling default, checked by the same rule the engine enforces on requests.
Setter SamplingValue(std::function<float&(ServerConfig&)> field, absl::Status (*check)(double)) {
  return [=](ServerConfig& c, const std::string& v) {
    double x = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(v), &x)) return Bad(v, "a number");
    if (absl::Status s = check(x); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("\"", v, "\" ", s.message()));
    field(c) = static_cast<float>(x);
    return absl::OkStatus();
  };
}

// Seconds in [min, max] reached through `field`.
Setter SecondsAt(std::function<double&(ServerConfig&)> field, double min, double max) {
  return [=](ServerConfig& c, const std::string& v) {
    absl::StatusOr<double> x = ParseDouble(
        v, [&](double d) { return d >= min && d <= max; }, absl::StrCat("seconds in [", min, ", ", max, "]"));
    if (!x.ok()) return x.status();
    field(c) = *x;
    return absl::OkStatus();
  };
}

// A comma-separated list (a YAML sequence arrives joined with commas); empty entries dropped.
Setter List(std::vector<std::string> ServerConfig::*field) {
  return [=](ServerConfig& c, const std::string& v) {
    std::vector<std::string> items;
    for (absl::string_view item : absl::StrSplit(v, ',')) {
      item = absl::StripAsciiWhitespace(item);
      if (!item.empty()) items.emplace_back(item);
    }
    c.*field = std::move(items);
    return absl::OkStatus();
  };
}

// One family option (ServerConfig::family_options); the family checks the key when the model loads.
absl::Status SetFamilyOption(ServerConfig& c, const std::string& key, const std::string& v) {
  if (v.empty()) return Bad(v, "a non-empty string");
  c.family_options[key] = v;
  return absl::OkStatus();
}

const std::vector<KeyDef>& Keys() {
  static const auto* keys = new std::vector<KeyDef>{
      {{"model_dir",
        "checkpoint directory as the hub ships it (Janus-Pro or Lumina-mGPT: config.json, *.safetensors or "
        "pytorch_model*.bin, tokenizer.json)"},
       Text(&ServerConfig::model_dir)},
      {{"vqgan_dir",
        "Lumina-mGPT: directory of Meta's Chameleon VQGAN (vqgan.yaml, vqgan.ckpt), relative to model_dir; empty: "
        "<model_dir>/tokenizer (the family option vqgan_dir)"},
       [](ServerConfig& c, const std::string& v) { return SetFamilyOption(c, "vqgan_dir", v); }},
      {{"backend", "cpu or cuda"},
       [](ServerConfig& c, const std::string& v) {
         if (v != "cpu" && v != "cuda") return Bad(v, "cpu or cuda");
         c.backend = v;
         return absl::OkStatus();
       }},
      {{"vq_backend", "VQ image decoder: auto (the GPU with backend cuda, else the CPU), cpu or cuda"},
       [](ServerConfig& c, const std::string& v) {
         if (v != "auto" && v != "cpu" && v != "cuda") return Bad(v, "auto, cpu or cuda");
         c.vq_backend = v;
         return absl::OkStatus();
       }},
      {{"vq_precision", "GPU VQ decoder arithmetic: auto (bf16, fp32 where bf16 cannot run), bf16, tf32 or fp32"},
       [](ServerConfig& c, const std::string& v) {
         if (!vq::ParseDecoderPrecision(v).ok()) return Bad(v, "auto, bf16, tf32 or fp32");
         c.vq_precision = v;
         return absl::OkStatus();
       }},
      {{"weight_dtype",
        "the decoder layers' projections: auto (bf16 on cuda, f32 on cpu) or fp8 (e4m3 weights with a scale per "
        "channel, inputs quantized per token: half the weight bytes, fp8 tensor cores on Hopper)"},
       [](ServerConfig& c, const std::string& v) {
         if (!model::ParseWeightFormat(v).ok()) return Bad(v, "auto or fp8");
         c.weight_dtype = v;
         return absl::OkStatus();
       }},
      {{"threads", "CPU threads for the engine; 0: auto (backend cpu: every core but one, for the image path)"},
       Int(&ServerConfig::threads, 0, 4096)},
      {{"listen_address", "gRPC listen address"}, Text(&ServerConfig::listen_address)},
      {{"port", "gRPC port; 0: any free port"}, Int(&ServerConfig::port, 0, 65535)},
      {{"metrics_address", "Prometheus /metrics listen address"}, Text(&ServerConfig::metrics_address)},
      {{"metrics_port", "Prometheus /metrics port; 0: any free port; -1: off"},
       Int(&ServerConfig::metrics_port, -1, 65535)},
      {{"kv_budget_bytes",
        "KV cache budget for all running requests (e.g. 8GiB); auto: cuda the card's free memory after weights, "
        "workspaces, VQ decoder and a margin, cpu 4GiB"},
       [](ServerConfig& c, const std::string& v) {
         if (absl::StripAsciiWhitespace(v) == "auto") {
           c.kv_budget_bytes = 0;
           return absl::OkStatus();
         }
         return Bytes(&ServerConfig::kv_budget_bytes, 1)(c, v);
       }},
      {{"max_batch_rows", "most rows (2 per image) decoding at once; auto: cuda sized with the KV pool, cpu 64"},
       [](ServerConfig& c, const std::string& v) {
         if (absl::StripAsciiWhitespace(v) == "auto") {
           c.max_batch_rows = 0;
           return absl::OkStatus();
         }
         return Int(&ServerConfig::max_batch_rows, 2, 1 << 20)(c, v);
       }},
      {{"max_prefill_tokens",
        "prompt tokens one decode step may prefill (new requests join as rows free); auto: 4 x max_batch_rows; 0: no "
        "bound"},
       [](ServerConfig& c, const std::string& v) {
         if (absl::StripAsciiWhitespace(v) == "auto") {
           c.max_prefill_tokens = -1;
           return absl::OkStatus();
         }
         int64_t n = 0;
         if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n) || n < 0 || n > (int64_t{1} << 40)) {
           return Bad(v, "auto or a token count >= 0");
         }
         c.max_prefill_tokens = n;
         return absl::OkStatus();
       }},
      {{"step_log", "file for one line per decode step (interval, rows, prefill tokens); empty: off"},
       [](ServerConfig& c, const std::string& v) {
         c.step_log = std::string(absl::StripAsciiWhitespace(v));
         return absl::OkStatus();
       }},
      {{"queue_limit", "most requests waiting for admission; more: RESOURCE_EXHAUSTED"},
       Int(&ServerConfig::queue_limit, 1, 1 << 20)},
      {{"max_images_per_request", "largest num_images a request may ask for"},
       Int(&ServerConfig::max_images_per_request, 1, 4096)},
      {{"max_message_bytes", "gRPC message size limit, both directions (e.g. 64MiB)"},
       Bytes(&ServerConfig::max_message_bytes, 4096)},
      {{"progress_interval_ms", "default least time between progress events"},
       Int(&ServerConfig::progress_interval_ms, 1, 3600000)},
      {{"image_workers", "threads for VQ decode + PNG encode; auto: min(cores, 8) with backend cuda, else 1"},
       [](ServerConfig& c, const std::string& v) {
         if (absl::StripAsciiWhitespace(v) == "auto") {
           c.image_workers = 0;
           return absl::OkStatus();
         }
         return Int(&ServerConfig::image_workers, 1, 256)(c, v);
       }},
      {{"drain_timeout_s", "on SIGTERM: how long running/queued requests may finish"},
       [](ServerConfig& c, const std::string& v) {
         absl::StatusOr<double> x = ParseDouble(
             v, [](double d) { return d >= 0 && d <= 86400; }, "seconds in [0, 86400]");
         if (!x.ok()) return x.status();
         c.drain_timeout_s = *x;
         return absl::OkStatus();
       }},
      {{"log_format", "server log lines: text or json (one structured line per request)"},
       [](ServerConfig& c, const std::string& v) {
         if (v != "text" && v != "json") return Bad(v, "text or json");
         c.log_format = v;
         return absl::OkStatus();
       }},
      {{"log_level", "least log level: trace, debug, info, warning, error or off"},
       [](ServerConfig& c, const std::string& v) {
         for (const char* level : {"trace", "debug", "info", "warning", "warn", "error", "off"}) {
           if (v == level) {
             c.log_level = v;
             return absl::OkStatus();
           }
         }
         return Bad(v, "trace, debug, info, warning, error or off");
       }},
      {{"max_prompt_bytes", "longest prompt in bytes, refused before tokenizing; 0: max_prompt_tokens x 32"},
       Bytes(&ServerConfig::max_prompt_bytes, 0)},
      {{"share_prompt_kv",
        "true: the images of one request read one copy of its cond and of its uncond prompt KV (less KV per "
        "image); false: a copy per image"},
       Bool(&ServerConfig::share_prompt_kv)},
      {{"share_prompt_kv_across_requests",
        "true: running requests with the same prompt (every guidance row of one length, identical captions) "
        "read one copy of its KV, held while any of them runs; needs share_prompt_kv"},
       Bool(&ServerConfig::share_prompt_kv_across_requests)},
      {{"allow_port_sharing", "let several processes listen on the same port and metrics_port (SO_REUSEPORT)"},
       Bool(&ServerConfig::allow_port_sharing)},
      {{"stream_stall_timeout_s", "a client that accepts no stream event for this long: request cancelled"},
       SecondsAt([](ServerConfig& c) -> double& { return c.stream_stall_timeout_s; }, 0.1, 86400)},
      {{"stream_buffer_bytes", "events waiting for a slow client, per stream; more: RESOURCE_EXHAUSTED"},
       Bytes(&ServerConfig::stream_buffer_bytes, 4096)},
      {{"connections.max_concurrent_streams", "streams per client connection; 0: gRPC default (no limit)"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.connections.max_concurrent_streams; }, 0, 1 << 20)},
      {{"connections.max_threads", "gRPC threads, one per open stream; more streams: RESOURCE_EXHAUSTED; 0: no limit"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.connections.max_threads; }, 0, 1 << 20)},
      {{"connections.max_connection_idle_s", "close a connection without streams after this long; 0: never"},
       SecondsAt([](ServerConfig& c) -> double& { return c.connections.max_connection_idle_s; }, 0, 1e7)},
      {{"connections.max_connection_age_s", "ask clients to reconnect (GOAWAY) after this long; 0: never"},
       SecondsAt([](ServerConfig& c) -> double& { return c.connections.max_connection_age_s; }, 0, 1e7)},
      {{"connections.max_connection_age_grace_s", "after the GOAWAY, streams get this long; 0: no limit"},
       SecondsAt([](ServerConfig& c) -> double& { return c.connections.max_connection_age_grace_s; }, 0, 1e7)},
      {{"connections.keepalive_time_s", "ping idle connections this often; 0: gRPC default (2 h)"},
       SecondsAt([](ServerConfig& c) -> double& { return c.connections.keepalive_time_s; }, 0, 1e7)},
      {{"connections.keepalive_timeout_s", "close a connection whose ping is unanswered this long; 0: gRPC default"},
       SecondsAt([](ServerConfig& c) -> double& { return c.connections.keepalive_timeout_s; }, 0, 1e7)},
      {{"default_policy.name", "sparsity policy of requests that name none"},
       [](ServerConfig& c, const std::string& v) {
         absl::StatusOr<sparse::PolicyKind> k = sparse::ParsePolicyName(v);
         if (!k.ok()) return k.status();
         c.default_policy.kind = *k;
         return absl::OkStatus();
       }},
      {{"default_policy.sparsity", "fraction of decode KV not attended, [0, 1)"},
       [](ServerConfig& c, const std::string& v) {
         absl::StatusOr<double> x = ParseDouble(
             v, [](double d) { return d >= 0 && d < 1; }, "a number in [0, 1)");
         if (!x.ok()) return x.status();
         c.default_policy.sparsity = *x;
         return absl::OkStatus();
       }},
      {{"default_policy.n_att", "decode keys attended per step; 0: from sparsity"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_policy.n_att; }, 0, 1 << 24)},
      {{"default_policy.n_recent", "diagonal recent window N_r; 0: the model family's default (docs/policies.md)"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_policy.n_recent; }, 0, 1 << 24)},
      {{"default_policy.n_sink", "sink tokens; -1: the policy's default"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_policy.n_sink; }, -1, 1 << 24)},
      {{"default_policy.kv_cache_dtype",
        "KV cache storage of requests that set none: auto (bf16 on cuda, f32 on cpu) or fp8 (e4m3 with per-vector "
        "scales: about half the KV bytes on cuda; cpu emulates it without saving memory)"},
       [](ServerConfig& c, const std::string& v) {
         const std::string value(absl::StripAsciiWhitespace(v));
         if (value.empty() || !sparse::ParseKvFormat(value).ok()) return Bad(v, "auto or fp8 (also fp8_e4m3)");
         c.default_policy.kv_format = *sparse::ParseKvFormat(value);
         return absl::OkStatus();
       }},
      {{"default_decoding.parallel_window",
        "parallel decoding of requests that set none: image row r+1 starts once row r has this many tokens "
        "(dense policy only); 0: off"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_parallel_window; }, 0, 1 << 16)},
      {{"default_decoding.speculative_window",
        "speculative Jacobi decoding of requests that set none (exact): tokens verified per step, in [0, 32] "
        "(dense policy, not with parallel decoding); 0: off"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_speculative_window; }, 0,
             engine::kMaxSpeculativeWindow)},
      {{"default_sampling.cfg_weight", "classifier-free guidance weight, [0, 100]"},
       SamplingValue([](ServerConfig& c) -> float& { return c.default_sampling.cfg_weight; }, model::CheckCfgWeight)},
      {{"default_sampling.temperature", "sampling temperature, [0, 100]; 0: greedy"},
       SamplingValue([](ServerConfig& c) -> float& { return c.default_sampling.temperature; },
                     model::CheckTemperature)},
      {{"default_sampling.top_k", "top-k; 0: off"},
       IntAt([](ServerConfig& c) -> int32_t& { return c.default_sampling.top_k; }, 0, 1 << 24)},
      {{"default_sampling.top_p", "top-p in (0, 1]; 1: off"},
       SamplingValue([](ServerConfig& c) -> float& { return c.default_sampling.top_p; }, model::CheckTopP)},
      {{"http_address", "OpenAI-compatible HTTP API listen address"}, Text(&ServerConfig::http_address)},
      {{"http_port",
        "HTTP API port (POST /v1/images/generations, /v1/models, /health, /ready); 0: any free port; -1: off"},
       Int(&ServerConfig::http_port, -1, 65535)},
      {{"http_threads", "HTTP connections served at once (each open connection holds one)"},
       Int(&ServerConfig::http_threads, 1, 4096)},
      {{"http_max_body_bytes", "largest HTTP request body; larger: 413 (e.g. 1MiB)"},
       Bytes(&ServerConfig::http_max_body_bytes, 1024)},
      {{"http.allowed_origins",
        "origins (scheme://host:port) whose browser pages may call the HTTP API (CORS), comma-separated or a "
        "YAML list; *: any; empty: none"},
       List(&ServerConfig::http_allowed_origins)},
      {{"http.strict_fields", "true: unknown HTTP request fields are 400; false: ignored with a Warning header"},
       Bool(&ServerConfig::http_strict_fields)},
      {{"served_model_names",
        "other names the HTTP API accepts for the model in `model` and lists in /v1/models (e.g. dall-e-3), "
        "comma-separated or a YAML list; flag --served_model_name NAME adds one"},
       List(&ServerConfig::served_model_names)},
      {{"priority_aging_s", "a queued request rises one priority level per this many seconds waited"},
       [](ServerConfig& c, const std::string& v) {
         absl::StatusOr<double> x = ParseDouble(
             v, [](double d) { return d > 0 && d <= 86400; }, "seconds in (0, 86400]");
         if (!x.ok()) return x.status();
         c.priority_aging_s = *x;
         return absl::OkStatus();
       }},
      {{"tls.cert_file", "PEM server certificate (+ chain) for gRPC and HTTP; empty: plaintext"},
       OptionalPath(&ServerConfig::tls_cert_file)},
      {{"tls.key_file", "PEM private key of tls.cert_file"}, OptionalPath(&ServerConfig::tls_key_file)},
      {{"tls.client_ca_file", "PEM CA(s) for mutual TLS: clients must present a certificate it signed; empty: off"},
       OptionalPath(&ServerConfig::tls_client_ca_file)},
      {{"auth.api_keys_file", "file of hashed API keys (docs/serving.md); empty: no keys needed"},
       OptionalPath(&ServerConfig::api_keys_file)},
      {{"auth.open_health", "true: HTTP /health and /ready need no key"}, Bool(&ServerConfig::open_health)},
      {{"auth.open_metrics", "true: /metrics needs no key"}, Bool(&ServerConfig::open_metrics)},
  };
  return *keys;
}

std::string KnownKeys() {
  std::vector<std::string> names;
  for (const KeyDef& k : Keys()) names.push_back(k.key.name);
  return absl::StrJoin(names, ", ");
}

// Flattens a YAML mapping into dotted keys; sequences and deeper nesting are errors.
absl::Status Flatten(const YAML::Node& node, const std::string& prefix, const std::string& source,
                     std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& item : node) {
    std::string key = item.first.as<std::string>();
    const std::string full = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& value = item.second;
    if (value.IsMap()) {
      if (!prefix.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": key '", full, "': sections nest one level only"));
      }
      if (absl::Status s = Flatten(value, full, source, out); !s.ok()) return s;
    } else if (value.IsScalar()) {
      out.emplace_back(full, value.Scalar());
    } else if (value.IsSequence()) {  // a list key: its items joined with commas
      std::vector<std::string> items;
      for (const auto& v : value) {
        if (!v.IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(source, ": key '", full, "': list items must be single values"));
        }
        items.push_back(v.Scalar());
      }
      out.emplace_back(full, absl::StrJoin(items, ","));
    } else if (value.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": key '", full, "' has no value"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(source, ": key '", full, "' must be a single value, not a list"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<ConfigKey>& ConfigKeys() {
  static const auto* keys = [] {
    auto* v = new std::vector<ConfigKey>;
    for (const KeyDef& k : Keys()) v->push_back(k.key);
    return v;
  }();
  return *keys;
}

absl::Status SetConfigValue(ServerConfig& config, const std::string& key, const std::string& value) {
  // family_options.KEY (the YAML section family_options, or --family_option KEY=VALUE): any KEY here; the
  // model's family refuses one it does not take.
  if (absl::StartsWith(key, kFamilyOptionsPrefix) && key.size() > sizeof(kFamilyOptionsPrefix) - 1) {
    absl::Status s = SetFamilyOption(config, key.substr(sizeof(kFamilyOptionsPrefix) - 1), value);
    if (s.ok()) {
      config.keys_set.push_back(key);
      return s;
    }
    return absl::InvalidArgumentError(absl::StrCat("key '", key, "': ", s.message()));
  }
  if (key == "family_options") {
    return absl::InvalidArgumentError(absl::StrCat(
        "key 'family_options': \"", value,
        "\" is not a family option: give a mapping of option names to values (YAML) or --family_option KEY=VALUE"));
  }
  for (const KeyDef& k : Keys()) {
    if (key != k.key.name) continue;
    absl::Status s = k.set(config, value);
    if (s.ok()) {
      config.keys_set.push_back(key);
      return s;
    }
    return absl::InvalidArgumentError(absl::StrCat("key '", key, "': ", s.message()));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown key '", key, "' (known keys: ", KnownKeys(), ")"));
}

bool ServerConfig::WasSet(std::string_view key) const {
  return std::find(keys_set.begin(), keys_set.end(), key) != keys_set.end();
}

void ApplyModelSamplingDefaults(ServerConfig& config, const engine::SamplingParams& model_defaults) {
  // A key counts as set when the YAML or a flag named it, or when code changed
  // it from the built-in default (servers made in-process, e.g. tests).
  const engine::SamplingParams built_in;
  engine::SamplingParams& d = config.default_sampling;
  auto unset = [&](const char* key, bool is_built_in) { return is_built_in && !config.WasSet(key); };
  if (unset("default_sampling.cfg_weight", d.cfg_weight == built_in.cfg_weight))
    d.cfg_weight = model_defaults.cfg_weight;
  if (unset("default_sampling.temperature", d.temperature == built_in.temperature)) {
    d.temperature = model_defaults.temperature;
  }
  if (unset("default_sampling.top_k", d.top_k == built_in.top_k)) d.top_k = model_defaults.top_k;
  if (unset("default_sampling.top_p", d.top_p == built_in.top_p)) d.top_p = model_defaults.top_p;
}

absl::Status ApplyConfigYaml(ServerConfig& config, const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();  // empty file: all defaults
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": must be a mapping of key: value"));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  try {
    if (absl::Status s = Flatten(root, "", source, entries); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
  for (const auto& [key, value] : entries) {
    if (absl::Status s = SetConfigValue(config, key, value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

int64_t ResolvedKvBudget(const ServerConfig& config) {
  if (config.kv_budget_bytes > 0) return config.kv_budget_bytes;
  return config.backend == "cuda" ? 0 : int64_t{4} << 30;
}

int32_t ResolvedMaxBatchRows(const ServerConfig& config) {
  if (config.max_batch_rows > 0) return config.max_batch_rows;
  return config.backend == "cuda" ? 0 : 64;
}

int64_t ResolvedMaxPrefillTokens(const ServerConfig& config, int32_t engine_max_batch_rows) {
  if (config.max_prefill_tokens >= 0) return config.max_prefill_tokens;
  return 4 * int64_t{engine_max_batch_rows};
}

int32_t ResolvedImageWorkers(const ServerConfig& config) {
  if (config.image_workers > 0) return config.image_workers;
  if (config.backend != "cuda") return 1;
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int32_t>(std::clamp<unsigned>(cores, 1, 8));
}

int32_t ResolvedThreads(const ServerConfig& config, unsigned cores) {
  if (config.threads > 0 || config.backend == "cuda") return config.threads;
  return static_cast<int32_t>(cores > 1 ? cores - 1 : 1);
}

int32_t ResolvedThreads(const ServerConfig& config) {
  return ResolvedThreads(config, std::thread::hardware_concurrency());
}

absl::Status ValidateConfig(const ServerConfig& config) {
  if (config.model_dir.empty()) {
    return absl::InvalidArgumentError(
        "key 'model_dir': required (a Janus-Pro or Lumina-mGPT checkpoint directory; set it in the config file "
        "or with --model_dir)");
  }
  if (config.port != 0 && config.port == config.metrics_port && config.listen_address == config.metrics_address) {
    return absl::InvalidArgumentError(
        absl::StrCat("key 'metrics_port': ", config.metrics_port, " is also the gRPC port"));
  }
  if (config.http_port > 0 && (config.http_port == config.port || config.http_port == config.metrics_port)) {
    return absl::InvalidArgumentError(absl::StrCat("key 'http_port': ", config.http_port, " is also the ",
                                                   config.http_port == config.port ? "gRPC port" : "metrics port"));
  }
  if (config.share_prompt_kv_across_requests && !config.share_prompt_kv) {
    return absl::InvalidArgumentError(
        "key 'share_prompt_kv_across_requests': needs share_prompt_kv: true (sharing across requests includes the "
        "images of one request)");
  }
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return absl::InvalidArgumentError("keys 'tls.cert_file' and 'tls.key_file': set both (TLS) or neither (plaintext)");
  }
  if (!config.tls_client_ca_file.empty() && config.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("key 'tls.client_ca_file': mutual TLS needs tls.cert_file and tls.key_file too");
  }
  return absl::OkStatus();
}

// ParseCommandLine and ConfigHelp: server/command_line.cc.

absl::StatusOr<ServerConfig> LoadServerConfig(const CommandLine& command_line) {
  ServerConfig config;
  if (!command_line.config_path.empty()) {
    std::ifstream in(command_line.config_path);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("config file '", command_line.config_path, "' cannot be read"));
    }
    std::stringstream text;
    text << in.rdbuf();
    if (absl::Status s = ApplyConfigYaml(config, text.str(), command_line.config_path); !s.ok()) {
      return s;
    }
  }
  for (const auto& [key, value] : command_line.overrides) {
    if (absl::Status s = SetConfigValue(config, key, value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", key, ": ", s.message()));
    }
  }
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  return config;
}

}  // namespace argen::server
