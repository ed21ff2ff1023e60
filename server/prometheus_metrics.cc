#include "server/prometheus_metrics.h"

#include <utility>

#include "prometheus/text_serializer.h"

namespace argen::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Seconds from 1 ms to ~20 min, roughly x2.5 apart.
Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 600, 1200};
}
// Engine steps: 100 us to 10 s.
Histogram::BucketBoundaries StepBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
}
// Decode batch rows, up to the largest batch cuda "auto" sizes
// (engine/cuda/pool_sizing.h kMaxAutoBatchRows, 16384: 2,000+ on an H200).
Histogram::BucketBoundaries RowBuckets() { return {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}; }
// Prompt tokens of one request's caption row: 8 to 4096.
Histogram::BucketBoundaries PromptTokenBuckets() { return {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}; }

}  // namespace

PrometheusMetrics::PrometheusMetrics(int64_t kv_budget_bytes)
    : registry_(std::make_shared<prometheus::Registry>()),
      kv_budget_bytes_(static_cast<double>(kv_budget_bytes)),
      requests_(BuildCounter()
                    .Name("argen_requests_total")
                    .Help("Generate requests by final gRPC status and sparsity policy")
                    .Register(*registry_)),
      queue_wait_(BuildHistogram()
                      .Name("argen_queue_wait_seconds")
                      .Help("Time from acceptance to joining the running batch, by policy")
                      .Register(*registry_)),
      first_image_(BuildHistogram()
                       .Name("argen_time_to_first_image_seconds")
                       .Help("Time from acceptance to a request's first image being sent, by policy")
                       .Register(*registry_)),
      image_latency_(BuildHistogram()
                         .Name("argen_image_latency_seconds")
                         .Help("Time from acceptance to each image being sent, by policy")
                         .Register(*registry_)),
      request_latency_(BuildHistogram()
                           .Name("argen_request_latency_seconds")
                           .Help("Time from acceptance to the end of successful requests, by policy")
                           .Register(*registry_)),
      step_time_(BuildHistogram()
                     .Name("argen_decode_step_seconds")
                     .Help("Duration of one engine step (prefill of joiners + one token for every running image)")
                     .Register(*registry_)
                     .Add({}, StepBuckets())),
      step_rows_(BuildHistogram()
                     .Name("argen_decode_step_rows")
                     .Help("Rows in each engine step's decode batch")
                     .Register(*registry_)
                     .Add({}, RowBuckets())),
      loop_time_(BuildHistogram()
                     .Name("argen_decode_loop_seconds")
                     .Help("The decode loop's own time between two engine steps (admission, bookkeeping)")
                     .Register(*registry_)
                     .Add({}, StepBuckets())),
      prefill_tokens_(BuildCounter()
                          .Name("argen_prefill_tokens_total")
                          .Help("Prompt tokens prefilled (all rows)")
                          .Register(*registry_)
                          .Add({})),
      tokens_(BuildCounter()
                  .Name("argen_tokens_total")
                  .Help("Image tokens sampled (rate() gives tokens/s)")
                  .Register(*registry_)
                  .Add({})),
      images_(BuildCounter()
                  .Name("argen_images_total")
                  .Help("Images sent to clients (rate() gives images/s)")
                  .Register(*registry_)
                  .Add({})),
      running_requests_(BuildGauge()
                            .Name("argen_running_requests")
                            .Help("Requests in the running batch (admitted, still decoding)")
                            .Register(*registry_)
                            .Add({})),
      running_rows_(BuildGauge()
                        .Name("argen_running_batch_rows")
                        .Help("Rows (2 per image) of the requests in the running batch")
                        .Register(*registry_)
                        .Add({})),
      queue_depth_(
          BuildGauge().Name("argen_queue_depth").Help("Requests waiting for admission").Register(*registry_).Add({})),
      kv_used_(BuildGauge()
                   .Name("argen_kv_cache_used_bytes")
                   .Help("KV cache bytes the engine holds")
                   .Register(*registry_)
                   .Add({})),
      kv_reserved_(BuildGauge()
                       .Name("argen_kv_cache_reserved_bytes")
                       .Help("Sum of the exact KV needs of admitted requests (admission accounting), the prompts "
                             "they share across requests included")
                       .Register(*registry_)
                       .Add({})),
      kv_shared_prompts_(BuildGauge()
                             .Name("argen_kv_cache_shared_prompt_bytes")
                             .Help("KV bytes of the prompt rows of sharing across requests: every running "
                                   "request's prompts, one copy each however many requests read it "
                                   "(share_prompt_kv_across_requests; 0 when off)")
                             .Register(*registry_)
                             .Add({})),
      kv_budget_(BuildGauge()
                     .Name("argen_kv_cache_budget_bytes")
                     .Help("Configured KV budget (kv_budget_bytes)")
                     .Register(*registry_)
                     .Add({})),
      kv_usage_ratio_(BuildGauge()
                          .Name("argen_kv_cache_usage_ratio")
                          .Help("KV bytes reserved by admitted requests / kv_budget_bytes (0-1)")
                          .Register(*registry_)
                          .Add({})),
      draining_(BuildGauge()
                    .Name("argen_draining")
                    .Help("1 while the server drains on shutdown and refuses new requests")
                    .Register(*registry_)
                    .Add({})),
      previews_sent_(BuildCounter()
                         .Name("argen_previews_sent_total")
                         .Help("Preview images written to clients (gRPC Preview events, HTTP partial images)")
                         .Register(*registry_)
                         .Add({})),
      previews_dropped_(BuildCounter()
                            .Name("argen_previews_dropped_total")
                            .Help("Preview images not sent, by reason (image_path_busy, client_slow, late, "
                                  "request_ended, failed)")
                            .Register(*registry_)),
      auth_failures_(BuildCounter()
                         .Name("argen_auth_failures_total")
                         .Help("Calls refused by the API key check, by gRPC code (UNAUTHENTICATED, "
                               "PERMISSION_DENIED)")
                         .Register(*registry_)),
      build_info_(BuildGauge()
                      .Name("argen_build_info")
                      .Help("Always 1; the labels say which build serves (version: git describe) with which "
                            "backend and model")
                      .Register(*registry_)),
      process_(*registry_),
      streams_stalled_(BuildCounter()
                           .Name("argen_streams_stalled_total")
                           .Help("Generate streams reset because the client read nothing for stream_stall_timeout_s")
                           .Register(*registry_)
                           .Add({})),
      transport_requests_(BuildCounter()
                              .Name("argen_transport_requests_total")
                              .Help("Generate requests by transport (grpc, http), served model and final gRPC status")
                              .Register(*registry_)),
      prefill_seconds_(BuildHistogram()
                           .Name("argen_prefill_seconds")
                           .Help("Duration of the engine step that prefilled a request's prompts, by transport "
                                 "and model")
                           .Register(*registry_)),
      vq_decode_seconds_(BuildHistogram()
                             .Name("argen_vq_decode_seconds")
                             .Help("VQ decode and image encoding of a request's images, by transport and model")
                             .Register(*registry_)),
      prompt_tokens_(BuildHistogram()
                         .Name("argen_prompt_tokens")
                         .Help("Prompt tokens of a request's caption row (the family's chat prompt), by "
                               "transport and model")
                         .Register(*registry_)),
      first_preview_(BuildHistogram()
                         .Name("argen_time_to_first_preview_seconds")
                         .Help("Time from receiving a request to its first preview (partial image) being sent, by "
                               "transport and model")
                         .Register(*registry_)),
      http_responses_(BuildCounter()
                          .Name("argen_http_responses_total")
                          .Help("Responses of the HTTP API port by status code (200, 400, 404, 429, 503, ...)")
                          .Register(*registry_)) {
  kv_budget_.Set(kv_budget_bytes_);
  // Every label value from the start (at 0), so rate() and alerts see the series.
  for (const char* reason : {"image_path_busy", "client_slow", "late", "request_ended", "failed"}) {
    previews_dropped_.Add({{"reason", reason}});
  }
  for (absl::StatusCode code : {absl::StatusCode::kUnauthenticated, absl::StatusCode::kPermissionDenied}) {
    auth_failures_.Add({{"code", absl::StatusCodeToString(code)}});
  }
}

