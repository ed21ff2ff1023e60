// The argen.v1.ArGen gRPC service (synchronous API: each Generate stream
// holds one gRPC thread that relays its scheduler events).
#pragma once

#include <cstdint>
#include <random>

#include "absl/synchronization/mutex.h"
#include "argen/v1/argen.grpc.pb.h"
#include "engine/engine.h"
#include "scheduler/scheduler.h"
#include "server/server_config.h"

namespace argen::server {

class ArgenService final : public v1::ArGen::Service {
 public:
  // `observer` (may be null) also counts requests rejected before they reach
  // the scheduler (invalid fields).
  ArgenService(scheduler::Scheduler* scheduler, const engine::ModelInfo& info, ServerConfig config,
               scheduler::SchedulerObserver* observer);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

 private:
  uint64_t RandomSeed();
  // A bounded label for metrics: the canonical policy name, or "invalid".
  std::string PolicyLabel(const v1::GenerateRequest& request) const;

  scheduler::Scheduler* const scheduler_;
  const engine::ModelInfo info_;
  const ServerConfig config_;
  scheduler::SchedulerObserver* const observer_;
  absl::Mutex seed_mu_;
  std::mt19937_64 seed_rng_ ABSL_GUARDED_BY(seed_mu_);
};

}  // namespace argen::server
