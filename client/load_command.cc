// argen_client load: a serving benchmark. Closed loop (--concurrency C
// workers, each sending its next request when the last ends) or open loop
// (--rate R: Poisson arrivals, at most C in flight), for --requests N or
// --duration S. Reports throughput, latency, time to first image and
// per-image latency percentiles, failures by gRPC code; --save-result and
// --json give the same as JSON.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/generate_call.h"
#include "client/interrupt.h"
#include "client/latency_stats.h"
#include "client/progress_bar.h"
#include "client/prompts_file.h"
#include "nlohmann/json.hpp"

namespace argen::client {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Outcome {
  std::string policy;  // as given in --policies ("(server default)" for none)
  grpc::StatusCode code = grpc::OK;
  std::string message;
  double latency = 0;
  double first_image = -1;
  std::vector<double> image_latencies;
  int images = 0;
  int64_t tokens = 0;  // image tokens of its delivered images
};

json Stats(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"mean", Mean(v)},
          {"p50", Percentile(v, 0.50)},
          {"p90", Percentile(v, 0.90)},
          {"p99", Percentile(v, 0.99)},
          {"max", Percentile(v, 1.0)}};
}

void PrintStats(const std::string& label, const std::vector<double>& v, std::ostream& out) {
  out << std::fixed << std::setprecision(3) << label << " n=" << v.size() << " p50 " << Percentile(v, 0.50)
      << " s, p90 " << Percentile(v, 0.90) << " s, p99 " << Percentile(v, 0.99) << " s, mean " << Mean(v) << " s, max "
      << Percentile(v, 1.0) << " s\n";
}

}  // namespace

