// The OpenAI-compatible HTTP API over loopback against the deterministic
// FakeEngine: images as b64 PNGs, streaming with partial images in OpenAI's
// event shapes, every bad field a 400 naming it, 413, 401/403, 429 with
// Retry-After (queue and per-key limits), 503 while draining, /health,
// /ready, /v1/models, and a client disconnect cancelling its request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/image/jpeg.h"
#include "scheduler/tests/fake_engine.h"
#include "server/auth.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using nlohmann::json;
using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;

server::ServerConfig HttpConfig() {
  server::ServerConfig c = LoopbackConfig("fake");
  c.http_address = "127.0.0.1";
  c.http_port = 0;
  c.metrics_port = 0;
  return c;
}

// The server's limits are the engine's: the fake takes them from the config.
absl::StatusOr<TestServer> StartFake(server::ServerConfig config, FakeEngineOptions options = {}) {
  options.kv_budget_bytes = config.kv_budget_bytes;
  options.max_batch_rows = config.max_batch_rows;
  options.max_images_per_request = config.max_images_per_request;
  return StartServer(config, std::make_unique<FakeEngine>(options));
}

json Body(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

TEST(HttpApiTest, GenerateReturnsBase64PngsInOpenAiShape) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result r = PostImages(
      *client, {{"prompt", "a red circle"}, {"n", 2}, {"size", "8x8"}, {"response_format", "b64_json"}, {"seed", 5}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const json body = Body(r);
  ASSERT_TRUE(body["data"].is_array());
  ASSERT_EQ(body["data"].size(), 2u);
  for (const json& image : body["data"]) {
    EXPECT_EQ(PngSize(Base64Decode(image["b64_json"].get<std::string>())), std::make_pair(8, 8));
  }
  EXPECT_TRUE(body["created"].is_number_integer());
  EXPECT_EQ(body["output_format"], "png");
  EXPECT_EQ(body["size"], "8x8");
  EXPECT_EQ(body["usage"]["output_tokens"], 2 * 16);
  EXPECT_EQ(body["usage"]["input_tokens"], scheduler::testing::FakePromptTokens("a red circle"));
  EXPECT_EQ(body["argen"]["seed"], 5);
  // Same seed, same images.
  httplib::Result again = PostImages(*client, {{"prompt", "a red circle"}, {"n", 2}, {"seed", 5}});
  ASSERT_TRUE(again);
  EXPECT_EQ(Body(again)["data"], body["data"]);
}

TEST(HttpApiTest, JpegOutputOnRequest) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result r = PostImages(*client, {{"prompt", "x"}, {"output_format", "jpeg"}, {"output_compression", 80}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = Body(r);
  EXPECT_EQ(body["output_format"], "jpeg");
  const std::string jpeg = Base64Decode(body["data"][0]["b64_json"]);
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodeJpeg(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 8);
  EXPECT_EQ(decoded->height, 8);
}

TEST(HttpApiTest, StreamingSendsPartialImagesThenTheCompletedImage) {
  FakeEngineOptions eo;
  eo.step_time = absl::Milliseconds(2);
  ASSERT_STARTED(t, StartFake(HttpConfig(), eo));
  auto client = HttpClient(t.server->http_port());
  httplib::Result r = PostImages(*client, {{"prompt", "a cat"}, {"stream", true}, {"partial_images", 2}, {"seed", 1}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<SseEvent> events = ParseSse(r->body);
  ASSERT_EQ(events.size(), 3u) << r->body;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].event, "image_generation.partial_image");
    const json p = json::parse(events[i].data);
    EXPECT_EQ(p["type"], "image_generation.partial_image");
    EXPECT_EQ(p["partial_image_index"], i);
    EXPECT_EQ(p["size"], "8x8");
    EXPECT_EQ(p["output_format"], "png");
    EXPECT_TRUE(p["created_at"].is_number_integer());
    EXPECT_EQ(PngSize(Base64Decode(p["b64_json"])), std::make_pair(8, 8));
  }
  EXPECT_EQ(events[2].event, "image_generation.completed");
  const json done = json::parse(events[2].data);
  EXPECT_EQ(done["type"], "image_generation.completed");
  EXPECT_EQ(PngSize(Base64Decode(done["b64_json"])), std::make_pair(8, 8));
  EXPECT_EQ(done["usage"]["output_tokens"], 16);
  // Progress travels as SSE comments, which clients ignore.
  EXPECT_NE(r->body.find(": progress 16/16\n\n"), std::string::npos) << r->body.substr(0, 300);
  // The previews were counted.
  EXPECT_NE(HttpGet(t.server->metrics_port(), "/metrics").find("argen_previews_sent_total 2"), std::string::npos);
}

TEST(HttpApiTest, EveryBadFieldGetsA400NamingIt) {
  server::ServerConfig c = HttpConfig();
  c.max_images_per_request = 4;
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"n", 1}}, "prompt"},
      {{{"prompt", ""}}, "prompt"},                     // the shared check
      {{{"prompt", std::string(500, 'p')}}, "prompt"},  // the engine's length check
      {{{"prompt", "x"}, {"n", 5}}, "n"},               // max_images_per_request
      {{{"prompt", "x"}, {"size", "1024x1024"}}, "size"},
      {{{"prompt", "x"}, {"response_format", "url"}}, "response_format"},
      {{{"prompt", "x"}, {"temperature", -1}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", 2}}, "top_p"},
      {{{"prompt", "x"}, {"top_k", -3}}, "top_k"},
      {{{"prompt", "x"}, {"guidance_scale", 1000}}, "guidance_scale"},
      {{{"prompt", "x"}, {"policy", "nope"}}, "policy.name"},
      {{{"prompt", "x"}, {"policy", {{"name", "diagonal"}, {"sparsity", 1.5}}}}, "policy.sparsity"},
      {{{"prompt", "x"}, {"stream", true}, {"partial_images", 3}, {"output_format", "gif"}}, "output_format"},
  };
  for (const auto& [request, param] : cases) {
    httplib::Result r = PostImages(*client, request);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << request.dump() << " -> " << r->body;
    const json e = Body(r)["error"];
    EXPECT_EQ(e["param"], param) << request.dump() << " -> " << r->body;
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_TRUE(e["message"].get<std::string>().rfind(param + ": ", 0) == 0) << r->body;
  }
  httplib::Result not_json = client->Post("/v1/images/generations", "{not json", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_TRUE(Body(not_json)["error"]["param"].is_null());
  // Unknown routes in the same error shape.
  httplib::Result missing = client->Get("/v1/images/edits");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Body(missing)["error"]["type"], "not_found_error");
}

