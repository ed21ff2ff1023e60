#include "tools/sweep/sweep_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "tools/runner/batch_runner.h"

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

}  // namespace

sparse::KvFormat KvFormatOf(const WorkItem& item, const RunSettings& settings) {
  return item.config->kv_format != sparse::KvFormat::kAuto ? item.config->kv_format : settings.kv_format;
}

int32_t ClassOf(int32_t prompt_index, const RunSettings& settings) {
  return settings.num_classes > 0 ? prompt_index % settings.num_classes : -1;
}

engine::GenerationRequest MakeRequest(const WorkItem& item, const RunSettings& settings) {
  engine::GenerationRequest r;
  if (settings.num_classes > 0) {
    r.class_id = ClassOf(item.prompt->index, settings);
  } else {
    r.prompt = item.prompt->prompt;
    r.negative_prompt = settings.negative_prompt;
  }
  r.num_images = settings.images_per_prompt;
  r.width = settings.width;
  r.height = settings.height;
  r.sampling = settings.sampling;
  r.sampling.seed = settings.seed + static_cast<uint64_t>(item.prompt->index);
  r.policy.kind = item.config->kind;
  r.policy.sparsity = item.config->sparsity_percent / 100.0;
  if (UsesNRecent(item.config->kind)) r.policy.n_recent = settings.n_recent;
  if (item.config->n_recent > 0) r.policy.n_recent = item.config->n_recent;  // e.g. diagonal:64
  r.policy.kv_format = KvFormatOf(item, settings);
  r.parallel_window = item.config->parallel_window;
  r.speculative_window = item.config->speculative_window;
  return r;
}

absl::StatusOr<SweepOutcome> RunSweep(engine::Engine& engine, const std::vector<WorkItem>& items,
                                      const RunSettings& settings, const SinkOptions& output,
                                      ManifestWriter& manifest) {
  std::vector<runner::Job> jobs;
  jobs.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) jobs.push_back({MakeRequest(items[i], settings), static_cast<int64_t>(i)});
  std::mutex progress_mu;  // on_admitted runs on the stepping thread, on_finished on the writers
  std::map<const SweepConfig*, ConfigProgress> progress;
  for (const WorkItem& item : items) {
    ++progress[item.config].remaining;
    ++progress[item.config].requests;
  }
  const int32_t rows_per_request = 2 * settings.images_per_prompt;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  size_t admitted = 0;
  bool deadline_announced = false;
  std::atomic<int64_t> done{0};
  ImageSink sink(manifest, output.png, output.format);

  runner::RunOptions run;
  run.max_rows = settings.max_batch_rows;
  run.deadline = settings.deadline;
  run.decode_images = true;
  run.decode_batch = std::max(1, output.decode_batch);
  run.worker_threads = std::max(1, output.threads);
  run.max_queued = output.max_queued;
  runner::RunHooks hooks;
  hooks.on_admitted = [&](const runner::Job& job, const engine::PreparedRequest& prepared) {
    // A comparison of KV formats is only as good as every image being made with the one asked for.
    if (const sparse::KvFormat want = KvFormatOf(items[job.tag], settings); prepared.policy.kv_format != want) {
      return absl::InternalError(absl::StrCat(items[job.tag].config->label, " prompt ", items[job.tag].prompt->index,
                                              ": the engine resolved kv_cache_dtype ",
                                              std::string(sparse::KvFormatName(prepared.policy.kv_format)), ", not ",
                                              std::string(sparse::KvFormatName(want))));
    }
    ++admitted;
    std::lock_guard<std::mutex> lock(progress_mu);
    ConfigProgress& p = progress[items[job.tag].config];
    if (!p.started) {
      p.first_add = Clock::now();
      p.started = true;
    }
    return absl::OkStatus();
  };
  hooks.on_step = [&](const engine::StepReport&) {
    const Clock::time_point now = Clock::now();
    if (settings.deadline && !deadline_announced && now >= *settings.deadline && admitted < items.size()) {
      deadline_announced = true;
      std::fprintf(stderr, "argen_sweep: deadline reached, admitting no more requests; %d running finish\n",
                   engine.RunningRows() / rows_per_request);
    }
    // A heartbeat for long (GPU) runs: progress, rate and time left.
    if (const int64_t finished = done.load(); Seconds(last_report, now) >= 30.0 && finished > 0) {
      last_report = now;
      const double elapsed = Seconds(start, now);
      std::fprintf(stderr, "argen_sweep: %lld/%zu requests, %.2f images/s, about %.0f s left\n",
                   static_cast<long long>(finished), items.size(), finished * settings.images_per_prompt / elapsed,
                   elapsed / finished * (items.size() - finished));
    }
    return absl::OkStatus();
  };
  hooks.on_finished = [&](runner::FinishedJob job) -> absl::Status {
    const WorkItem& item = items[job.tag];
    FinishedGroup g;
    g.sequence = job.sequence;
    g.images = std::move(job.images);
    g.folder = (std::filesystem::path(settings.out_dir) / item.config->label).string();
    g.prompt = item.prompt;
    g.entry.prompt_index = item.prompt->index;
    g.entry.tag = item.prompt->tag;
    g.entry.prompt = item.prompt->prompt;
    g.entry.class_id = ClassOf(item.prompt->index, settings);
    g.entry.policy = item.config->policy;
    g.entry.sparsity = item.config->sparsity_percent;
    g.entry.config = item.config->label;
    g.entry.seed = settings.seed + static_cast<uint64_t>(item.prompt->index);
    g.entry.decode_s = job.seconds;
    if (absl::Status s = sink.Write(g); !s.ok()) return s;
    ++done;
    std::lock_guard<std::mutex> lock(progress_mu);
    ConfigProgress& p = progress[item.config];
    if (--p.remaining == 0) {
      std::fprintf(stderr, "argen_sweep: %s: %lld prompts x %d images in %.1f s\n", item.config->label.c_str(),
                   static_cast<long long>(p.requests), settings.images_per_prompt, Seconds(p.first_add, Clock::now()));
    }
    return absl::OkStatus();
  };

  const runner::RunResult result = runner::RunJobs(engine, jobs, run, hooks);
  if (!result.status.ok()) {
    if (!result.failed_tag) return result.status;
    const WorkItem& item = items[*result.failed_tag];
    return absl::Status(result.status.code(), absl::StrCat(item.config->label, ", prompt ", item.prompt->index, ": ",
                                                           result.status.message()));
  }
  const double total = Seconds(start, Clock::now());
  const int64_t images = result.finished * settings.images_per_prompt;
  std::fprintf(stderr, "argen_sweep: %lld images in %.1f s (%.2f images/s)\n", static_cast<long long>(images), total,
               total > 0 ? images / total : 0.0);
  return SweepOutcome{result.finished, result.not_admitted, result.peak_queued};
}

}  // namespace argen::sweep
