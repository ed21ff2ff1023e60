// Shared helpers of the CPU backend tests: goldens and tiny checkpoints.
#pragma once

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::cpu::testing {

using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

struct LoadedBackend {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> backend;
};

// Loads a tiny Janus checkpoint (path relative to the source tree) into a CPU backend.
inline LoadedBackend LoadTinyBackend(const std::string& relative_dir, float rope_theta_override = 0.0f,
                                     model::BackendOptions options = {}) {
  LoadedBackend out;
  const std::string dir = SourceDir() + "/" + relative_dir;
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return out;
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return out;
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*config);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return out;
  out.spec = *spec;
  if (rope_theta_override > 0.0f) out.spec.stack.rope_theta = rope_theta_override;
  absl::StatusOr<std::unique_ptr<model::Backend>> backend =
      model::CreateCpuBackend(out.spec, model::CheckpointWeights(std::move(*ckpt)), options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (backend.ok()) out.backend = std::move(*backend);
  return out;
}

}  // namespace argen::cpu::testing
