#include "server/argen_server.h"

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "engine/image/png.h"
#include "engine/model/weight_format.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "server/reflection_v1.h"
#include "server/tls_config.h"

namespace argen::server {

namespace {

absl::StatusOr<std::unique_ptr<engine::Engine>> LoadEngine(const ServerConfig& config) {
  engine::EngineOptions options;
  options.model_dir = config.model_dir;
  options.family_options = config.family_options;
  options.backend = config.backend;
  options.vq_backend = config.vq_backend;
  options.vq_precision = config.vq_precision;
  options.weight_format = *model::ParseWeightFormat(config.weight_dtype);  // validated by the config
  options.share_prompt_kv = config.share_prompt_kv;
  options.share_prompt_kv_across_requests = config.share_prompt_kv_across_requests;
  options.threads = ResolvedThreads(config);
  // The engine owns the limits; the scheduler and GetModelInfo read them from it.
  options.kv_budget_bytes = ResolvedKvBudget(config);
  options.max_batch_rows = ResolvedMaxBatchRows(config);
  options.max_images_per_request = config.max_images_per_request;
  options.default_kv_format = config.default_policy.kv_format;  // cuda auto sizing: rows of the default dtype
  absl::StatusOr<std::unique_ptr<engine::Engine>> created = engine::CreateEngine(options);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("loading model_dir '", config.model_dir, "': ", created.status().message()));
  }
  return created;
}

int Millis(double seconds) { return static_cast<int>(std::min(seconds * 1000.0, double{INT32_MAX})); }

// Port sharing, connection limits and keepalive (config: allow_port_sharing, connections.*).
void ApplyTransportLimits(const ServerConfig& config, grpc::ServerBuilder& builder) {
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port
  // would start and share the traffic silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, config.allow_port_sharing ? 1 : 0);
  const ConnectionLimits& c = config.connections;
  if (c.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, c.max_concurrent_streams);
  }
  if (c.max_connection_idle_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Millis(c.max_connection_idle_s));
  }
  if (c.max_connection_age_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Millis(c.max_connection_age_s));
  }
  if (c.max_connection_age_grace_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, Millis(c.max_connection_age_grace_s));
  }
  if (c.keepalive_time_s > 0) builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(c.keepalive_time_s));
  if (c.keepalive_timeout_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(c.keepalive_timeout_s));
  }
  if (c.max_threads > 0) {
    // The sync server holds one thread per open stream; past the quota new
    // calls get RESOURCE_EXHAUSTED instead of more threads.
    grpc::ResourceQuota quota("argen_server");
    quota.SetMaxThreads(c.max_threads);
    builder.SetResourceQuota(quota);
  }
}