TEST(HttpApiTest, OversizedBodiesAre413) {
  server::ServerConfig c = HttpConfig();
  c.http_max_body_bytes = 4096;
  ASSERT_STARTED(t, StartFake(c));
  const std::string big = json{{"prompt", std::string(10000, 'x')}}.dump();
  auto client = HttpClient(t.server->http_port());
  httplib::Result r = client->Post("/v1/images/generations", big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_EQ(Body(r)["error"]["code"], "request_too_large");
  // Chunked, so no Content-Length to refuse it by.
  std::string chunked =
      "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 3; ++i) absl::StrAppend(&chunked, "1000\r\n", std::string(4096, ' '), "\r\n");
  absl::StrAppend(&chunked, "0\r\n\r\n");
  const std::string raw = HttpExchange(t.server->http_port(), chunked);
  EXPECT_EQ(raw.substr(0, raw.find("\r\n")), "HTTP/1.1 413 Payload Too Large") << raw.substr(0, 200);
}

TEST(HttpApiTest, KeysGive401And403AndCapPriority) {
  TempDir dir;
  const std::string keys = dir.Write("keys", absl::StrCat("gen ", server::Sha256Hex("gen-key"), "\n", "viewer ",
                                                          server::Sha256Hex("view-key"), " rights=info\n"));
  server::ServerConfig c = HttpConfig();
  c.api_keys_file = keys;
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  const json request = {{"prompt", "a cat"}};
  httplib::Result none = PostImages(*client, request);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Body(none)["error"]["code"], "invalid_api_key");
  httplib::Result wrong = PostImages(*client, request, {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  httplib::Result viewer = PostImages(*client, request, {{"Authorization", "Bearer view-key"}});
  ASSERT_TRUE(viewer);
  EXPECT_EQ(viewer->status, 403) << viewer->body;
  EXPECT_EQ(client->Get("/v1/models", {{"Authorization", "Bearer view-key"}})->status, 200);
  EXPECT_EQ(client->Get("/v1/models")->status, 401);
  // The default cap is normal: high is refused, normal and low run.
  httplib::Result high =
      PostImages(*client, {{"prompt", "x"}, {"priority", "high"}}, {{"Authorization", "Bearer gen-key"}});
  ASSERT_TRUE(high);
  EXPECT_EQ(high->status, 403);
  EXPECT_EQ(Body(high)["error"]["param"], "priority");
  httplib::Result ok =
      PostImages(*client, {{"prompt", "x"}, {"priority", "low"}}, {{"Authorization", "Bearer gen-key"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // Health stays open; no key shows up in /metrics.
  EXPECT_EQ(client->Get("/health")->status, 200);
  const std::string metrics = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("argen_auth_failures_total{code=\"UNAUTHENTICATED\"} 3"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("gen-key"), std::string::npos);
  EXPECT_EQ(metrics.find("view-key"), std::string::npos);
}

TEST(HttpApiTest, HealthAndMetricsCanRequireAKey) {
  TempDir dir;
  server::ServerConfig c = HttpConfig();
  c.api_keys_file = dir.Write("keys", absl::StrCat("ops ", server::Sha256Hex("ops-key"), " rights=health,metrics\n",
                                                   "gen ", server::Sha256Hex("gen-key"), "\n"));
  c.open_health = false;
  c.open_metrics = false;
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  EXPECT_EQ(client->Get("/health")->status, 401);
  EXPECT_EQ(client->Get("/ready", {{"Authorization", "Bearer gen-key"}})->status, 403);
  EXPECT_EQ(client->Get("/ready", {{"Authorization", "Bearer ops-key"}})->status, 200);
  auto metrics = HttpClient(t.server->metrics_port());
  EXPECT_EQ(metrics->Get("/metrics")->status, 401);
  EXPECT_EQ(metrics->Get("/metrics", {{"Authorization", "Bearer gen-key"}})->status, 403);
  httplib::Result scrape = metrics->Get("/metrics", {{"Authorization", "Bearer ops-key"}});
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  EXPECT_NE(scrape->body.find("argen_auth_failures_total{code=\"PERMISSION_DENIED\"} 2"), std::string::npos)
      << scrape->body;
}

// The status of a POST run on another thread (-1: no answer).
struct Answer {
  int status = -1;
  std::string body;
};

std::thread PostAsync(int port, json body, Answer* out, httplib::Headers headers = {}) {
  return std::thread([port, body = std::move(body), out, headers = std::move(headers)] {
    auto client = HttpClient(port);
    httplib::Result r = PostImages(*client, body, headers);
    if (r) *out = Answer{r->status, r->body};
  });
}

TEST(HttpApiTest, QueueFullIs429WithRetryAfter) {
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(4);  // ~260 ms per request
  server::ServerConfig c = HttpConfig();
  c.max_batch_rows = 2;
  c.queue_limit = 1;
  ASSERT_STARTED(t, StartFake(c, eo));
  const int port = t.server->http_port();
  Answer running, queued;
  std::thread a = PostAsync(port, {{"prompt", "running"}}, &running);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows == 2; }));
  std::thread b = PostAsync(port, {{"prompt", "queued"}}, &queued);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().queue_depth == 1; }));
  auto client = HttpClient(port);
  httplib::Result full = PostImages(*client, {{"prompt", "one too many"}});
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Body(full)["error"]["code"], "queue_full");
  a.join();
  b.join();
  EXPECT_EQ(running.status, 200);
  EXPECT_EQ(queued.status, 200);
}