prometheus::Histogram& PrometheusMetrics::ByPolicy(prometheus::Family<prometheus::Histogram>& family,
                                                   std::string_view policy) {
  // Family::Add returns the existing child for labels seen before.
  return family.Add({{"policy", std::string(policy)}}, LatencyBuckets());
}

void PrometheusMetrics::SetKvBudget(int64_t kv_budget_bytes) {
  kv_budget_bytes_ = static_cast<double>(kv_budget_bytes);
  kv_budget_.Set(kv_budget_bytes_);
}

void PrometheusMetrics::OnStep(const scheduler::StepStats& stats) {
  step_time_.Observe(absl::ToDoubleSeconds(stats.duration));
  step_rows_.Observe(stats.rows_decoded);
  if (stats.interval > absl::ZeroDuration()) loop_time_.Observe(absl::ToDoubleSeconds(stats.loop_time));
  prefill_tokens_.Increment(static_cast<double>(stats.prefill_tokens));
  tokens_.Increment(stats.tokens_sampled);
  queue_depth_.Set(stats.queue_depth);
}

void PrometheusMetrics::OnQueueDepth(int32_t depth) { queue_depth_.Set(depth); }

void PrometheusMetrics::OnKvBytes(int64_t in_use, int64_t reserved, int64_t shared_prompts) {
  kv_used_.Set(static_cast<double>(in_use));
  kv_reserved_.Set(static_cast<double>(reserved));
  kv_shared_prompts_.Set(static_cast<double>(shared_prompts));
  kv_usage_ratio_.Set(kv_budget_bytes_ > 0 ? static_cast<double>(reserved) / kv_budget_bytes_ : 0);
}

