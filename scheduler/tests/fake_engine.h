// A deterministic engine::Engine double for scheduler and server tests. It
// keeps the engine contract (the real request rules of engine/request_rules.h
// in Prepare, one token per image per Step, prefill of newly added groups in
// the next Step, KV reserved at Add and freed at Remove, CanAdd exact, one
// calling thread for the stepping API) and records what the scheduler did so
// tests can assert on it. Tokens and pixels are pure functions of the seed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace argen::scheduler::testing {

struct FakeEngineOptions {
  int32_t token_grid = 4;  // image_tokens = token_grid^2
  int32_t image_size = 8;  // pixels per side of decoded images
  int32_t image_vocab = 64;
  int64_t kv_bytes_per_token_row = 1000;
  int32_t max_prompt_tokens = 64;
  // The limits it reports and enforces (the engine owns them).
  int64_t kv_budget_bytes = int64_t{1} << 24;
  int32_t max_batch_rows = 64;
  int32_t max_images_per_request = 16;
  absl::Duration step_time = absl::ZeroDuration();    // sleep in every Step
  absl::Duration decode_time = absl::ZeroDuration();  // sleep in every DecodeImages
  int64_t fail_step = -1;                             // Step() with this index returns an error
  // Tokens an image gains per decode step after its prefill step (parallel
  // decoding's several a step; the last step makes what is left).
  int32_t tokens_per_step = 1;
};

// Prompt tokens of the fake: 4 framing tokens plus one per byte.
int32_t FakePromptTokens(const std::string& prompt);

class FakeEngine : public engine::Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});

  const engine::ModelInfo& info() const override { return info_; }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& request) const override;
  bool CanAdd(const engine::PreparedRequest& request) const override;
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr request) override;
  absl::StatusOr<engine::StepReport> Step() override;
  void Remove(engine::GroupId id) override;
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override;
  int64_t KvBytesInUse() const override;
  int32_t RunningRows() const override;
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(
      const std::vector<std::vector<int32_t>>& token_grids) override;

  const FakeEngineOptions& options() const { return options_; }
  // Changes the limits before a scheduler is made over the engine.
  void SetKvBudget(int64_t bytes) { info_.kv_budget_bytes = bytes; }
  void SetMaxBatchRows(int32_t rows) { info_.max_batch_rows = rows; }

  // The token image `image` of a request with `seed` has at step t.
  int32_t ExpectedToken(uint64_t seed, int32_t image, int32_t t) const;

  // Observations (safe from any thread).
  std::vector<std::string> added_prompts() const;  // in Add order
  int64_t peak_kv_bytes() const;                   // max KvBytesInUse at any Step
  int64_t steps() const;
  bool used_from_one_thread() const;  // Add/Step/Remove/State all on one thread
  int32_t max_groups_in_step() const;
  std::vector<int32_t> decode_call_sizes() const;  // images of each DecodeImages call, in call order

 private:
  // Its progress is the request object's (engine::RequestProgress).
  struct Group {
    engine::RequestPtr request;
    bool prefilled = false;
    const engine::GenerationRequest& params() const { return request->prepared.request; }
  };
  void CheckThread() const;

  const FakeEngineOptions options_;
  engine::ModelInfo info_;
  mutable absl::Mutex mu_;
  std::map<engine::GroupId, Group> groups_;
  engine::GroupId next_id_ = 1;
  int64_t kv_in_use_ = 0;
  int64_t peak_kv_ = 0;
  int64_t steps_ = 0;
  int32_t max_groups_ = 0;
  std::vector<std::string> added_prompts_;
  std::vector<int32_t> decode_calls_;
  mutable std::thread::id stepping_thread_;
  mutable bool one_thread_ = true;
};

}  // namespace argen::scheduler::testing