TEST(HttpApiTest, PerKeyConcurrencyLimitIs429) {
  TempDir dir;
  server::ServerConfig c = HttpConfig();
  c.api_keys_file = dir.Write("keys", absl::StrCat("one ", server::Sha256Hex("k1"), " max_concurrent_requests=1\n"));
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(4);
  ASSERT_STARTED(t, StartFake(c, eo));
  const httplib::Headers key = {{"Authorization", "Bearer k1"}};
  Answer first;
  std::thread a = PostAsync(t.server->http_port(), {{"prompt", "first"}}, &first, key);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 1; }));
  auto client = HttpClient(t.server->http_port());
  httplib::Result second = PostImages(*client, {{"prompt", "second"}}, key);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 429);
  EXPECT_EQ(Body(second)["error"]["code"], "key_limit_exceeded");
  EXPECT_NE(Body(second)["error"]["message"].get<std::string>().find("'one'"), std::string::npos);
  EXPECT_FALSE(second->get_header_value("Retry-After").empty());
  a.join();
  EXPECT_EQ(first.status, 200);
  // The slot is free again.
  EXPECT_EQ(PostImages(*client, {{"prompt", "third"}}, key)->status, 200);
}

TEST(HttpApiTest, DrainingAnswers503AndReadyTurnsFalse) {
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(4);
  ASSERT_STARTED(t, StartFake(HttpConfig(), eo));
  const int port = t.server->http_port();
  auto client = HttpClient(port);
  EXPECT_EQ(client->Get("/ready")->status, 200);
  EXPECT_EQ(Body(client->Get("/ready"))["status"], "ready");
  Answer running;
  std::thread a = PostAsync(port, {{"prompt", "running"}}, &running);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows > 0; }));
  std::thread stopper([&] { t.server->Shutdown(); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().draining; }));
  httplib::Result refused = PostImages(*client, {{"prompt", "late"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_FALSE(refused->get_header_value("Retry-After").empty());
  httplib::Result ready = client->Get("/ready");
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(Body(ready)["status"], "draining");
  EXPECT_EQ(client->Get("/health")->status, 200);  // alive while draining
  a.join();
  stopper.join();
  EXPECT_EQ(running.status, 200) << "the accepted request finishes during the drain";
}

TEST(HttpApiTest, ModelsListsTheServedModelAndItsLimits) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  const json list = Body(client->Get("/v1/models"));
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  const json& m = list["data"][0];
  EXPECT_EQ(m["id"], "fake");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["argen"]["sizes"], json({"8x8"}));
  EXPECT_EQ(m["argen"]["max_images_per_request"], 16);
  EXPECT_EQ(m["argen"]["max_partial_images"], 3);
  EXPECT_EQ(Body(client->Get("/v1/models/fake"))["id"], "fake");
  EXPECT_EQ(client->Get("/v1/models/dall-e-3")->status, 404);
  EXPECT_EQ(Body(client->Get("/health"))["status"], "ok");
}

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