void PrometheusMetrics::OnRunning(int32_t rows, int32_t requests) {
  running_rows_.Set(rows);
  running_requests_.Set(requests);
}

void PrometheusMetrics::OnRequestStarted(std::string_view policy, absl::Duration queue_wait) {
  ByPolicy(queue_wait_, policy).Observe(absl::ToDoubleSeconds(queue_wait));
}

void PrometheusMetrics::OnFirstImage(std::string_view policy, absl::Duration since_accepted) {
  ByPolicy(first_image_, policy).Observe(absl::ToDoubleSeconds(since_accepted));
}

void PrometheusMetrics::OnImage(std::string_view policy, absl::Duration since_accepted) {
  images_.Increment();
  ByPolicy(image_latency_, policy).Observe(absl::ToDoubleSeconds(since_accepted));
}

void PrometheusMetrics::OnRequestDone(std::string_view policy, const absl::Status& status,
                                      const scheduler::RequestMetrics& metrics) {
  requests_.Add({{"status", absl::StatusCodeToString(status.code())}, {"policy", std::string(policy)}}).Increment();
  if (status.ok()) ByPolicy(request_latency_, policy).Observe(absl::ToDoubleSeconds(metrics.total));
}

void PrometheusMetrics::SetDraining(bool draining) { draining_.Set(draining ? 1 : 0); }

void PrometheusMetrics::BeforeScrape() { process_.Update(); }

void PrometheusMetrics::SetBuildInfo(const BuildInfo& build) {
  build_info_.Add({{"version", build.version}, {"backend", build.backend}, {"model", build.model}}).Set(1);
  {
    absl::MutexLock lock(&model_mu_);
    model_ = build.model;
  }
  // Every transport's series from the start (at 0), so rate() and the
  // dashboard see them before the first request of each kind.
  for (const char* transport : {"grpc", "http"}) {
    const std::map<std::string, std::string> labels = TransportLabels(transport);
    prefill_seconds_.Add(labels, LatencyBuckets());
    vq_decode_seconds_.Add(labels, LatencyBuckets());
    prompt_tokens_.Add(labels, PromptTokenBuckets());
    first_preview_.Add(labels, LatencyBuckets());
  }
}