scheduler::SchedulerOptions SchedulerOptionsOf(const ServerConfig& config, const engine::ModelInfo& info) {
  scheduler::SchedulerOptions options;
  options.max_prefill_tokens = ResolvedMaxPrefillTokens(config, info.max_batch_rows);
  // The GPU VQ decoder is several times faster at batch: decode the finished
  // requests' images together. The CPU one takes ~0.3 s an image either way,
  // so each request's images go alone (its first image is not held back by others').
  const bool gpu_decoder = config.vq_backend == "cuda" || (config.vq_backend == "auto" && config.backend == "cuda");
  options.max_decode_batch = gpu_decoder ? 64 : 1;
  options.queue_limit = config.queue_limit;
  options.progress_interval = absl::Milliseconds(config.progress_interval_ms);
  options.image_workers = ResolvedImageWorkers(config);
  options.priority_aging = absl::Seconds(config.priority_aging_s);
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArgenServer>> ArgenServer::Start(const ServerConfig& config,
                                                                std::unique_ptr<engine::Engine> engine,
                                                                scheduler::ImageEncoder encoder) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  std::unique_ptr<ArgenServer> server(new ArgenServer());
  server->config_ = config;
  // Certificates and keys first: a bad file fails in a second, not after the model loaded.
  const TlsFiles tls_files{config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file};
  if (tls_files.enabled()) {
    absl::StatusOr<TlsMaterial> tls = LoadTls(tls_files);
    if (!tls.ok()) return tls.status();
    server->tls_ = std::make_unique<TlsMaterial>(*std::move(tls));
  }
  if (!config.api_keys_file.empty()) {
    absl::StatusOr<ApiKeys> keys = ApiKeys::Load(config.api_keys_file);
    if (!keys.ok()) return keys.status();
    server->keys_ = std::make_unique<ApiKeys>(*std::move(keys));
  }
  server->prometheus_ = std::make_unique<PrometheusMetrics>(ResolvedKvBudget(config));
  // HTTP comes up before the model loads, so /health and /ready (503 loading) answer meanwhile.
  if (config.http_port >= 0) {
    HttpServerOptions http;
    http.address = config.http_address;
    http.port = config.http_port;
    http.threads = config.http_threads;
    http.reuse_port = config.allow_port_sharing;
    http.max_body_bytes = static_cast<size_t>(config.http_max_body_bytes);
    http.tls = server->tls_.get();
    http.allowed_origins = config.http_allowed_origins;
    http.on_response = [metrics = server->prometheus_.get()](int status) { metrics->OnHttpResponse(status); };
    absl::StatusOr<std::unique_ptr<HttpServer>> bound = HttpServer::Bind(http);
    if (!bound.ok()) return bound.status();
    server->http_ = *std::move(bound);
    server->http_api_ =
        std::make_unique<HttpImagesApi>(server->http_.get(), config, server->keys_.get(), server->prometheus_.get());
    if (absl::Status s = server->http_->Start(); !s.ok()) return s;
  }
  if (engine == nullptr) {
    absl::StatusOr<std::unique_ptr<engine::Engine>> loaded = LoadEngine(config);
    if (!loaded.ok()) return loaded.status();
    engine = *std::move(loaded);
  }
  server->engine_ = std::move(engine);
  const engine::ModelInfo& info = server->engine_->info();
  // The model family's sampling defaults where the config sets none.
  ApplyModelSamplingDefaults(server->config_, info.default_sampling);
  // The configured defaults must be valid requests for this model (the engine's rules).
  if (absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(config.default_policy, engine::PolicyGrid(info));
      !p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("key 'default_policy': ", p.status().message()));
  }
  {
    engine::GenerationRequest defaults;
    defaults.prompt = "defaults";
    if (info.num_classes > 0) {  // a class-conditional model takes a class, not a caption
      defaults.prompt.clear();
      defaults.class_id = 0;
    }
    defaults.sampling = server->config_.default_sampling;
    defaults.policy = config.default_policy;
    if (absl::Status s = engine::ValidateRequest(defaults, info); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("key 'default_sampling': ", s.message()));
    }
  }
  if (const int32_t w = config.default_parallel_window; w > engine::MaxParallelWindow(info)) {
    return absl::InvalidArgumentError(absl::StrCat("key 'default_decoding.parallel_window': must be in [0, ",
                                                   engine::MaxParallelWindow(info), "] for model ", info.name,
                                                   " (its tokens per image row), got ", w));
  }
  if (config.default_parallel_window > 0 && config.default_speculative_window > 0) {
    return absl::InvalidArgumentError(
        "key 'default_decoding.speculative_window': speculative decoding does not combine with parallel decoding "
        "(default_decoding.parallel_window > 0); set one of them to 0");
  }
  if (encoder == nullptr) {
    encoder = [](const engine::RgbImage& rgb) { return image::EncodePng(rgb.rgb, rgb.width, rgb.height); };
  }

  server->prometheus_->SetBuildInfo(BuildInfo{Version(), info.backend, info.name});
  // The budget the engine enforces (its pool), now that it is loaded.
  server->prometheus_->SetKvBudget(info.kv_budget_bytes);
  scheduler::SchedulerOptions scheduler_options = SchedulerOptionsOf(config, info);
  scheduler_options.on_fatal_error = [raw = server.get()](const absl::Status& s) { raw->OnFatalError(s); };
  scheduler::SchedulerObserver* observer = server->prometheus_.get();
  if (!config.step_log.empty()) {
    absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open(config.step_log, observer);
    if (!log.ok()) return log.status();
    server->step_log_ = *std::move(log);
    observer = server->step_log_.get();
  }
  absl::StatusOr<std::unique_ptr<scheduler::Scheduler>> sched =
      scheduler::Scheduler::Create(server->engine_.get(), scheduler_options, std::move(encoder), observer);
  if (!sched.ok()) return sched.status();
  server->scheduler_ = *std::move(sched);
  server->gate_ = std::make_unique<RequestGate>(server->scheduler_.get(), info, server->config_, server->keys_.get(),
                                                server->prometheus_.get());
  server->service_ = std::make_unique<ArgenService>(server->gate_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's built-in health service has no protobuf descriptors; touching the
  // generated ones links them into the pool reflection answers from, so
  // `grpcurl describe grpc.health.v1.Health` and calls without -proto work.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::ServerBuilder builder;
  builder.SetOption(MakeReflectionV1Option());
  const std::string address = absl::StrCat(config.listen_address, ":", config.port);
  builder.AddListeningPort(address, GrpcServerCredentials(server->tls_.get()), &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(config.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(std::min<int64_t>(config.max_message_bytes, INT32_MAX)));
  ApplyTransportLimits(config, builder);
  server->grpc_ = builder.BuildAndStart();
  if (server->grpc_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("port: cannot listen for gRPC on ", address,
                     config.allow_port_sharing ? "" : " (in use by another process? allow_port_sharing is off)"));
  }
  if (grpc::HealthCheckServiceInterface* health = server->grpc_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::ArGen::service_full_name(), true);
  }
  if (config.metrics_port >= 0) {
    MetricsEndpoint::Authorize authorize;
    if (server->keys_ != nullptr && !config.open_metrics) {
      const ApiKeys* keys = server->keys_.get();
      PrometheusMetrics* metrics = server->prometheus_.get();
      authorize = [keys, metrics](absl::string_view authorization) {
        absl::StatusOr<const ApiKey*> key = Authorize(keys, authorization, Right::kMetrics);
        if (!key.ok()) metrics->OnAuthFailure(key.status().code());
        return key.status();
      };
    }
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics = MetricsEndpoint::Start(
        config.metrics_address, config.metrics_port, server->prometheus_->registry(), std::move(authorize),
        [metrics = server->prometheus_.get()] { metrics->BeforeScrape(); }, config.allow_port_sharing);
    if (!metrics.ok()) {
      server->Shutdown();
      return metrics.status();
    }
    server->metrics_ = *std::move(metrics);
  }
  if (server->http_api_ != nullptr) server->http_api_->SetReady(server->gate_.get());
  return server;
}

