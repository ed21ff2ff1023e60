#include "scheduler/tests/fake_engine.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"

namespace argen::scheduler::testing {

int32_t FakePromptTokens(const std::string& prompt) { return 4 + static_cast<int32_t>(prompt.size()); }

FakeEngine::FakeEngine(FakeEngineOptions options) : options_(options) {
  info_.name = "fake";
  info_.backend = "fake";
  info_.image_size = options.image_size;
  info_.token_grid = options.token_grid;
  info_.image_tokens = options.token_grid * options.token_grid;
  info_.image_vocab = options.image_vocab;
  info_.max_prompt_tokens = options.max_prompt_tokens;
  info_.num_layers = 1;
  info_.num_heads = 1;
  info_.num_kv_heads = 1;
  info_.head_dim = 8;
  info_.hidden_size = 8;
  info_.kv_bytes_per_token_row = options.kv_bytes_per_token_row;
  info_.kv_budget_bytes = options.kv_budget_bytes;
  info_.max_batch_rows = options.max_batch_rows;
  info_.max_images_per_request = options.max_images_per_request;
}

absl::StatusOr<engine::PreparedRequest> FakeEngine::Prepare(const engine::GenerationRequest& request) const {
  if (absl::Status s = engine::ValidateRequest(request, info_); !s.ok()) return s;
  const int32_t prompt_tokens = FakePromptTokens(request.prompt);
  if (prompt_tokens > options_.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt: ", prompt_tokens, " tokens exceed ", options_.max_prompt_tokens));
  }
  absl::StatusOr<sparse::ResolvedPolicy> policy = sparse::ResolvePolicy(request.policy, info_.image_tokens);
  if (!policy.ok()) return policy.status();
  absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(request, info_);
  if (!layout.ok()) return layout.status();
  engine::PreparedRequest out;
  out.request = request;
  out.layout = *layout;
  out.cond_ids.assign(prompt_tokens, 1);
  out.uncond_ids.assign(prompt_tokens, 0);
  out.policy = *policy;
  out.kv_bytes = int64_t{2} * request.num_images * (prompt_tokens + policy->n_slots) * options_.kv_bytes_per_token_row;
  out.own_kv_bytes = out.kv_bytes;
  if (absl::Status s = engine::CheckKvFits(out.kv_bytes, 2 * request.num_images,
                                           std::string(sparse::PolicyName(policy->kind)), info_);
      !s.ok()) {
    return s;
  }
  return out;
}

bool FakeEngine::CanAdd(const engine::PreparedRequest& request) const {
  absl::MutexLock lock(&mu_);
  return kv_in_use_ + request.kv_bytes <= info_.kv_budget_bytes;
}

void FakeEngine::CheckThread() const {
  const std::thread::id me = std::this_thread::get_id();
  if (stepping_thread_ == std::thread::id()) stepping_thread_ = me;
  if (stepping_thread_ != me) one_thread_ = false;
}

absl::StatusOr<engine::GroupId> FakeEngine::Add(engine::RequestPtr request) {
  absl::MutexLock lock(&mu_);
  CheckThread();
  const engine::PreparedRequest& p = request->prepared;
  if (kv_in_use_ + p.kv_bytes > info_.kv_budget_bytes) {
    return absl::ResourceExhaustedError("fake KV pool: full");
  }
  const engine::GroupId id = next_id_++;
  request->progress = {};
  request->progress.tokens.assign(p.request.num_images, {});
  kv_in_use_ += p.kv_bytes;
  added_prompts_.push_back(p.request.prompt);
  Group g;
  g.request = std::move(request);
  groups_.emplace(id, std::move(g));
  return id;
}

int32_t FakeEngine::ExpectedToken(uint64_t seed, int32_t image, int32_t t) const {
  return static_cast<int32_t>((seed * 131 + static_cast<uint64_t>(image) * 17 + t) %
                              static_cast<uint64_t>(options_.image_vocab));
}

absl::StatusOr<engine::StepReport> FakeEngine::Step() {
  if (options_.step_time > absl::ZeroDuration()) absl::SleepFor(options_.step_time);
  absl::MutexLock lock(&mu_);
  CheckThread();
  const int64_t index = steps_++;
  peak_kv_ = std::max(peak_kv_, kv_in_use_);
  if (index == options_.fail_step) return absl::InternalError("fake engine: injected step failure");
  engine::StepReport report;
  int32_t groups = 0;
  for (auto& [id, g] : groups_) {
    engine::RequestProgress& progress = g.request->progress;
    if (progress.tokens_done >= info_.image_tokens) continue;  // finished, awaiting Remove
    ++groups;
    const bool decoding = g.prefilled;
    if (!decoding) {
      g.prefilled = true;
      ++report.groups_prefilled;
    } else {
      report.rows_decoded += 2 * g.params().num_images;
    }
    // The prefill step samples one token; each later step tokens_per_step.
    const int32_t made =
        std::min(decoding ? std::max(options_.tokens_per_step, 1) : 1, info_.image_tokens - progress.tokens_done);
    for (int32_t k = 0; k < made; ++k) {
      for (int32_t i = 0; i < g.params().num_images; ++i) {
        progress.tokens[i].push_back(ExpectedToken(g.params().sampling.seed, i, progress.tokens_done));
      }
      ++progress.tokens_done;
    }
    ++progress.steps;
    if (progress.tokens_done == info_.image_tokens) {
      progress.finished = true;
      report.finished.push_back(id);
    }
  }
  max_groups_ = std::max(max_groups_, groups);
  return report;
}

void FakeEngine::Remove(engine::GroupId id) {
  absl::MutexLock lock(&mu_);
  CheckThread();
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  kv_in_use_ -= it->second.request->prepared.kv_bytes;
  groups_.erase(it);
}

absl::StatusOr<engine::GroupState> FakeEngine::State(engine::GroupId id) const {
  absl::MutexLock lock(&mu_);
  CheckThread();
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("group ", id, " unknown"));
  engine::GroupState s;
  const engine::RequestProgress& progress = it->second.request->progress;
  s.tokens_done = progress.tokens_done;
  s.tokens_total = info_.image_tokens;
  s.finished = progress.finished;
  s.tokens = progress.tokens;
  return s;
}

