// argen_client generate: one prompt (--prompt) or a batch (--prompts-file),
// images written as they arrive, progress bar on stderr, text or JSON result.
#include <atomic>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/generate_call.h"
#include "client/image_writer.h"
#include "client/interrupt.h"
#include "client/progress_bar.h"
#include "client/prompts_file.h"
#include "client/units.h"
#include "nlohmann/json.hpp"

namespace argen::client {
namespace {

using nlohmann::json;

struct Job {
  v1::GenerateRequest request;
  int line = 0;  // prompts-file line; 0 for --prompt
  // Filled by the call.
  std::string request_id;
  int64_t tokens_done = 0;  // over its images
  GenerateResult result;
  std::vector<json> written;  // {path, index, seed, width, height}
  std::string local_error;
};

json MetricsJson(const v1::RequestMetrics& m) {
  json j = {{"queue_wait_seconds", m.queue_wait_seconds()},
            {"prefill_seconds", m.prefill_seconds()},
            {"decode_seconds", m.decode_seconds()},
            {"vq_decode_seconds", m.vq_decode_seconds()},
            {"total_seconds", m.total_seconds()},
            {"tokens_per_second", m.tokens_per_second()},
            {"images_per_second", m.images_per_second()},
            {"peak_kv_bytes", m.peak_kv_bytes()},
            {"mean_batch_rows", m.mean_batch_rows()},
            {"steps", m.steps()},
            {"rows", m.rows()}};
  if (m.drafts_proposed() > 0) {  // speculative decoding
    j["drafts_proposed"] = m.drafts_proposed();
    j["drafts_accepted"] = m.drafts_accepted();
  }
  return j;
}

json JobJson(const Job& job) {
  const v1::Accepted& a = job.result.accepted;
  json j = {{"prompt", job.request.prompt()},
            {"request_id", job.request_id},
            {"status", GrpcCodeName(job.result.status.error_code())},
            {"images", job.written},
            {"wall_seconds", job.result.wall_seconds}};
  if (job.line > 0) j["line"] = job.line;
  if (!job.result.status.ok()) j["error"] = job.result.status.error_message();
  if (!job.local_error.empty()) j["local_error"] = job.local_error;
  if (!a.request_id().empty()) {
    j["seed"] = a.seed();
    j["policy"] = {{"name", a.policy().name()},
                   {"l_dec", a.policy().l_dec()},
                   {"n_att", a.policy().n_att()},
                   {"n_slots", a.policy().n_slots()},
                   {"n_sink", a.policy().n_sink()},
                   {"n_recent", a.policy().n_recent()},
                   {"kv_cache_dtype", a.policy().kv_cache_dtype()}};
    j["kv_bytes"] = a.kv_bytes();
  }
  if (job.result.has_metrics) j["metrics"] = MetricsJson(job.result.metrics);
  return j;
}

// The jobs' image counts for CheckImagesPerRequest (generate_call.h).
absl::Status CheckImageCounts(v1::ArGen::Stub& stub, const CommonOptions& common, const std::vector<Job>& jobs,
                              const std::string& prompts_file) {
  std::vector<std::pair<int32_t, int>> counts;
  for (const Job& job : jobs) counts.emplace_back(job.request.num_images(), job.line);
  return CheckImagesPerRequest(stub, common.timeout_seconds, counts, prompts_file);
}

}  // namespace

int RunGenerate(const CommonOptions& common, const GenerateOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<v1::GenerateRequest> base = RequestFromFlags(options.request);
  if (!base.ok()) {
    err << "argen_client generate: " << base.status().message() << "\n";
    return kUsage;
  }
  base->set_request_id(options.request_id);

  std::vector<Job> jobs;
  if (options.prompts_file.empty()) {
    jobs.emplace_back().request = *base;
  } else {
    absl::StatusOr<PromptsFile> file = ReadPromptsFile(options.prompts_file, *base);
    if (!file.ok()) {
      err << "argen_client generate: " << file.status().message() << "\n";
      return file.status().code() == absl::StatusCode::kNotFound ? kLocalError : kUsage;
    }
    if (!file->ignored_fields.empty() && !options.quiet) {
      err << "argen_client generate: ignoring unknown fields in " << options.prompts_file << ": "
          << absl::StrJoin(file->ignored_fields, ", ") << "\n";
    }
    for (PromptLine& p : file->lines) {
      Job job;
      job.request = std::move(p.request);
      job.line = p.line;
      // One --request_id for many lines: <id>-<line>, so files do not collide.
      if (!options.request_id.empty() && job.request.request_id() == options.request_id && file->lines.size() > 1) {
        job.request.set_request_id(absl::StrCat(options.request_id, "-", p.line));
      }
      jobs.push_back(std::move(job));
    }
  }

  auto stub = v1::ArGen::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  if (absl::Status s = CheckImageCounts(*stub, common, jobs, options.prompts_file); !s.ok()) {
    err << "argen_client generate: " << s.message() << "\n";
    return kUsage;
  }
  std::optional<ImageWriter> writer;
  if (options.output.empty()) {
    writer.emplace(options.out, options.overwrite);
  } else {
    writer.emplace(
        ImageWriter::OutputFile{options.output, jobs[0].request.num_images() == 0 ? 1 : jobs[0].request.num_images()},
        options.overwrite);
  }
  if (absl::Status s = writer->CheckWritable(); !s.ok()) {
    err << "argen_client generate: " << s.message() << "\n";
    return kLocalError;
  }
  int64_t total_images = 0;
  for (const Job& job : jobs) {
    const int32_t count = job.request.num_images() == 0 ? 1 : job.request.num_images();
    total_images += count;
    // The server's ULIDs are new names; an --output file is named already.
    if (job.request.request_id().empty() && options.output.empty()) continue;
    if (absl::Status s = writer->CheckFree(job.request.request_id(), count); !s.ok()) {
      err << "argen_client generate: " << s.message() << "\n";
      return kLocalError;
    }
  }

  const bool show = !options.quiet;
  const bool text = !options.json;
  ProgressBar bar(err, common.interactive, 0);
  std::mutex mu;  // jobs' progress, images_done, `out`
  int64_t images_done = 0;
  std::atomic<size_t> next{0};

  auto run_job = [&](Job& job) {
    const int32_t count = job.request.num_images() == 0 ? 1 : job.request.num_images();
    auto progress_label = [&] {
      return jobs.size() > 1 ? absl::StrCat(images_done, "/", total_images, " images, ", jobs.size(), " prompts")
                             : absl::StrCat(images_done, "/", total_images, " images");
    };
    auto on_event = [&](v1::GenerateEvent& e) {
      if (e.has_accepted()) {
        std::lock_guard<std::mutex> lock(mu);
        job.request_id = e.accepted().request_id();
        if (show) {
          const v1::Accepted& a = e.accepted();
          bar.Message(absl::StrCat("accepted ", a.request_id(), ": seed ", a.seed(), ", policy ", a.policy().name(),
                                   " (", a.policy().n_slots(), " KV slots/row), KV ", HumanBytes(a.kv_bytes()), " = ",
                                   a.kv_bytes(), " bytes",
                                   a.policy().kv_cache_dtype().empty() ? "" : " " + a.policy().kv_cache_dtype(),
                                   ", queue position ", a.queue_position()));
        }
      } else if (e.has_progress()) {
        std::lock_guard<std::mutex> lock(mu);
        job.tokens_done = int64_t{e.progress().tokens_done()} * count;
        if (show) {
          int64_t done = 0;
          for (const Job& j : jobs) done += j.tokens_done;
          bar.SetTotal(int64_t{e.progress().tokens_total()} * total_images);
          bar.Update(done, progress_label());
        }
      } else if (e.has_image()) {
        const v1::Image& img = e.image();
        const std::string id = job.request_id.empty() ? job.request.request_id() : job.request_id;
        absl::StatusOr<std::filesystem::path> path = writer->Write(id, img.index(), img.png());
        std::lock_guard<std::mutex> lock(mu);
        if (!path.ok()) {
          if (job.local_error.empty()) job.local_error = std::string(path.status().message());
          if (show) bar.Message(absl::StrCat("argen_client generate: ", path.status().message()));
          return;
        }
        ++images_done;
        job.written.push_back({{"path", path->string()},
                               {"index", img.index()},
                               {"seed", img.seed()},
                               {"width", img.width()},
                               {"height", img.height()}});
        if (text) {
          bar.Print(out, absl::StrCat("wrote ", path->string(), " (", img.width(), "x", img.height(), ", seed ",
                                      img.seed(), ", index ", img.index(), ")"));
        }
        if (show) bar.Relabel(progress_label());
      }
    };
    CallOptions call;
    call.timeout_seconds = common.timeout_seconds;
    call.keep_images = false;  // written as they arrive
    job.result = CallGenerate(*stub, job.request, call, on_event);
    if (job.request_id.empty()) job.request_id = job.request.request_id();
  };

  const size_t workers = std::min<size_t>(jobs.size(), options.prompts_file.empty() ? 1 : options.parallel);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < jobs.size();) run_job(jobs[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  bar.Finish();

  // Ctrl-C: the calls were cancelled; what was written stays (client/interrupt.h).
  const bool interrupted = InterruptRequested();
  int rc = kOk;
  for (const Job& job : jobs) {
    if (interrupted && job.result.status.error_code() == grpc::StatusCode::CANCELLED) continue;
    if (!job.result.status.ok()) {
      const std::string what =
          job.line > 0 ? absl::StrCat("generate (", options.prompts_file, ":", job.line, ")") : std::string("generate");
      const int code = ReportRpcError(what, common.server, job.result.status, err);
      if (rc == kOk) rc = code;
    } else if (!job.local_error.empty()) {
      if (rc == kOk) rc = kLocalError;
    }
  }
  if (options.json) {
    if (jobs.size() == 1 && options.prompts_file.empty()) {
      out << JobJson(jobs[0]).dump(2) << "\n";
    } else {
      json all = json::array();
      int ok = 0;
      for (const Job& job : jobs) {
        all.push_back(JobJson(job));
        ok += job.result.status.ok() && job.local_error.empty();
      }
      out << json{{"requests", all}, {"ok", ok}, {"failed", static_cast<int>(jobs.size()) - ok}}.dump(2) << "\n";
    }
  } else if (jobs.size() == 1) {
    if (jobs[0].result.has_metrics) PrintMetrics(jobs[0].result.metrics, out);
  } else {
    for (const Job& job : jobs) {
      out << options.prompts_file << ":" << job.line << " " << job.request_id << " "
          << GrpcCodeName(job.result.status.error_code()) << ", " << job.written.size() << " images";
      if (job.result.has_metrics) out << ", " << job.result.metrics.total_seconds() << " s";
      out << "\n";
    }
  }
  if (interrupted) {
    int cancelled = 0, not_sent = 0;
    for (const Job& job : jobs) {
      if (job.result.status.error_code() != grpc::StatusCode::CANCELLED) continue;
      ++(job.result.status.error_message() == kNotSentMessage ? not_sent : cancelled);
    }
    err << "argen_client generate: interrupted: " << images_done << " of " << total_images << " images written, "
        << cancelled << (cancelled == 1 ? " request" : " requests") << " cancelled";
    if (not_sent > 0) err << ", " << not_sent << " not sent";
    err << "\n";
    return kInterruptedExitCode;
  }
  return rc;
}

}  // namespace argen::client
