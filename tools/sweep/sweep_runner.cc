#include "tools/sweep/sweep_runner.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"

namespace argen::sweep {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Per configuration: when its first request joined and how many are left,
// for the progress line.
struct ConfigProgress {
  Clock::time_point first_add;
  bool started = false;
  int64_t remaining = 0;
  int64_t requests = 0;
};

struct InFlight {
  WorkItem item;
  Clock::time_point added;
};

}  // namespace

engine::GenerationRequest MakeRequest(const WorkItem& item, const RunSettings& settings) {
  engine::GenerationRequest r;
  r.prompt = item.prompt->prompt;
  r.num_images = settings.images_per_prompt;
  r.sampling = settings.sampling;
  r.sampling.seed = settings.seed + static_cast<uint64_t>(item.prompt->index);
  r.policy.kind = item.config->kind;
  r.policy.sparsity = item.config->sparsity_percent / 100.0;
  if (UsesNRecent(item.config->kind)) r.policy.n_recent = settings.n_recent;
  return r;
}

absl::StatusOr<SweepOutcome> RunSweep(engine::Engine& engine, const std::vector<WorkItem>& items,
                                      const RunSettings& settings, ImageSink& sink) {
  std::map<const SweepConfig*, ConfigProgress> progress;
  for (const WorkItem& item : items) {
    ++progress[item.config].remaining;
    ++progress[item.config].requests;
  }
  const int32_t rows_per_request = 2 * settings.images_per_prompt;
  const Clock::time_point start = Clock::now();
  std::map<engine::GroupId, InFlight> running;
  size_t next = 0, done = 0;
  Clock::time_point last_report = start;
  size_t end = items.size();  // shrinks to `next` at the deadline
  while (next < end || !running.empty()) {
    if (settings.deadline && next < end && Clock::now() >= *settings.deadline) {
      end = next;
      std::fprintf(stderr, "argen_sweep: deadline reached, admitting no more requests; %zu running finish\n",
                   running.size());
      if (running.empty()) break;
    }
    // Admit while the batch has room (RunningRows counts rows not yet prefilled too).
    while (next < end && engine.RunningRows() + rows_per_request <= settings.max_batch_rows) {
      absl::StatusOr<engine::PreparedRequest> prepared = engine.Prepare(MakeRequest(items[next], settings));
      if (!prepared.ok()) return prepared.status();
      absl::StatusOr<engine::GroupId> id = engine.Add(*prepared);
      if (!id.ok()) {
        // The KV pool is full: wait for running groups to finish and free theirs.
        if (absl::IsResourceExhausted(id.status()) && !running.empty()) break;
        return id.status();
      }
      ConfigProgress& p = progress[items[next].config];
      if (!p.started) p = {Clock::now(), true, p.remaining, p.requests};
      running[*id] = {items[next], Clock::now()};
      ++next;
    }
    absl::StatusOr<engine::StepReport> report = engine.Step();
    if (!report.ok()) return report.status();
    for (engine::GroupId id : report->finished) {
      absl::StatusOr<engine::GroupState> state = engine.State(id);
      if (!state.ok()) return state.status();
      const InFlight& f = running.at(id);
      FinishedGroup g;
      g.tokens = std::move(state->tokens);
      g.folder = (std::filesystem::path(settings.out_dir) / f.item.config->label).string();
      g.entry.prompt_index = f.item.prompt->index;
      g.entry.tag = f.item.prompt->tag;
      g.entry.prompt = f.item.prompt->prompt;
      g.entry.policy = f.item.config->policy;
      g.entry.sparsity = f.item.config->sparsity_percent;
      g.entry.config = f.item.config->label;
      g.entry.seed = settings.seed + static_cast<uint64_t>(f.item.prompt->index);
      g.entry.decode_s = Seconds(f.added, Clock::now());
      sink.Submit(std::move(g));
      engine.Remove(id);
      ConfigProgress& p = progress[f.item.config];
      if (--p.remaining == 0) {
        std::fprintf(stderr, "argen_sweep: %s: %lld prompts x %d images in %.1f s\n",
                     f.item.config->label.c_str(), static_cast<long long>(p.requests),
                     settings.images_per_prompt, Seconds(p.first_add, Clock::now()));
      }
      running.erase(id);
      ++done;
    }
    // A heartbeat for long (GPU) runs: progress, rate and time left.
    if (const Clock::time_point now = Clock::now(); Seconds(last_report, now) >= 30.0 && done > 0) {
      last_report = now;
      const double elapsed = Seconds(start, now);
      std::fprintf(stderr, "argen_sweep: %zu/%zu requests, %.2f images/s, about %.0f s left\n", done,
                   items.size(), done * settings.images_per_prompt / elapsed,
                   elapsed / done * (items.size() - done));
    }
    if (absl::Status s = sink.status(); !s.ok()) return s;
  }
  if (absl::Status s = sink.Finish(); !s.ok()) return s;
  const double total = Seconds(start, Clock::now());
  const int64_t images = static_cast<int64_t>(done) * settings.images_per_prompt;
  std::fprintf(stderr, "argen_sweep: %lld images in %.1f s (%.2f images/s)\n", static_cast<long long>(images),
               total, total > 0 ? images / total : 0.0);
  return SweepOutcome{static_cast<int64_t>(done), static_cast<int64_t>(items.size() - next)};
}

}  // namespace argen::sweep