int64_t FakeEngine::KvBytesInUse() const {
  absl::MutexLock lock(&mu_);
  return kv_in_use_;
}

int32_t FakeEngine::RunningRows() const {
  absl::MutexLock lock(&mu_);
  int32_t rows = 0;
  for (const auto& [id, g] : groups_) rows += 2 * g.params().num_images;
  return rows;
}

absl::StatusOr<std::vector<engine::RgbImage>> FakeEngine::DecodeImages(
    const std::vector<std::vector<int32_t>>& token_grids) {
  {
    absl::MutexLock lock(&mu_);
    decode_calls_.push_back(static_cast<int32_t>(token_grids.size()));
  }
  if (options_.decode_time > absl::ZeroDuration()) absl::SleepFor(options_.decode_time);
  std::vector<engine::RgbImage> out;
  for (const auto& grid : token_grids) {
    if (static_cast<int32_t>(grid.size()) != info_.image_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("token grid has ", grid.size(), " tokens, want ", info_.image_tokens));
    }
    engine::RgbImage img;
    img.width = img.height = options_.image_size;
    img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
    for (size_t p = 0; p < img.rgb.size(); ++p) {
      img.rgb[p] = static_cast<uint8_t>(grid[(p / 3) % grid.size()] * 4 + p % 3);
    }
    out.push_back(std::move(img));
  }
  return out;
}

std::vector<int32_t> FakeEngine::decode_call_sizes() const {
  absl::MutexLock lock(&mu_);
  return decode_calls_;
}

std::vector<std::string> FakeEngine::added_prompts() const {
  absl::MutexLock lock(&mu_);
  return added_prompts_;
}
int64_t FakeEngine::peak_kv_bytes() const {
  absl::MutexLock lock(&mu_);
  return peak_kv_;
}
int64_t FakeEngine::steps() const {
  absl::MutexLock lock(&mu_);
  return steps_;
}
bool FakeEngine::used_from_one_thread() const {
  absl::MutexLock lock(&mu_);
  return one_thread_;
}
int32_t FakeEngine::max_groups_in_step() const {
  absl::MutexLock lock(&mu_);
  return max_groups_;
}

}  // namespace argen::scheduler::testing
