#include "server/http_images_api.h"

#include <variant>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/image/jpeg.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "nlohmann/json.hpp"
#include "server/model_info.h"
#include "server/openapi.h"
#include "server/playground.h"
#include "server/prometheus_metrics.h"
#include "server/request_mapping.h"
#include "server/request_trace.h"

namespace argen::server {
namespace {

using nlohmann::json;

// How often a waiting handler looks at its client's connection.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

constexpr char kJson[] = "application/json";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json Usage(int32_t prompt_tokens, int32_t images, int32_t image_tokens) {
  const int64_t output = int64_t{images} * image_tokens;
  return {{"input_tokens", prompt_tokens},
          {"input_tokens_details", {{"text_tokens", prompt_tokens}, {"image_tokens", 0}}},
          {"output_tokens", output},
          {"total_tokens", prompt_tokens + output}};
}

std::string SseEvent(const std::string& name, const json& data) {
  return absl::StrCat("event: ", name, "\ndata: ", Dump(data), "\n\n");
}

// One generation's state, shared by the handler and (when streaming) the
// content provider that outlives it.
struct Generation {
  Submission submitted;
  ImagesRequest request;
  int socket_fd = -1;
  int32_t image_tokens = 0;
  int32_t prompt_tokens = 0;
  uint64_t seed = 0;
  std::string policy;
  std::string kv_cache_dtype;       // resolved: auto or fp8
  std::vector<std::string> images;  // by index (non-streaming)
  bool finished = false;
  std::unique_ptr<RequestTrace> trace;  // the log line and the PNG metadata
  std::function<void()> on_end;         // the API's active count
  ~Generation() {
    if (!finished && submitted.handle != nullptr) submitted.handle->Cancel();
    if (on_end) on_end();
  }
};

json MetricsJson(const scheduler::RequestMetrics& m) {
  return {{"queue_wait_seconds", absl::ToDoubleSeconds(m.queue_wait)},
          {"total_seconds", absl::ToDoubleSeconds(m.total)},
          {"tokens_per_second", m.tokens_per_second},
          {"images_per_second", m.images_per_second},
          {"peak_kv_bytes", m.peak_kv_bytes}};
}

json ArgenSection(const Generation& g, const std::string& request_id) {
  return {{"request_id", request_id}, {"seed", g.seed}, {"policy", g.policy}, {"kv_cache_dtype", g.kv_cache_dtype}};
}

}  // namespace

HttpImagesApi::HttpImagesApi(HttpServer* http, const ServerConfig& config, const ApiKeys* keys,
                             PrometheusMetrics* metrics)
    : config_(config), keys_(keys), metrics_(metrics), started_unix_(absl::ToUnixSeconds(absl::Now())) {
  http->Post("/v1/images/generations", [this](const httplib::Request& req, httplib::Response& res,
                                              const httplib::ContentReader& reader) { Generate(req, res, reader); });
  http->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
  http->Get("/v1/models/{model}", [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
  http->Get("/health", [this](const httplib::Request& req, httplib::Response& res) { Health(req, res, false); });
  http->Get("/ready", [this](const httplib::Request& req, httplib::Response& res) { Health(req, res, true); });
  http->Get("/openapi.json",
            [](const httplib::Request&, httplib::Response& res) { res.set_content(Dump(OpenApiDocument()), kJson); });
  // The playground: one self-contained page (no key needed to load it; its calls carry one).
  http->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(PlaygroundHtml()), "text/html; charset=utf-8");
  });
  httplib::Server& s = http->routes();
  const size_t max_body = static_cast<size_t>(config.http_max_body_bytes);
  std::vector<std::string> route_list;
  for (const HttpRoute& r : http->served_routes()) route_list.push_back(absl::StrCat(r.method, " ", r.path));
  const std::string routes = absl::StrJoin(route_list, ", ");
  const HttpServerOptions& limits = http->options();
  const std::string header_limits = absl::StrCat("at most ", limits.max_header_count, " header fields and ",
                                                 limits.max_header_bytes, " bytes of them");
  // Every error without a body of its own (no route, wrong method, 413 from
  // the library, 431, malformed requests) in OpenAI's shape.
  http->SetErrorRenderer(httplib::Server::HandlerWithResponse(
      [max_body, routes, header_limits](const httplib::Request& req, httplib::Response& res) {
        HttpApiError e;
        e.status = res.status;
        if (res.status == 404) {
          e.message = absl::StrCat("no route ", req.method, " ", req.path, " (routes: ", routes, ")");
          e.type = "not_found_error";
          e.code = "not_found";
        } else if (res.status == 405) {
          e.message = absl::StrCat("method ", req.method, " is not allowed on ", OriginFormPath(req.path),
                                   " (Allow: ", res.get_header_value("Allow"), ")");
          e.code = "method_not_allowed";
        } else if (res.status == 431) {
          e.message = absl::StrCat("request header fields too large: ", header_limits);
          e.code = "request_header_fields_too_large";
        } else if (res.status == 413) {
          e.message = absl::StrCat("request body larger than http_max_body_bytes (", max_body, " bytes)");
          e.code = "request_too_large";
        } else {
          e.message = res.status == 400 ? "malformed HTTP request" : absl::StrCat("HTTP status ", res.status);
          e.type = res.status >= 500 ? "server_error" : "invalid_request_error";
          if (res.status == 400) e.code = "malformed_request";
        }
        res.set_content(ErrorBody(e), kJson);
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    HttpApiError e;
    e.status = 500;
    e.type = "server_error";
    e.code = "internal_error";
    e.message = "internal error while handling the request";
    res.status = 500;
    res.set_content(ErrorBody(e), kJson);
  });
}

void HttpImagesApi::SetReady(RequestGate* gate) {
  absl::MutexLock lock(&mu_);
  gate_ = gate;
  if (state_ == State::kLoading) state_ = State::kReady;
}

void HttpImagesApi::SetDraining() {
  absl::MutexLock lock(&mu_);
  state_ = State::kDraining;
}

bool HttpImagesApi::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return active_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

HttpImagesApi::State HttpImagesApi::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

RequestGate* HttpImagesApi::gate() const {
  absl::MutexLock lock(&mu_);
  return gate_;
}

void HttpImagesApi::Fail(httplib::Response& response, const HttpApiError& error) {
  response.status = error.status;
  if (error.retry_after_s > 0) response.set_header("Retry-After", std::to_string(error.retry_after_s));
  if (error.status == 401) response.set_header("WWW-Authenticate", "Bearer");
  response.set_content(ErrorBody(error), kJson);
}

bool HttpImagesApi::Authorized(const httplib::Request& request, httplib::Response& response, Right right,
                               const ApiKey** key) {
  absl::StatusOr<const ApiKey*> k = server::Authorize(keys_, request.get_header_value("Authorization"), right);
  if (!k.ok()) {
    if (metrics_ != nullptr) metrics_->OnAuthFailure(k.status().code());
    Fail(response, ToHttpError(k.status()));
    return false;
  }
  *key = *k;
  return true;
}

void HttpImagesApi::Health(const httplib::Request& request, httplib::Response& response, bool readiness) {
  const ApiKey* key = nullptr;
  if (!config_.open_health && !Authorized(request, response, Right::kHealth, &key)) return;
  const State s = state();
  if (!readiness) {
    response.set_content(Dump({{"status", "ok"}}), kJson);
    return;
  }
  if (s != State::kReady) {
    response.status = 503;
    response.set_content(Dump({{"status", s == State::kLoading ? "loading" : "draining"}}), kJson);
    return;
  }
  response.set_content(Dump({{"status", "ready"}}), kJson);
}

void HttpImagesApi::Models(const httplib::Request& request, httplib::Response& response) {
  const ApiKey* key = nullptr;
  if (!Authorized(request, response, Right::kInfo, &key)) return;
  RequestGate* g = gate();
  if (g == nullptr) {
    Fail(response, ToHttpError(absl::UnavailableError("the model is still loading")));
    return;
  }
  const engine::ModelInfo& info = g->info();
  std::vector<std::string> names = {info.name};  // the model's own, then its aliases
  for (const std::string& alias : config_.served_model_names) {
    if (std::find(names.begin(), names.end(), alias) == names.end()) names.push_back(alias);
  }
  if (request.matches.size() > 1 && std::find(names.begin(), names.end(), request.matches[1]) == names.end()) {
    HttpApiError e;
    e.status = 404;
    e.param = "model";
    e.code = "model_not_found";
    e.message = absl::StrCat("model '", request.matches[1].str(), "' is not served here; this server serves '",
                             absl::StrJoin(names, "', '"), "'");
    Fail(response, e);
    return;
  }
  // The same description GetModelInfo sends (server/model_info.h): the
  // engine's sized limits, the server's defaults.
  v1::ModelInfo described;
  FillModelInfo(info, g->config(), &described);
  json policies = json::array();
  for (const v1::PolicyInfo& p : described.policies()) policies.push_back(p.name());
  json sizes = json::array();
  for (const v1::ImageSize& size : described.image_sizes()) {
    sizes.push_back(absl::StrCat(size.width(), "x", size.height()));
  }
  json kv_cache_dtypes = json::array();
  for (const std::string& dtype : described.kv_cache_dtypes()) kv_cache_dtypes.push_back(dtype);
  const v1::SparsityPolicy& default_policy = described.default_policy();
  json model = {
      {"id", described.model()},
      {"object", "model"},
      {"created", started_unix_},
      {"owned_by", "argen"},
      {"argen",
       {{"backend", described.backend()},
        {"sizes", sizes},
        {"default_size", absl::StrCat(described.default_size().width(), "x", described.default_size().height())},
        {"image_size", described.image_size()},
        {"token_grid", described.token_grid()},
        {"image_tokens", described.image_tokens()},
        {"max_prompt_tokens", described.max_prompt_tokens()},
        {"max_images_per_request", described.max_images_per_request()},
        {"max_partial_images", std::min(3, described.max_previews())},
        {"max_batch_rows", described.max_batch_rows()},
        {"queue_limit", described.queue_limit()},
        {"kv_budget_bytes", described.kv_budget_bytes()},
        {"policies", policies},
        {"default_policy",
         {{"name", default_policy.name()},
          {"sparsity", default_policy.sparsity()},
          {"n_att", default_policy.n_att()},
          {"n_recent", default_policy.n_recent()},
          {"n_sink", default_policy.n_sink()},
          {"kv_cache_dtype", default_policy.kv_cache_dtype()}}},
        {"kv_cache_dtypes", kv_cache_dtypes},
        {"weight_dtype", described.weight_dtype()},
        {"priorities", {"low", "normal", "high"}}}}};
  model["argen"]["model"] = info.name;  // what an alias stands for
  if (request.matches.size() > 1) {
    model["id"] = request.matches[1].str();
    response.set_content(Dump(model), kJson);
    return;
  }
  json data = json::array();
  for (const std::string& name : names) {
    model["id"] = name;
    data.push_back(model);
  }
  response.set_content(Dump({{"object", "list"}, {"data", data}}), kJson);
}

void HttpImagesApi::Generate(const httplib::Request& request, httplib::Response& response,
                             const httplib::ContentReader& content_reader) {
  const State s = state();
  if (s != State::kReady) {
    Fail(response,
         ToHttpError(absl::UnavailableError(s == State::kLoading ? "the model is still loading"
                                                                 : "server is draining: not accepting new requests")));
    return;
  }
  RequestGate* const g = gate();
  const ApiKey* key = nullptr;
  if (!Authorized(request, response, Right::kGenerate, &key)) return;

  // The body, bounded (Content-Length is checked before anything is read).
  const size_t max_body = static_cast<size_t>(config_.http_max_body_bytes);
  HttpApiError too_large;
  too_large.status = 413;
  too_large.code = "request_too_large";
  too_large.message = absl::StrCat("request body larger than http_max_body_bytes (", max_body, " bytes)");
  uint64_t declared = 0;
  if (request.has_header("Content-Length") && absl::SimpleAtoi(request.get_header_value("Content-Length"), &declared) &&
      declared > max_body) {
    response.set_header("Connection", "close");
    Fail(response, too_large);
    return;
  }
  std::string body;
  bool over = false;
  const bool read = content_reader([&](const char* data, size_t length) {
    if (body.size() + length > max_body) {
      over = true;
      return false;
    }
    body.append(data, length);
    return true;
  });
  if (over || response.status == 413) {
    response.set_header("Connection", "close");
    Fail(response, too_large);
    return;
  }
  if (!read) {
    HttpApiError e;
    e.message = "could not read the request body";
    Fail(response, e);
    return;
  }

  ImagesApiModel model;
  model.model = g->info().name;
  model.aliases = config_.served_model_names;
  model.strict_fields = config_.http_strict_fields;
  model.image_size = g->info().image_size;
  model.jpeg = true;
  for (const engine::ImageLayout& l : engine::ImageLayouts(g->info())) {
    model.sizes.push_back(absl::StrCat(l.width, "x", l.height));
  }
  const engine::ImageLayout default_layout = engine::DefaultLayout(g->info());
  model.default_size = absl::StrCat(default_layout.width, "x", default_layout.height);
  std::variant<ImagesRequest, HttpApiError> parsed = ParseImagesRequest(body, model);
  const std::string peer = absl::StrCat(request.remote_addr, ":", request.remote_port);
  if (auto* e = std::get_if<HttpApiError>(&parsed)) {
    if (metrics_ != nullptr) {
      metrics_->OnRequestDone("invalid", absl::InvalidArgumentError(e->message), scheduler::RequestMetrics{});
    }
    RequestTrace("http", peer, v1::GenerateRequest(), "invalid", metrics_)
        .Ended(absl::InvalidArgumentError(e->message));
    Fail(response, *e);
    return;
  }

  auto gen = std::make_shared<Generation>();
  gen->request = std::get<ImagesRequest>(std::move(parsed));
  if (!gen->request.ignored_fields.empty()) {  // RFC 7234's miscellaneous persistent warning
    response.set_header(
        "Warning",
        absl::StrCat("299 argen \"unknown fields ignored: ", absl::StrJoin(gen->request.ignored_fields, ", "), "\""));
  }
  // X-Request-Id names the request unless the body does (request_id).
  if (gen->request.generate.request_id().empty() && request.has_header("X-Request-Id")) {
    gen->request.generate.set_request_id(request.get_header_value("X-Request-Id"));
  }
  engine::GenerationRequest sized;  // the request's size: its decode length
  sized.width = gen->request.generate.width();
  sized.height = gen->request.generate.height();
  absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(sized, g->info());
  gen->image_tokens = layout.ok() ? layout->image_tokens : g->info().image_tokens;
  gen->policy = g->PolicyLabel(gen->request.generate);
  scheduler::ImageEncoder encoder;  // empty: PNG, the scheduler's
  if (gen->request.output_format == "jpeg") {
    const int32_t quality = gen->request.output_compression;
    encoder = [quality](const engine::RgbImage& rgb) {
      return image::EncodeJpeg(rgb.rgb, rgb.width, rgb.height, quality);
    };
  }
  gen->trace = std::make_unique<RequestTrace>("http", peer, gen->request.generate, gen->policy, metrics_);
  absl::StatusOr<Submission> submitted =
      g->Submit(key, gen->request.generate, absl::InfiniteFuture(), std::move(encoder));
  if (!submitted.ok()) {
    gen->trace->Ended(submitted.status());
    Fail(response, ToHttpError(submitted.status()));
    return;
  }
  gen->submitted = *std::move(submitted);
  response.headers.erase("X-Request-Id");
  response.set_header("X-Request-Id", gen->submitted.handle->id());
  gen->trace->Submitted(gen->submitted.handle->id(), gen->submitted.generation, g->info().name);
  gen->socket_fd = ConnectionSocket(request);
  {
    absl::MutexLock lock(&mu_);
    ++active_;
  }
  gen->on_end = [this] {
    absl::MutexLock lock(&mu_);
    --active_;
  };
  scheduler::RequestHandle& handle = *gen->submitted.handle;
  const std::string size = gen->request.size;
  const std::string format = gen->request.output_format;
  const int64_t created = absl::ToUnixSeconds(absl::Now());
  PrometheusMetrics* metrics = metrics_;

  // Bookkeeping common to both modes; false when the event was Finished.
  auto note = [gen](scheduler::RequestEvent& event) {
    gen->trace->OnEvent(event);
    if (auto* q = std::get_if<scheduler::QueuedEvent>(&event)) {
      gen->seed = q->seed;
      gen->prompt_tokens = q->prompt_tokens;
      gen->policy = std::string(sparse::PolicyName(q->policy.kind));
      gen->kv_cache_dtype = std::string(sparse::KvFormatName(q->policy.kv_format));
    } else if (std::holds_alternative<scheduler::StartedEvent>(event)) {
      gen->submitted.lease.Started();
    }
  };

  if (!gen->request.stream) {
    while (true) {
      if (PeerClosed(gen->socket_fd)) {
        handle.Cancel();  // the client is gone; the scheduler frees its KV before the next step
      }
      std::optional<scheduler::RequestEvent> event = handle.Next(kPollInterval);
      if (!event) continue;
      note(*event);
      if (auto* image = std::get_if<scheduler::ImageEvent>(&*event)) {
        if (static_cast<size_t>(image->index) >= gen->images.size()) gen->images.resize(image->index + 1);
        gen->images[image->index] = std::move(image->encoded);
        continue;
      }
      auto* finished = std::get_if<scheduler::FinishedEvent>(&*event);
      if (finished == nullptr) continue;
      gen->finished = true;
      if (!finished->status.ok()) {
        Fail(response, ToHttpError(finished->status));
        return;
      }
      json data = json::array();
      for (const std::string& png : gen->images) data.push_back({{"b64_json", absl::Base64Escape(png)}});
      json argen = ArgenSection(*gen, handle.id());
      argen["metrics"] = MetricsJson(finished->metrics);
      response.set_content(
          Dump({{"created", created},
                {"data", data},
                {"background", "opaque"},
                {"output_format", format},
                {"size", size},
                {"usage", Usage(gen->prompt_tokens, static_cast<int32_t>(gen->images.size()), gen->image_tokens)},
                {"argen", argen}}),
          kJson);
      return;
    }
  }

  // Streaming: server-sent events, OpenAI's image_generation.partial_image
  // then image_generation.completed per image (argen adds image_index);
  // progress and, at the end, the request's metrics go out as SSE comments
  // (ignored by clients; progress keeps proxies awake).
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");
  response.set_chunked_content_provider(
      "text/event-stream",
      [gen, note, size, format, metrics](size_t, httplib::DataSink& sink) {
        scheduler::RequestHandle& h = *gen->submitted.handle;
        if (gen->finished) {
          sink.done();
          return true;
        }
        if (PeerClosed(gen->socket_fd)) {
          h.Cancel();
          return false;
        }
        std::optional<scheduler::RequestEvent> event = h.Next(kPollInterval);
        if (!event) return true;
        note(*event);
        std::string out;
        bool preview = false;
        const int64_t now = absl::ToUnixSeconds(absl::Now());
        if (auto* p = std::get_if<scheduler::ProgressEvent>(&*event)) {
          out = absl::StrCat(": progress ", p->tokens_done, "/", p->tokens_total, "\n\n");
        } else if (auto* v = std::get_if<scheduler::PreviewEvent>(&*event)) {
          preview = true;
          out = SseEvent("image_generation.partial_image", {{"type", "image_generation.partial_image"},
                                                            {"b64_json", absl::Base64Escape(v->encoded)},
                                                            {"created_at", now},
                                                            {"size", size},
                                                            {"quality", "auto"},
                                                            {"background", "opaque"},
                                                            {"output_format", format},
                                                            {"partial_image_index", v->index},
                                                            {"image_index", v->image}});
        } else if (auto* image = std::get_if<scheduler::ImageEvent>(&*event)) {
          out = SseEvent("image_generation.completed", {{"type", "image_generation.completed"},
                                                        {"b64_json", absl::Base64Escape(image->encoded)},
                                                        {"created_at", now},
                                                        {"size", size},
                                                        {"quality", "auto"},
                                                        {"background", "opaque"},
                                                        {"output_format", format},
                                                        {"usage", Usage(gen->prompt_tokens, 1, gen->image_tokens)},
                                                        {"image_index", image->index},
                                                        {"argen", ArgenSection(*gen, h.id())}});
        } else if (auto* finished = std::get_if<scheduler::FinishedEvent>(&*event)) {
          gen->finished = true;
          if (!finished->status.ok()) {
            const HttpApiError e = ToHttpError(finished->status);
            json error = json::parse(ErrorBody(e));
            error["type"] = "error";
            out = SseEvent("error", error);
          } else {  // a comment, as progress: OpenAI's clients ignore it, the playground shows it
            out = absl::StrCat(": argen.metrics ", Dump(MetricsJson(finished->metrics)), "\n\n");
          }
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          h.Cancel();
          return false;
        }
        if (preview && metrics != nullptr) metrics->OnPreviewSent();
        if (gen->finished) sink.done();
        return true;
      },
      [gen](bool) {
        // The stream ended (done, client gone or server stopping): a request
        // still running is cancelled when `gen` goes away.
      });
}

}  // namespace argen::server