TEST(HttpApiTest, ClientDisconnectCancelsTheRequestAndFreesItsKv) {
  FakeEngineOptions eo;
  eo.token_grid = 32;  // 1024 tokens: ~5 s if it ran to the end
  eo.step_time = absl::Milliseconds(5);
  ASSERT_STARTED(t, StartFake(HttpConfig(), eo));
  for (const bool stream : {false, true}) {
    const std::string body = json{{"prompt", "long"}, {"n", 2}, {"stream", stream}}.dump();
    const int fd = ConnectTo(t.server->http_port());
    const std::string request = absl::StrCat(
        "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: ",
        body.size(), "\r\n\r\n", body);
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows == 4; })) << stream;
    const int64_t steps_at_close = t.engine->steps();
    close(fd);
    const absl::Time closed = absl::Now();
    ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 0; }, absl::Seconds(3)))
        << stream;
    EXPECT_LT(absl::Now() - closed, absl::Seconds(1)) << stream;
    EXPECT_EQ(t.server->engine().KvBytesInUse(), 0) << stream;
    EXPECT_LT(t.engine->steps() - steps_at_close, 100) << "it did not run to the end; stream=" << stream;
  }
  const std::string metrics = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("status=\"CANCELLED\""), std::string::npos) << metrics;
}

}  // namespace
}  // namespace argen::serving_test