std::map<std::string, std::string> PrometheusMetrics::TransportLabels(std::string_view transport) const {
  absl::MutexLock lock(&model_mu_);
  return {{"model", model_}, {"transport", std::string(transport)}};
}

void PrometheusMetrics::OnTransportRequestDone(std::string_view transport, const absl::Status& status,
                                               const scheduler::RequestMetrics* metrics) {
  std::map<std::string, std::string> labels = TransportLabels(transport);
  if (metrics != nullptr) {
    if (metrics->prefill > absl::ZeroDuration()) {
      prefill_seconds_.Add(labels, LatencyBuckets()).Observe(absl::ToDoubleSeconds(metrics->prefill));
    }
    if (metrics->vq_decode > absl::ZeroDuration()) {
      vq_decode_seconds_.Add(labels, LatencyBuckets()).Observe(absl::ToDoubleSeconds(metrics->vq_decode));
    }
    if (metrics->prompt_tokens > 0) prompt_tokens_.Add(labels, PromptTokenBuckets()).Observe(metrics->prompt_tokens);
  }
  labels["status"] = absl::StatusCodeToString(status.code());
  transport_requests_.Add(labels).Increment();
}

void PrometheusMetrics::OnFirstPreview(std::string_view transport, absl::Duration since_received) {
  first_preview_.Add(TransportLabels(transport), LatencyBuckets()).Observe(absl::ToDoubleSeconds(since_received));
}

void PrometheusMetrics::OnHttpResponse(int status) {
  http_responses_.Add({{"code", std::to_string(status)}}).Increment();
}

void PrometheusMetrics::OnStreamStalled() { streams_stalled_.Increment(); }

void PrometheusMetrics::OnPreviewSent() { previews_sent_.Increment(); }

void PrometheusMetrics::OnPreviewDropped(std::string_view reason) {
  previews_dropped_.Add({{"reason", std::string(reason)}}).Increment();
}

void PrometheusMetrics::OnAuthFailure(absl::StatusCode code) {
  auth_failures_.Add({{"code", absl::StatusCodeToString(code)}}).Increment();
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address, int32_t port,
                                                                        std::shared_ptr<prometheus::Registry> registry,
                                                                        Authorize authorize,
                                                                        std::function<void()> before_scrape,
                                                                        bool reuse_port) {
  HttpServerOptions options;
  options.address = address;
  options.port = port;
  options.address_key = "metrics_address";
  options.port_key = "metrics_port";
  // One thread per open connection (up to 256, newest first beyond): a
  // silent client holds only its own thread, never a scrape's.
  options.threads = 4;
  options.max_connections = 256;
  options.reuse_port = reuse_port;
  options.max_body_bytes = 4096;
  options.read_timeout = absl::Seconds(5);
  options.keep_alive_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Bind(options);
  if (!http.ok()) return http.status();
  (*http)->Get("/metrics", [registry = std::move(registry), authorize = std::move(authorize),
                            before_scrape = std::move(before_scrape)](const httplib::Request& request,
                                                                      httplib::Response& response) {
    if (authorize) {
      const absl::Status allowed = authorize(request.get_header_value("Authorization"));
      if (!allowed.ok()) {
        response.status = allowed.code() == absl::StatusCode::kPermissionDenied ? 403 : 401;
        if (response.status == 401) response.set_header("WWW-Authenticate", "Bearer");
        response.set_content(std::string(allowed.message()) + "\n", "text/plain; charset=utf-8");
        return;
      }
    }
    if (before_scrape) before_scrape();
    response.set_content(prometheus::TextSerializer().Serialize(registry->Collect()),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  if (absl::Status s = (*http)->Start(); !s.ok()) return s;
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(*std::move(http)));
}

}  // namespace argen::server
