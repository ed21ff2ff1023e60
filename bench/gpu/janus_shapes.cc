#include "bench/gpu/janus_shapes.h"

#include "engine/models/janus/janus_shapes.h"
#include "engine/models/janus/janus_spec.h"

namespace argen::bench {

absl::StatusOr<model::ModelSpec> JanusSpec(const std::string& name) {
  absl::StatusOr<janus::JanusConfig> config = janus::PublishedJanusConfig(name);
  if (!config.ok()) return absl::InvalidArgumentError("--model: expected 1b or 7b, got " + name);
  return janus::JanusSpec(*config);
}

}  // namespace argen::bench
