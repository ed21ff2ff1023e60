// The sweep over the batch runner (tools/runner/batch_runner.h): every
// (configuration, prompt) pair is one engine request of images_per_prompt
// images. Requests are admitted while the running rows stay within
// max_batch_rows, finished groups are decoded and written by the runner's
// worker threads through an ImageSink, and new requests join at once
// (continuous batching), so the batch stays full across configuration
// boundaries. Policies may mix in a batch: a group's tokens do not depend on
// its batch neighbours.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "tools/sweep/image_sink.h"
#include "tools/sweep/manifest.h"
#include "tools/sweep/prompt_set.h"
#include "tools/sweep/sweep_grid.h"

namespace argen::sweep {

struct WorkItem {
  const SweepConfig* config = nullptr;
  const BenchmarkPrompt* prompt = nullptr;
};

struct RunSettings {
  std::string out_dir;
  int32_t images_per_prompt = 4;
  int32_t max_batch_rows = 256;
  uint64_t seed = 0;                                     // prompt p: seed + p, the same for every configuration
  engine::SamplingParams sampling;                       // its seed is replaced per prompt
  std::string negative_prompt;                           // every request's ("": the family's)
  int32_t n_recent = 0;                                  // diagonal policies' N_r (--n-recent); 0: the policy's default
  int32_t width = 0, height = 0;                         // the image size (--size); 0, 0: the model's default
  sparse::KvFormat kv_format = sparse::KvFormat::kAuto;  // every request's KV storage (--kv-cache-dtype)
  // A class-conditional model's classes (LlamaGen c2i; ModelInfo::num_classes): prompt p asks for
  // class p mod num_classes and sends no caption (its text stays in the manifest). 0: a text model.
  int32_t num_classes = 0;
  // No request is admitted at or after this time; running ones finish and are
  // written (--deadline-seconds). Unset: no deadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct SweepOutcome {
  int64_t finished = 0;     // requests run to the end and written
  int64_t left = 0;         // requests not admitted because of the deadline
  int64_t peak_queued = 0;  // most finished requests waiting for a writer at once
};

// A work item's KV storage: its entry's own ("dense@fp8"), else the sweep's
// (--kv-cache-dtype).
sparse::KvFormat KvFormatOf(const WorkItem& item, const RunSettings& settings);

// The class a class-conditional sweep's prompt `prompt_index` asks for
// (RunSettings::num_classes); -1 for a text model.
int32_t ClassOf(int32_t prompt_index, const RunSettings& settings);

// The request of one work item (also used to validate configurations).
// RunSweep refuses to run a request the engine resolved to another KV format.
engine::GenerationRequest MakeRequest(const WorkItem& item, const RunSettings& settings);

// Runs every item (in order of admission), writing PNGs and manifest lines
// (in finishing order) as `output` says, until the deadline if one is set.
// Progress (a line per finished configuration, a heartbeat every 30 s) goes
// to stderr. An error names the configuration and prompt it concerns.
absl::StatusOr<SweepOutcome> RunSweep(engine::Engine& engine, const std::vector<WorkItem>& items,
                                      const RunSettings& settings, const SinkOptions& output, ManifestWriter& manifest);

}  // namespace argen::sweep
