#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/flags.h"
#include "client/generate_call.h"
#include "client/latency_stats.h"

namespace argen::client {
namespace {

struct Outcome {
  std::string policy;  // as given in --policies ("" = server default)
  grpc::Status status;
  double latency = 0;
  int images = 0;
  double tokens_per_second = 0;
};

void PrintLatencies(const std::string& label, const std::vector<double>& latencies, std::ostream& out) {
  out << std::fixed << std::setprecision(3) << label << " n=" << latencies.size()
      << " p50 " << Percentile(latencies, 0.50) << " s, p90 " << Percentile(latencies, 0.90)
      << " s, p99 " << Percentile(latencies, 0.99) << " s\n";
}

}  // namespace

int RunLoad(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"requests", "concurrency", "policies", "prompt", "count", "seed"});
  if (!flags.ok()) {
    err << "argen_client load: " << flags.status().message() << "\n";
    return kUsage;
  }
  absl::StatusOr<int64_t> requests = flags->Int("requests", 16, 1, 1000000);
  absl::StatusOr<int64_t> concurrency = flags->Int("concurrency", 4, 1, 4096);
  absl::StatusOr<int64_t> count = flags->Int("count", 1, 1, 4096);
  absl::StatusOr<int64_t> seed = flags->Int("seed", 1, 0, INT64_MAX / 2);
  for (const absl::Status& s : {requests.status(), concurrency.status(), count.status(), seed.status()}) {
    if (!s.ok()) {
      err << "argen_client load: " << s.message() << "\n";
      return kUsage;
    }
  }
  std::vector<std::string> specs;
  std::vector<v1::SparsityPolicy> policies;
  for (absl::string_view spec : absl::StrSplit(flags->String("policies"), ',', absl::SkipEmpty())) {
    absl::StatusOr<v1::SparsityPolicy> p = ParsePolicySpec(std::string(spec));
    if (!p.ok()) {
      err << "argen_client load: --policies: " << p.status().message() << "\n";
      return kUsage;
    }
    specs.emplace_back(spec);
    policies.push_back(*p);
  }
  if (policies.empty()) {
    specs.push_back("(server default)");
    policies.emplace_back();
  }
  const std::string prompt = flags->String("prompt", "a red circle above a blue square");

  auto stub = v1::ArGen::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  ProgressLine progress(err, common.interactive);
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    while (true) {
      const int64_t i = next.fetch_add(1);
      if (i >= *requests) return;
      v1::GenerateRequest r;
      r.set_prompt(prompt);
      r.set_num_images(static_cast<int32_t>(*count));
      r.set_seed(static_cast<uint64_t>(*seed + i));
      const size_t which = static_cast<size_t>(i) % policies.size();
      *r.mutable_policy() = policies[which];
      r.set_progress_interval_ms(60000);  // the load test needs no progress
      GenerateResult result = CallGenerate(*stub, r, common.timeout_seconds);
      Outcome o;
      o.policy = specs[which];
      o.status = result.status;
      o.latency = result.wall_seconds;
      o.images = static_cast<int>(result.images.size());
      o.tokens_per_second = result.metrics.tokens_per_second();
      std::lock_guard<std::mutex> lock(mu);
      outcomes.push_back(std::move(o));
      progress.Show("load: requests done", static_cast<int64_t>(outcomes.size()), *requests);
    }
  };
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < std::min(*concurrency, *requests); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress.Finish();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int ok = 0, images = 0, unreachable = 0;
  std::vector<double> latencies;
  std::map<std::string, std::vector<double>> by_policy;
  std::map<std::string, int> failures;
  for (const Outcome& o : outcomes) {
    if (o.status.ok()) {
      ++ok;
      images += o.images;
      latencies.push_back(o.latency);
      by_policy[o.policy].push_back(o.latency);
    } else {
      failures[std::to_string(o.status.error_code()) + " " + o.status.error_message()]++;
      if (o.status.error_code() == grpc::UNAVAILABLE) ++unreachable;
    }
  }
  out << std::fixed << std::setprecision(3) << "load: " << *requests << " requests x " << *count
      << " images, concurrency " << *concurrency << ", server " << common.server << "\n"
      << "ok " << ok << ", failed " << (outcomes.size() - ok) << "\n"
      << "wall " << wall << " s, images " << images << ", images/s " << (wall > 0 ? images / wall : 0)
      << "\n";
  PrintLatencies("latency (all)", latencies, out);
  for (const auto& [policy, values] : by_policy) PrintLatencies("latency " + policy, values, out);
  for (const auto& [what, n] : failures) out << "failure x" << n << ": code " << what << "\n";
  if (ok == static_cast<int>(outcomes.size())) return kOk;
  if (unreachable == static_cast<int>(outcomes.size())) {
    err << "argen_client load: server unreachable at " << common.server << "\n";
    return kUnreachable;
  }
  return kServerError;
}

}  // namespace argen::client
