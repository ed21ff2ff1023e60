// argen_soak: a long mixed workload against a running argen_server, checking
// that nothing but the expected outcomes happens and that the server's memory
// and gauges come back (issue #16 hardening 4; tests/soak/soak.sh runs it).
//
//   argen_soak --server 127.0.0.1:50051 --metrics 127.0.0.1:9464 --pid PID
//              [--requests 10000] [--concurrency 4] [--seed 1] [--csv rss.csv]
//              [--max_rss_growth_mib 16] [--gpu_memory_cmd CMD]
//
// Mix (seeded): ~75% normal requests over every policy the server lists and
// the model can run (each is probed once first),
// 1-3 images, random prompts and sampling; ~8% cancelled by the client after
// their first event; ~8% with deadlines of 5-60 ms; ~5% invalid (a bad field);
// ~4% with invalid UTF-8 or an oversized prompt sent raw. Expected outcomes:
// normal OK (with every image, PNG, right size); cancelled CANCELLED or OK;
// deadline DEADLINE_EXCEEDED or OK; invalid INVALID_ARGUMENT. Anything else
// is an error. It samples the server's RSS (/proc/PID/status) into --csv,
// and at the end requires RSS growth after warm-up (the first 20%) within
// --max_rss_growth_mib and every argen_ gauge that counts work in flight
// (all but budgets, limits and info) back to 0. Exit 0 when all held.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "tests/serving/serving_test_util.h"

namespace {

using argen::v1::GenerateRequest;

struct Options {
  std::string server = "127.0.0.1:50051";
  std::string metrics;  // host:port of /metrics ("" skips the gauge check)
  int pid = 0;          // server process for RSS (0: skip)
  int64_t requests = 10000;
  int concurrency = 4;
  uint64_t seed = 1;
  std::string csv;
  double max_rss_growth_mib = 16;
  std::string gpu_memory_cmd;  // prints device memory used (MiB) on stdout, sampled with RSS
};

enum class Kind { kNormal, kCancel, kDeadline, kInvalid, kRawBad };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNormal:
      return "normal";
    case Kind::kCancel:
      return "cancel";
    case Kind::kDeadline:
      return "deadline";
    case Kind::kInvalid:
      return "invalid";
    case Kind::kRawBad:
      return "raw_bad";
  }
  return "?";
}

int64_t RssKiB(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

std::string RunCommand(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

class Soak {
 public:
  Soak(Options o, std::vector<std::string> policies, int32_t image_size)
      : o_(std::move(o)),
        policies_(std::move(policies)),
        image_size_(image_size),
        channel_(argen::client::MakeChannel(o_.server, 64 << 20)),
        stub_(argen::v1::ArGen::NewStub(channel_)) {}

  int Run();

 private:
  GenerateRequest RandomRequest(std::mt19937_64& rng) const;
  // Runs request `i`; "" when its outcome was one of those expected.
  std::string One(int64_t i);
  std::string RawCall(const std::string& bytes, grpc::StatusCode* code);
  void Sample(int64_t done);

  const Options o_;
  const std::vector<std::string> policies_;
  const int32_t image_size_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<argen::v1::ArGen::Stub> stub_;
  std::atomic<int64_t> next_{0}, done_{0};
  std::mutex mu_;
  std::map<std::string, int64_t> outcomes_;  // "kind status" -> count
  std::vector<std::string> errors_;
  std::vector<std::pair<int64_t, int64_t>> rss_;  // (done, KiB)
  std::ofstream csv_;
  std::chrono::steady_clock::time_point start_;
};

GenerateRequest Soak::RandomRequest(std::mt19937_64& rng) const {
  static const char* kWords[] = {"a",      "red",   "blue", "green", "circle", "square", "triangle",
                                 "above",  "below", "left", "of",    "right",  "small",  "large",
                                 "yellow", "cube",  "on",   "the",   "and"};
  GenerateRequest r;
  std::string prompt;
  const int words = 2 + static_cast<int>(rng() % 24);
  for (int w = 0; w < words; ++w) absl::StrAppend(&prompt, w ? " " : "", kWords[rng() % std::size(kWords)]);
  r.set_prompt(prompt);
  r.set_num_images(1 + static_cast<int>(rng() % 3));
  r.set_seed(rng() >> 11);
  if (rng() % 2) r.set_cfg_weight(static_cast<float>(rng() % 6));
  if (rng() % 3 == 0) r.set_temperature(0.5f + static_cast<float>(rng() % 10) / 10);
  if (rng() % 4 == 0) r.set_top_k(1 + static_cast<int>(rng() % 32));
  if (rng() % 4 == 0) r.set_top_p(0.5f + static_cast<float>(rng() % 5) / 10);
  if (rng() % 3 == 0) r.set_progress_interval_ms(1 + static_cast<uint32_t>(rng() % 50));
  const std::string& policy = policies_[rng() % policies_.size()];
  r.mutable_policy()->set_name(policy);
  if (policy != "dense" && rng() % 2) r.mutable_policy()->set_sparsity(0.5 + 0.1 * static_cast<double>(rng() % 5));
  return r;
}

std::string Soak::RawCall(const std::string& bytes, grpc::StatusCode* code) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const grpc::internal::RpcMethod method("/argen.v1.ArGen/Generate", grpc::internal::RpcMethod::SERVER_STREAMING);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), method, &context, request));
  grpc::ByteBuffer event;
  while (reader->Read(&event)) {
  }
  const grpc::Status s = reader->Finish();
  *code = s.error_code();
  return s.error_message();
}

