// What real HTTP clients need from both HTTP ports (the images API and
// /metrics), against the FakeEngine (issue #34):
//   * apps that hard-code a model name (served_model_names aliases), send
//     fields newer than the server (ignored with a Warning; strict mode: 400),
//     or a wrong model (404 model_not_found);
//   * 405 with Allow for a known path and another method, OPTIONS, CORS;
//   * X-Request-Id in and out, request_id in the body;
//   * param / code on every field error;
//   * header count and size bounds (431), absolute-form targets (RFC 9112);
//   * /openapi.json naming exactly the routes served;
//   * the playground page, self-contained.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "scheduler/tests/fake_engine.h"
#include "server/http_images_api.h"
#include "server/openapi.h"
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

absl::StatusOr<TestServer> StartFake(server::ServerConfig config) {
  FakeEngineOptions options;
  options.kv_budget_bytes = config.kv_budget_bytes;
  options.max_batch_rows = config.max_batch_rows;
  options.max_images_per_request = config.max_images_per_request;
  return StartServer(config, std::make_unique<FakeEngine>(options));
}

json Body(const httplib::Result& r) { return r ? json::parse(r->body, nullptr, false) : json(); }

// The status line of a raw exchange ("HTTP/1.1 200 OK").
std::string StatusLine(const std::string& raw) { return raw.substr(0, raw.find("\r\n")); }

TEST(HttpConformanceTest, ServedModelNamesAreAliasesOfTheModel) {
  server::ServerConfig c = HttpConfig();
  c.served_model_names = {"dall-e-3", "gpt-image-1"};
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  for (const char* name : {"fake", "dall-e-3", "gpt-image-1"}) {
    httplib::Result r = PostImages(*client, {{"prompt", "a cat"}, {"model", name}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << name << ": " << r->body;
    httplib::Result m = client->Get(absl::StrCat("/v1/models/", name));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200) << m->body;
    EXPECT_EQ(Body(m)["id"], name);
    EXPECT_EQ(Body(m)["argen"]["model"], "fake");
  }
  const json list = Body(client->Get("/v1/models"));
  ASSERT_EQ(list["data"].size(), 3u) << list.dump();
  EXPECT_EQ(list["data"][0]["id"], "fake");
  EXPECT_EQ(list["data"][1]["id"], "dall-e-3");
  EXPECT_EQ(list["data"][2]["id"], "gpt-image-1");
  EXPECT_EQ(list["data"][1]["argen"]["max_images_per_request"], list["data"][0]["argen"]["max_images_per_request"]);
}

TEST(HttpConformanceTest, AWrongModelIs404ModelNotFoundOnEveryRoute) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result generate = PostImages(*client, {{"prompt", "a cat"}, {"model", "dall-e-3"}});
  ASSERT_TRUE(generate);
  EXPECT_EQ(generate->status, 404) << generate->body;
  EXPECT_EQ(Body(generate)["error"]["code"], "model_not_found");
  EXPECT_EQ(Body(generate)["error"]["param"], "model");
  httplib::Result describe = client->Get("/v1/models/dall-e-3");
  ASSERT_TRUE(describe);
  EXPECT_EQ(describe->status, 404);
  EXPECT_EQ(Body(describe)["error"]["code"], "model_not_found");
  EXPECT_EQ(Body(describe)["error"]["param"], "model");
}

