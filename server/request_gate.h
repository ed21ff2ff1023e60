// What both front ends (gRPC ArgenService and the HTTP API) do with a
// Generate request before the scheduler, so they behave the same: check the
// caller's API key and right, validate and map the request through
// server/request_mapping (one set of ranges and messages for both), resolve
// its priority against the key's cap, take the key's limits, submit.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "argen/v1/argen.pb.h"
#include "engine/engine.h"
#include "scheduler/scheduler.h"
#include "server/auth.h"
#include "server/key_limits.h"
#include "server/server_config.h"

namespace argen::server {

class PrometheusMetrics;

struct Submission {
  std::shared_ptr<scheduler::RequestHandle> handle;
  KeyLease lease;                        // call lease.Started() on the Started event
  engine::GenerationRequest generation;  // as submitted (defaults applied): logs, image metadata
};

class RequestGate {
 public:
  // `keys` (outlives the gate) null: no API keys, every caller allowed.
  // `metrics` may be null.
  RequestGate(scheduler::Scheduler* scheduler, const engine::ModelInfo& info, const ServerConfig& config,
              const ApiKeys* keys, PrometheusMetrics* metrics);

  // The caller's key (null when keys are off) from its authorization value.
  absl::StatusOr<const ApiKey*> Authorize(absl::string_view authorization, Right right);

  // Validates (errors name the GenerateRequest field; the prompt's byte
  // bound before anything else), then submits. Every outcome that is not a
  // handle is counted in the request metrics.
  absl::StatusOr<Submission> Submit(const ApiKey* key, const v1::GenerateRequest& request, absl::Time deadline,
                                    scheduler::ImageEncoder encoder = nullptr);

  bool keys_enabled() const { return keys_ != nullptr; }
  const engine::ModelInfo& info() const { return info_; }
  const ServerConfig& config() const { return config_; }
  PrometheusMetrics* metrics() const { return metrics_; }
  scheduler::Scheduler& scheduler() const { return *scheduler_; }

  // A bounded label for metrics: the canonical policy name, or "invalid".
  std::string PolicyLabel(const v1::GenerateRequest& request) const;

 private:
  uint64_t RandomSeed();

  scheduler::Scheduler* const scheduler_;
  const engine::ModelInfo info_;
  const ServerConfig config_;
  const ApiKeys* const keys_;
  PrometheusMetrics* const metrics_;
  const int64_t max_prompt_bytes_;  // server/prompt_limits.h
  KeyLimiter limiter_;
  absl::Mutex seed_mu_;
  std::mt19937_64 seed_rng_ ABSL_GUARDED_BY(seed_mu_);
};

// The scheduler priority of `requested` for `key` (null: no keys): unset is
// normal, or the key's cap when lower; above the cap is PERMISSION_DENIED.
absl::StatusOr<scheduler::Priority> ResolvePriority(v1::Priority requested, const ApiKey* key);

}  // namespace argen::server