std::string Soak::One(int64_t i) {
  std::mt19937_64 rng(o_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
  const uint64_t roll = rng() % 100;
  const Kind kind = roll < 75   ? Kind::kNormal
                    : roll < 83 ? Kind::kCancel
                    : roll < 91 ? Kind::kDeadline
                    : roll < 96 ? Kind::kInvalid
                                : Kind::kRawBad;
  GenerateRequest r = RandomRequest(rng);
  grpc::StatusCode code = grpc::OK;
  std::string message;
  int images = 0;
  bool images_ok = true;
  auto check_images = [&](const std::vector<argen::v1::Image>& got) {
    images = static_cast<int>(got.size());
    for (const argen::v1::Image& img : got) {
      if (img.width() != image_size_ || img.height() != image_size_ || img.png().size() < 8 ||
          img.png().compare(0, 4, "\x89PNG") != 0) {
        images_ok = false;
      }
    }
  };
  switch (kind) {
    case Kind::kNormal:
    case Kind::kDeadline: {
      const double timeout = kind == Kind::kDeadline ? 0.005 + 0.001 * static_cast<double>(rng() % 55) : 300;
      argen::client::GenerateResult g = argen::client::CallGenerate(*stub_, r, timeout);
      code = g.status.error_code();
      message = g.status.error_message();
      check_images(g.images);
      if (code == grpc::OK && (!g.has_metrics || images != r.num_images())) images_ok = false;
      break;
    }
    case Kind::kCancel: {
      grpc::ClientContext context;
      auto reader = stub_->Generate(&context, r);
      argen::v1::GenerateEvent e;
      std::vector<argen::v1::Image> got;
      bool cancelled = false;
      const uint64_t cancel_after = 1 + rng() % 3;  // events
      uint64_t seen = 0;
      while (reader->Read(&e)) {
        if (e.has_image()) got.push_back(e.image());
        if (!cancelled && ++seen >= cancel_after) {
          context.TryCancel();
          cancelled = true;
        }
      }
      const grpc::Status s = reader->Finish();
      code = s.error_code();
      message = s.error_message();
      check_images(got);
      break;
    }
    case Kind::kInvalid: {
      switch (rng() % 5) {
        case 0:
          r.set_prompt("   ");
          break;
        case 1:
          r.set_num_images(-1);
          break;
        case 2:
          r.set_temperature(-2);
          break;
        case 3:
          r.mutable_policy()->set_name("no_such_policy");
          break;
        default:
          r.mutable_policy()->set_sparsity(1.5);
          break;
      }
      argen::client::GenerateResult g = argen::client::CallGenerate(*stub_, r, 60);
      code = g.status.error_code();
      message = g.status.error_message();
      break;
    }
    case Kind::kRawBad: {
      std::string wire;
      if (rng() % 2) {
        // A second prompt field (the last one wins) holding invalid UTF-8,
        // encoded by hand: protobuf's serializer would complain.
        r.SerializeToString(&wire);
        wire += std::string("\x0a\x06\x62\x61\x64\xff\xfe\x21", 8);
      } else {
        r.set_prompt(std::string(100000, 'x'));  // over any derived max_prompt_bytes (<= 32 KiB)
        r.SerializeToString(&wire);
      }
      message = RawCall(wire, &code);
      break;
    }
  }
  const std::string key = absl::StrCat(KindName(kind), " ", code);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++outcomes_[key];
  }
  bool expected = false;
  switch (kind) {
    case Kind::kNormal:
      expected = code == grpc::OK && images_ok;
      break;
    case Kind::kCancel:
      expected = (code == grpc::CANCELLED || code == grpc::OK) && images_ok;
      break;
    case Kind::kDeadline:
      expected = (code == grpc::DEADLINE_EXCEEDED || code == grpc::OK) && images_ok;
      break;
    case Kind::kInvalid:
    case Kind::kRawBad:
      expected = code == grpc::INVALID_ARGUMENT;
      break;
  }
  if (expected) return "";
  return absl::StrCat("request ", i, " (", KindName(kind), ", policy ", r.policy().name(), ", images ", r.num_images(),
                      "): status ", code, " \"", message, "\"", images_ok ? "" : ", bad images");
}