int RunLoad(const CommonOptions& common, const LoadOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<v1::GenerateRequest> base = RequestFromFlags(options.request);
  if (!base.ok()) {
    err << "argen_client load: " << base.status().message() << "\n";
    return kUsage;
  }
  std::vector<std::string> specs;
  std::vector<v1::SparsityPolicy> policies;
  for (absl::string_view spec : absl::StrSplit(options.policies, ',', absl::SkipEmpty())) {
    absl::StatusOr<v1::SparsityPolicy> p = ParsePolicySpec(std::string(spec));
    if (!p.ok()) {
      err << "argen_client load: --policies: " << p.status().message() << "\n";
      return kUsage;
    }
    specs.emplace_back(spec);
    // --kv-cache-dtype applies to every policy of the mix.
    if (!base->policy().kv_cache_dtype().empty()) p->set_kv_cache_dtype(base->policy().kv_cache_dtype());
    policies.push_back(*p);
  }
  // Without --policies a request keeps its line's policy (or the command line's).
  const bool policy_mix = !policies.empty();
  if (policies.empty()) {
    specs.push_back(options.request.policy.empty() ? "(server default)" : options.request.policy);
    policies.push_back(base->policy());
  }
  std::vector<v1::GenerateRequest> lines = {*base};
  std::vector<int> line_numbers = {0};  // per line: its line in the prompts file (0: the command line)
  if (!options.prompts_file.empty()) {
    absl::StatusOr<PromptsFile> file = ReadPromptsFile(options.prompts_file, *base);
    if (!file.ok()) {
      err << "argen_client load: " << file.status().message() << "\n";
      return file.status().code() == absl::StatusCode::kNotFound ? kLocalError : kUsage;
    }
    lines.clear();
    line_numbers.clear();
    for (PromptLine& l : file->lines) {
      lines.push_back(std::move(l.request));
      line_numbers.push_back(l.line);
    }
  }
  const bool open_loop = options.rate > 0;
  const int64_t limit = options.requests > 0 ? options.requests : (options.duration > 0 ? INT64_MAX : 16);
  const int32_t in_flight_cap = options.concurrency > 0 ? options.concurrency : (open_loop ? 1024 : 4);
  const uint64_t seed0 = options.request.seed.value_or(1);

  auto stub = v1::ArGen::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  {
    // More images per request than the server takes would fail every request: say so first.
    std::vector<std::pair<int32_t, int>> counts;
    for (size_t i = 0; i < lines.size(); ++i) {
      counts.emplace_back(lines[i].num_images(), line_numbers[i]);
    }
    if (absl::Status s = CheckImagesPerRequest(*stub, common.timeout_seconds, counts, options.prompts_file); !s.ok()) {
      err << "argen_client load: " << s.message() << "\n";
      return kUsage;
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Outcome> outcomes;
  int64_t started = 0;
  int32_t in_flight = 0;
  ProgressBar bar(err, common.interactive, limit == INT64_MAX ? 0 : limit, "req/s");  // counts finished requests
  const Clock::time_point start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  // Ctrl-C stops sending; the summary covers what was sent (client/interrupt.h).
  auto time_left = [&] { return !InterruptRequested() && (options.duration <= 0 || elapsed() < options.duration); };

  auto send = [&](int64_t i) {
    v1::GenerateRequest r = lines[static_cast<size_t>(i) % lines.size()];
    r.set_seed(seed0 + static_cast<uint64_t>(i));
    const size_t which = static_cast<size_t>(i) % policies.size();
    if (policy_mix || lines.size() == 1) *r.mutable_policy() = policies[which];
    r.set_progress_interval_ms(60000);  // the load test needs no progress
    CallOptions call;
    call.timeout_seconds = common.timeout_seconds;
    call.keep_images = false;
    GenerateResult result = CallGenerate(*stub, r, call);
    Outcome o;
    o.policy = specs[which];
    o.code = result.status.error_code();
    o.message = result.status.error_message();
    o.latency = result.wall_seconds;
    o.first_image = result.first_image_seconds;
    o.image_latencies = result.image_seconds;
    o.images = result.images_received;
    o.tokens = int64_t{result.images_received} * result.accepted.policy().l_dec();
    std::lock_guard<std::mutex> lock(mu);
    outcomes.push_back(std::move(o));
    --in_flight;
    bar.Update(static_cast<int64_t>(outcomes.size()),
               std::to_string(outcomes.size()) + " requests done, " + std::to_string(in_flight) + " in flight");
    cv.notify_all();
  };

  std::vector<std::thread> threads;
  if (!open_loop) {
    for (int32_t t = 0; t < std::min<int64_t>(in_flight_cap, limit); ++t) {
      threads.emplace_back([&] {
        while (true) {
          int64_t i;
          {
            std::lock_guard<std::mutex> lock(mu);
            if (started >= limit || !time_left()) return;
            i = started++;
            ++in_flight;
          }
          send(i);
        }
      });
    }
  } else {
    std::mt19937_64 rng(seed0);
    std::exponential_distribution<double> gap(options.rate);
    Clock::time_point next = start;
    for (int64_t i = 0; i < limit; ++i) {
      next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
      std::this_thread::sleep_until(next);
      if (!time_left()) break;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < in_flight_cap; });
      ++started;
      ++in_flight;
      lock.unlock();
      threads.emplace_back(send, i);
    }
  }
  for (auto& t : threads) t.join();
  bar.Finish();
  const double wall = elapsed();

  int ok = 0, images = 0, unreachable = 0;
  int64_t tokens = 0;
  std::vector<double> latencies, first_images, image_latencies;
  std::map<std::string, std::vector<double>> by_policy;
  std::map<std::string, int> failures_by_code;
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> failures;  // (code, msg) -> (n, number)
  for (const Outcome& o : outcomes) {
    images += o.images;
    tokens += o.tokens;
    image_latencies.insert(image_latencies.end(), o.image_latencies.begin(), o.image_latencies.end());
    if (o.first_image >= 0) first_images.push_back(o.first_image);
    if (o.code == grpc::OK) {
      ++ok;
      latencies.push_back(o.latency);
      by_policy[o.policy].push_back(o.latency);
    } else {
      failures_by_code[GrpcCodeName(o.code)]++;
      auto& f = failures[{GrpcCodeName(o.code), o.message}];
      f.first++;
      f.second = static_cast<int>(o.code);
      if (o.code == grpc::UNAVAILABLE) ++unreachable;
    }
  }
  const int failed = static_cast<int>(outcomes.size()) - ok;
  auto per_second = [&](double x) { return wall > 0 ? x / wall : 0.0; };

  json summary = {
      {"server", common.server},
      {"mode", open_loop ? "poisson" : "closed_loop"},
      {"rate", options.rate},
      {"concurrency", in_flight_cap},
      {"duration_limit_seconds", options.duration},
      {"images_per_request", options.request.count},
      {"policies", specs},
      {"requests", {{"sent", outcomes.size()}, {"ok", ok}, {"failed", failed}}},
      {"wall_seconds", wall},
      {"images", images},
      {"throughput",
       {{"requests_per_second", per_second(ok)},
        {"images_per_second", per_second(images)},
        {"tokens_per_second", per_second(static_cast<double>(tokens))}}},
      {"latency_seconds", Stats(latencies)},
      {"time_to_first_image_seconds", Stats(first_images)},
      {"image_latency_seconds", Stats(image_latencies)},
      {"failures", failures_by_code},
  };
  json per_policy = json::object();
  for (const auto& [policy, values] : by_policy) per_policy[policy] = Stats(values);
  summary["latency_seconds_by_policy"] = per_policy;

  if (!options.save_result.empty()) {
    std::ofstream file(options.save_result);
    file << summary.dump(2) << "\n";
    if (!file) {
      err << "argen_client load: cannot write --save-result " << options.save_result << "\n";
      return kLocalError;
    }
  }
  if (options.json) {
    out << summary.dump(2) << "\n";
  } else {
    out << std::fixed << std::setprecision(3) << "load: " << outcomes.size() << " requests x " << options.request.count
        << " images, "
        << (open_loop ? "Poisson arrivals at " + std::to_string(options.rate) + "/s, at most " : "concurrency ")
        << in_flight_cap << (open_loop ? " in flight" : "") << ", server " << common.server << "\n"
        << "ok " << ok << ", failed " << failed << "\n"
        << "wall " << wall << " s, images " << images << ", images/s " << per_second(images) << ", requests/s "
        << per_second(ok) << ", tokens/s " << per_second(static_cast<double>(tokens)) << "\n";
    PrintStats("latency (all)", latencies, out);
    PrintStats("time to first image", first_images, out);
    PrintStats("per-image latency", image_latencies, out);
    for (const auto& [policy, values] : by_policy) PrintStats("latency " + policy, values, out);
    if (!failures_by_code.empty()) {
      out << "failed by code:";
      for (const auto& [code, n] : failures_by_code) out << " " << code << " x" << n;
      out << "\n";
    }
    for (const auto& [what, n] : failures) {
      out << "failure x" << n.first << ": " << what.first << " (code " << n.second << "): " << what.second << "\n";
    }
  }
  if (InterruptRequested()) {
    err << "argen_client load: interrupted after " << wall << " s; the summary covers the requests sent\n";
    return kInterruptedExitCode;
  }
  if (failed == 0) return kOk;
  if (unreachable == static_cast<int>(outcomes.size())) {
    err << "argen_client load: server unreachable at " << common.server << "\n";
    return kUnreachable;
  }
  return kServerError;
}

}  // namespace argen::client
