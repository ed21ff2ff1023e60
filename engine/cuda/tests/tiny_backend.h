// A backend over one of the tiny Janus-layout checkpoints of
// tests/goldens/tiny (found through ARGEN_SOURCE_DIR), on the device or on
// the CPU (the reference), for the gpu tests that compare the two.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "gtest/gtest.h"

namespace argen::cuda::testing {

struct TinyOptions {
  std::string checkpoint = "tiny-gqa-sharded";  // a folder of tests/goldens/tiny
  bool cuda = true;
  int32_t max_batch_rows = 8;
  int64_t kv_budget_bytes = int64_t{64} << 20;
};

// Null (with a test failure recorded) when the checkpoint or backend fails.
inline std::unique_ptr<model::Backend> TinyBackend(const TinyOptions& o, model::ModelSpec* spec_out = nullptr) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/goldens/tiny/" + o.checkpoint;
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*config);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(spec.ok() && ckpt.ok());
  if (!spec.ok() || !ckpt.ok()) return nullptr;
  if (spec_out != nullptr) *spec_out = *spec;
  model::BackendOptions options;
  options.max_batch_rows = o.max_batch_rows;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = o.kv_budget_bytes;
  auto backend = o.cuda ? model::CreateCudaBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options)
                        : model::CreateCpuBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

}  // namespace argen::cuda::testing