void Soak::Sample(int64_t done) {
  const int64_t rss = o_.pid > 0 ? RssKiB(o_.pid) : -1;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string gpu = o_.gpu_memory_cmd.empty() ? "" : RunCommand(o_.gpu_memory_cmd);
  std::lock_guard<std::mutex> lock(mu_);
  rss_.emplace_back(done, rss);
  if (csv_.is_open()) csv_ << done << "," << seconds << "," << rss << "," << gpu << "\n" << std::flush;
}

int Soak::Run() {
  if (!o_.csv.empty()) {
    csv_.open(o_.csv);
    csv_ << "requests,seconds,rss_kib,device_mib\n";
  }
  start_ = std::chrono::steady_clock::now();
  const int64_t every = std::max<int64_t>(1, o_.requests / 100);
  Sample(0);
  std::vector<std::thread> workers;
  for (int w = 0; w < o_.concurrency; ++w) {
    workers.emplace_back([&] {
      while (true) {
        const int64_t i = next_.fetch_add(1);
        if (i >= o_.requests) return;
        std::string error = One(i);
        if (!error.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (errors_.size() < 50) std::cerr << "argen_soak: unexpected: " << error << "\n";
          errors_.push_back(std::move(error));
        }
        const int64_t done = done_.fetch_add(1) + 1;
        if (done % every == 0) Sample(done);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();

  int failures = 0;
  std::cout << "argen_soak: " << o_.requests << " requests in " << seconds << " s ("
            << static_cast<double>(o_.requests) / seconds << "/s), concurrency " << o_.concurrency << "\n";
  for (const auto& [key, n] : outcomes_) std::cout << "  outcome " << key << ": " << n << "\n";
  std::cout << "  unexpected outcomes: " << errors_.size() << "\n";
  failures += errors_.empty() ? 0 : 1;

  if (o_.pid > 0 && rss_.size() >= 5) {
    // Warm-up: the first 20% of the requests.
    const int64_t warm_done = o_.requests / 5;
    int64_t warm = -1;
    for (const auto& [done, kib] : rss_) {
      if (done >= warm_done) {
        warm = kib;
        break;
      }
    }
    int64_t peak_after = 0;
    for (const auto& [done, kib] : rss_) {
      if (done >= warm_done) peak_after = std::max(peak_after, kib);
    }
    const int64_t last = rss_.back().second;
    const double growth_mib = static_cast<double>(last - warm) / 1024;
    std::cout << "  RSS: start " << rss_.front().second / 1024 << " MiB, after warm-up " << warm / 1024
              << " MiB, peak after " << peak_after / 1024 << " MiB, end " << last / 1024 << " MiB (growth "
              << growth_mib << " MiB, limit " << o_.max_rss_growth_mib << ")\n";
    if (growth_mib > o_.max_rss_growth_mib) {
      std::cout << "  FAIL: RSS grew after warm-up\n";
      ++failures;
    }
  }

  if (!o_.metrics.empty()) {
    const size_t colon = o_.metrics.rfind(':');
    int port = 0;
    absl::SimpleAtoi(o_.metrics.substr(colon + 1), &port);
    // Gauges settle a moment after the last stream ends.
    std::vector<std::string> nonzero;
    for (int attempt = 0; attempt < 50; ++attempt) {
      nonzero.clear();
      const std::string text = argen::serving_test::HttpGet(port, "/metrics");
      std::istringstream lines(text);
      std::map<std::string, bool> gauge;
      for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_match(line, m, std::regex("# TYPE (\\S+) gauge"))) gauge[m[1]] = true;
        if (line.empty() || line[0] == '#') continue;
        const std::string name = line.substr(0, line.find_first_of("{ "));
        if (!gauge.count(name) || name.rfind("argen_", 0) != 0) continue;
        if (std::regex_search(name, std::regex("budget|limit|info|capacity|max|config|start_time"))) continue;
        const double value = std::stod(line.substr(line.rfind(' ') + 1));
        if (value != 0) nonzero.push_back(line);
      }
      if (nonzero.empty() || text.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!nonzero.empty()) {
      for (const std::string& l : nonzero) std::cout << "  FAIL: gauge not back to 0: " << l << "\n";
      ++failures;
    } else {
      std::cout << "  gauges: every in-flight gauge is back to 0\n";
    }
  }
  std::cout << (failures == 0 ? "argen_soak: PASS" : "argen_soak: FAIL") << std::endl;
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "argen_soak: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--server")
      o.server = value();
    else if (a == "--metrics")
      o.metrics = value();
    else if (a == "--pid")
      o.pid = std::stoi(value());
    else if (a == "--requests")
      o.requests = std::stoll(value());
    else if (a == "--concurrency")
      o.concurrency = std::stoi(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--csv")
      o.csv = value();
    else if (a == "--max_rss_growth_mib")
      o.max_rss_growth_mib = std::stod(value());
    else if (a == "--gpu_memory_cmd")
      o.gpu_memory_cmd = value();
    else {
      std::cerr << "usage: argen_soak --server HOST:PORT [--metrics HOST:PORT] [--pid PID] [--requests N]\n"
                   "       [--concurrency C] [--seed S] [--csv FILE] [--max_rss_growth_mib M] [--gpu_memory_cmd CMD]\n";
      return 2;
    }
  }
  auto stub = argen::v1::ArGen::NewStub(argen::client::MakeChannel(o.server, 64 << 20));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  argen::v1::ModelInfo info;
  const grpc::Status s = stub->GetModelInfo(&context, argen::v1::GetModelInfoRequest(), &info);
  if (!s.ok()) {
    std::cerr << "argen_soak: GetModelInfo: " << s.error_message() << "\n";
    return 3;
  }
  // Every listed policy this model can run (some need files a model may
  // lack, e.g. ssd's head classification): one probe request each.
  std::vector<std::string> policies;
  for (const argen::v1::PolicyInfo& p : info.policies()) {
    argen::v1::GenerateRequest probe;
    probe.set_prompt("a probe");
    probe.mutable_policy()->set_name(p.name());
    const grpc::Status ps = argen::client::CallGenerate(*stub, probe, 300).status;
    if (ps.ok()) {
      policies.push_back(p.name());
    } else {
      std::cout << "argen_soak: policy " << p.name() << " left out: " << ps.error_message() << "\n";
    }
  }
  if (policies.empty()) {
    std::cerr << "argen_soak: no policy runs on this model\n";
    return 3;
  }
  std::cout << "argen_soak: model " << info.model() << " (" << info.backend() << "), " << policies.size() << " of "
            << info.policies_size() << " policies\n";
  return Soak(o, policies, info.image_size()).Run();
}