void ArgenServer::OnFatalError(const absl::Status& status) {
  if (grpc_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = grpc_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
  }
  if (http_api_ != nullptr) http_api_->SetDraining();  // HTTP /ready: 503
  std::function<void(const absl::Status&)> handler;
  {
    absl::MutexLock lock(&fatal_mu_);
    if (!fatal_.ok()) return;
    fatal_ = status;
    handler = fatal_handler_;
  }
  if (handler) handler(status);
}

void ArgenServer::SetFatalErrorHandler(std::function<void(const absl::Status&)> handler) {
  absl::Status already;
  {
    absl::MutexLock lock(&fatal_mu_);
    fatal_handler_ = handler;
    already = fatal_;
  }
  if (!already.ok() && handler) handler(already);
}

absl::Status ArgenServer::fatal_error() const {
  absl::MutexLock lock(&fatal_mu_);
  return fatal_;
}

bool ArgenServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return drained_in_time_;
  shut_down_ = true;
  if (grpc_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = grpc_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
  }
  if (http_api_ != nullptr) http_api_->SetDraining();
  prometheus_->SetDraining(true);
  if (scheduler_ != nullptr) drained_in_time_ = scheduler_->Drain(absl::Seconds(config_.drain_timeout_s));
  if (http_ != nullptr) {
    // Responses and streams end right after their last event; let them flush.
    http_api_->WaitIdle(absl::Seconds(5));
    http_->Stop();
  }
  if (grpc_ != nullptr) {
    // Streams end right after their last event; give them a moment to flush.
    grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc_->Wait();
  }
  return drained_in_time_;
}

ArgenServer::~ArgenServer() {
  if (scheduler_ != nullptr || http_ != nullptr) Shutdown();
  metrics_.reset();
  http_api_.reset();
  http_.reset();
  grpc_.reset();
  service_.reset();
  gate_.reset();
  scheduler_.reset();
  step_log_.reset();  // after the scheduler: its last steps are written
}

}  // namespace argen::server