TEST(HttpConformanceTest, UnknownFieldsAreIgnoredWithAWarningUnlessStrict) {
  {
    ASSERT_STARTED(t, StartFake(HttpConfig()));
    auto client = HttpClient(t.server->http_port());
    // Fields newer SDKs send, and one nobody knows.
    httplib::Result r = PostImages(*client, {{"prompt", "a cat"},
                                             {"quality", "high"},
                                             {"safety_identifier", "user-1234"},
                                             {"colour", "red"},
                                             {"input_fidelity", "high"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Warning"), "299 argen \"unknown fields ignored: colour, input_fidelity\"");
    // Known fields: no warning.
    httplib::Result known = PostImages(*client, {{"prompt", "a cat"}, {"quality", "hd"}});
    ASSERT_TRUE(known);
    EXPECT_EQ(known->status, 200);
    EXPECT_FALSE(known->has_header("Warning"));
  }
  server::ServerConfig strict = HttpConfig();
  strict.http_strict_fields = true;
  ASSERT_STARTED(t, StartFake(strict));
  auto client = HttpClient(t.server->http_port());
  httplib::Result r = PostImages(*client, {{"prompt", "a cat"}, {"colour", "red"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["param"], "colour");
  EXPECT_EQ(Body(r)["error"]["code"], "unknown_parameter");
  EXPECT_EQ(PostImages(*client, {{"prompt", "a cat"}, {"safety_identifier", "u"}})->status, 200);
}

TEST(HttpConformanceTest, RequestIdsGoInAndComeOut) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result by_header = PostImages(*client, {{"prompt", "a cat"}}, {{"X-Request-Id", "trace-42"}});
  ASSERT_TRUE(by_header);
  ASSERT_EQ(by_header->status, 200) << by_header->body;
  EXPECT_EQ(by_header->get_header_value("X-Request-Id"), "trace-42");
  EXPECT_EQ(Body(by_header)["argen"]["request_id"], "trace-42");
  httplib::Result by_body = PostImages(*client, {{"prompt", "a cat"}, {"request_id", "body-7"}});
  ASSERT_TRUE(by_body);
  ASSERT_EQ(by_body->status, 200) << by_body->body;
  EXPECT_EQ(by_body->get_header_value("X-Request-Id"), "body-7");
  EXPECT_EQ(Body(by_body)["argen"]["request_id"], "body-7");
  // None given: the server's id, in the header and the body alike.
  httplib::Result assigned = PostImages(*client, {{"prompt", "a cat"}});
  ASSERT_TRUE(assigned);
  EXPECT_FALSE(assigned->get_header_value("X-Request-Id").empty());
  EXPECT_EQ(Body(assigned)["argen"]["request_id"], assigned->get_header_value("X-Request-Id"));
  // The shared rule (gRPC's request_id) names the field.
  httplib::Result bad = PostImages(*client, {{"prompt", "a cat"}, {"request_id", "has space"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Body(bad)["error"]["param"], "request_id");
  // Other routes echo it.
  EXPECT_EQ(client->Get("/health", {{"X-Request-Id", "probe-1"}})->get_header_value("X-Request-Id"), "probe-1");
}

TEST(HttpConformanceTest, FieldErrorsNameTheirParamAndCode) {
  server::ServerConfig c = HttpConfig();
  c.max_batch_rows = 2;  // one image's guidance pair
  c.max_images_per_request = 4;
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  httplib::Result never_fits = PostImages(*client, {{"prompt", "a cat"}, {"n", 2}});
  ASSERT_TRUE(never_fits);
  EXPECT_EQ(never_fits->status, 400) << never_fits->body;
  EXPECT_EQ(Body(never_fits)["error"]["code"], "request_never_fits");
  EXPECT_EQ(Body(never_fits)["error"]["param"], "n");
  httplib::Result not_json = client->Post("/v1/images/generations", "{not json", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(Body(not_json)["error"]["code"], "invalid_json");
}

// The real engine's token-count check (after the byte check) names the
// field too: it said "prompt is N tokens, ..." and HTTP answered param null.
TEST(HttpConformanceTest, APromptOverTheTokenLimitNamesPromptOnTheRealEngine) {
  server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/tiny-mha");
  c.http_address = "127.0.0.1";
  c.http_port = 0;
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> server = server::ArgenServer::Start(c);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = HttpClient((*server)->http_port());
  std::string words;
  for (int i = 0; i < 2000; ++i) words += "word ";  // under max_prompt_bytes, over max_prompt_tokens
  for (const bool stream : {false, true}) {
    httplib::Result r = PostImages(*client, {{"prompt", words}, {"stream", stream}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body.substr(0, 300);
    const json e = Body(r)["error"];
    EXPECT_EQ(e["param"], "prompt") << r->body.substr(0, 300);
    EXPECT_NE(e["message"].get<std::string>().find("max_prompt_tokens"), std::string::npos) << r->body.substr(0, 300);
  }
  // A request the HTTP layer cannot parse at all (an unknown HTTP version:
  // refused at the request line, with no read to wait out) has a code too.
  const std::string raw =
      HttpExchange((*server)->http_port(), "POST /v1/models HTTP/9\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(raw.find("\"code\":\"malformed_request\""), std::string::npos) << raw;
}

TEST(HttpConformanceTest, KnownPathsWithAnotherMethodAre405WithAllowOnBothPorts) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto api = HttpClient(t.server->http_port());
  httplib::Result get_post_route = api->Get("/v1/images/generations");
  ASSERT_TRUE(get_post_route);
  EXPECT_EQ(get_post_route->status, 405);
  EXPECT_EQ(get_post_route->get_header_value("Allow"), "POST, OPTIONS");
  EXPECT_EQ(Body(get_post_route)["error"]["code"], "method_not_allowed");
  httplib::Result post_models = api->Post("/v1/models/fake", "{}", "application/json");
  ASSERT_TRUE(post_models);
  EXPECT_EQ(post_models->status, 405);
  EXPECT_EQ(post_models->get_header_value("Allow"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(api->Get("/v1/nothing")->status, 404);
  httplib::Result options = api->Options("/v1/images/generations");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->status, 204);
  EXPECT_EQ(options->get_header_value("Allow"), "POST, OPTIONS");

  auto metrics = HttpClient(t.server->metrics_port());
  httplib::Result post_metrics = metrics->Post("/metrics", "", "text/plain");
  ASSERT_TRUE(post_metrics);
  EXPECT_EQ(post_metrics->status, 405);
  EXPECT_EQ(post_metrics->get_header_value("Allow"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(metrics->Get("/other")->status, 404);
  EXPECT_EQ(metrics->Get("/metrics")->status, 200);
}

TEST(HttpConformanceTest, CorsForAllowedOriginsAndPreflight) {
  server::ServerConfig c = HttpConfig();
  c.http_allowed_origins = {"http://app.example"};
  ASSERT_STARTED(t, StartFake(c));
  auto client = HttpClient(t.server->http_port());
  httplib::Result allowed = client->Get("/v1/models", {{"Origin", "http://app.example"}});
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(allowed->get_header_value("Access-Control-Expose-Headers").find("X-Request-Id"), std::string::npos);
  httplib::Result other = client->Get("/v1/models", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  httplib::Result preflight =
      client->Options("/v1/images/generations", {{"Origin", "http://app.example"},
                                                 {"Access-Control-Request-Method", "POST"},
                                                 {"Access-Control-Request-Headers", "authorization, content-type"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Methods"), "POST, OPTIONS");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  // The actual request carries the header too (streams included).
  httplib::Result generate =
      PostImages(*client, {{"prompt", "a cat"}, {"stream", true}}, {{"Origin", "http://app.example"}});
  ASSERT_TRUE(generate);
  EXPECT_EQ(generate->status, 200);
  EXPECT_EQ(generate->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
}

TEST(HttpConformanceTest, HeaderCountAndSizeAreBoundedOnBothPorts) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  for (const auto& [port, path] :
       {std::pair{t.server->http_port(), "/health"}, {t.server->metrics_port(), "/metrics"}}) {
    auto request = [path = std::string(path)](int headers, size_t value_bytes) {
      std::string r = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
      for (int i = 0; i < headers; ++i) absl::StrAppend(&r, "X-H", i, ": ", std::string(value_bytes, 'v'), "\r\n");
      return r + "\r\n";
    };
    EXPECT_EQ(StatusLine(HttpExchange(port, request(20000, 1))), "HTTP/1.1 431 Request Header Fields Too Large")
        << path;
    EXPECT_EQ(StatusLine(HttpExchange(port, request(100, 1))), "HTTP/1.1 431 Request Header Fields Too Large") << path;
    EXPECT_EQ(StatusLine(HttpExchange(port, request(8, 8000))), "HTTP/1.1 431 Request Header Fields Too Large") << path;
    EXPECT_EQ(StatusLine(HttpExchange(port, request(50, 100))), "HTTP/1.1 200 OK") << path;
  }
}

TEST(HttpConformanceTest, AbsoluteFormTargetsReachTheRoutes) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  const int api = t.server->http_port();
  const int metrics = t.server->metrics_port();
  auto get = [](int port, const std::string& target) {
    return HttpExchange(port,
                        absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_EQ(StatusLine(get(metrics, absl::StrCat("http://127.0.0.1:", metrics, "/metrics"))), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(get(api, absl::StrCat("http://127.0.0.1:", api, "/health"))), "HTTP/1.1 200 OK");
  const std::string model = get(api, "http://localhost/v1/models/fake");
  EXPECT_EQ(StatusLine(model), "HTTP/1.1 200 OK") << model;
  EXPECT_NE(model.find("\"id\":\"fake\""), std::string::npos);
  EXPECT_EQ(StatusLine(get(api, "http://localhost/nothing")), "HTTP/1.1 404 Not Found");
}

// Method and path of every operation in an OpenAPI document.
std::set<std::string> Operations(const json& document) {
  std::set<std::string> out;
  for (const auto& [path, item] : document["paths"].items()) {
    for (const auto& [method, operation] : item.items()) out.insert(absl::StrCat(method, " ", path));
  }
  return out;
}

TEST(HttpConformanceTest, OpenApiDocumentNamesExactlyTheServedRoutes) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result served = client->Get("/openapi.json");
  ASSERT_TRUE(served);
  ASSERT_EQ(served->status, 200);
  const json document = Body(served);
  EXPECT_EQ(document, server::OpenApiDocument());
  EXPECT_EQ(document["openapi"], "3.1.0");
  // The routes the API registers, on a server of its own.
  absl::StatusOr<std::unique_ptr<server::HttpServer>> http = server::HttpServer::Bind(server::HttpServerOptions{});
  ASSERT_TRUE(http.ok()) << http.status();
  server::HttpImagesApi api(http->get(), HttpConfig(), nullptr, nullptr);
  std::set<std::string> routes;
  for (const server::HttpRoute& r : (*http)->served_routes()) {
    routes.insert(absl::StrCat(absl::AsciiStrToLower(r.method), " ", r.path));
  }
  EXPECT_EQ(Operations(document), routes);
  // And each documented operation answers (not 404 / 405) on the running server.
  for (const std::string& op : Operations(document)) {
    const std::string method = op.substr(0, op.find(' '));
    std::string path = op.substr(op.find(' ') + 1);
    if (absl::StrContains(path, "{model}")) path.replace(path.find("{model}"), 7, "fake");
    httplib::Result r = method == "get" ? client->Get(path) : PostImages(*client, {{"prompt", "x"}});
    ASSERT_TRUE(r) << op;
    EXPECT_LT(r->status, 300) << op << ": " << r->status;
  }
}

TEST(HttpConformanceTest, PlaygroundIsOneSelfContainedPage) {
  ASSERT_STARTED(t, StartFake(HttpConfig()));
  auto client = HttpClient(t.server->http_port());
  httplib::Result page = client->Get("/");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<title>argen playground</title>"), std::string::npos);
  // Nothing from elsewhere: no external scripts, styles, fonts or images.
  for (const char* external : {"src=\"http", "href=\"http", "src=\"//", "href=\"//", "@import", "url(http"}) {
    EXPECT_EQ(page->body.find(external), std::string::npos) << external;
  }
  // It calls the routes it needs relatively (works behind a path prefix).
  EXPECT_NE(page->body.find("fetch(\"v1/images/generations\""), std::string::npos);
  EXPECT_NE(page->body.find("fetch(\"v1/models\""), std::string::npos);
}

}  // namespace
}  // namespace argen::serving_test
