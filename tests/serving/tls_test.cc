// TLS on both front ends, with certificates made by the openssl CLI: a client
// trusting the CA connects over gRPC and HTTPS; a plaintext client and one
// trusting another CA are refused; with tls.client_ca_file (mutual TLS) a
// client without a certificate is refused and one with a certificate the CA
// signed gets in. Bad certificate files stop the server naming the key.
#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "scheduler/tests/fake_engine.h"
#include "server/auth.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using scheduler::testing::FakeEngine;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    certs_ = MakeTestCerts(dir_);
    ASSERT_TRUE(certs_.error.empty()) << certs_.error;
  }

  server::ServerConfig Config(bool mutual) const {
    server::ServerConfig c = LoopbackConfig("fake");
    c.http_address = "127.0.0.1";
    c.http_port = 0;
    c.tls_cert_file = certs_.server_cert;
    c.tls_key_file = certs_.server_key;
    if (mutual) c.tls_client_ca_file = certs_.ca;
    return c;
  }

  // GetModelInfo over gRPC with `credentials`: the status code.
  static grpc::StatusCode GrpcCall(int port, std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto channel = grpc::CreateChannel(absl::StrCat("localhost:", port), credentials);
    auto stub = v1::ArGen::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    v1::ModelInfo info;
    return stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).error_code();
  }

  std::shared_ptr<grpc::ChannelCredentials> Trusting(const std::string& ca, bool with_cert = false) const {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFile(ca);
    if (with_cert) {
      o.pem_cert_chain = ReadFile(certs_.client_cert);
      o.pem_private_key = ReadFile(certs_.client_key);
    }
    return grpc::SslCredentials(o);
  }

  // GET /v1/models over HTTPS trusting `ca`: the status (-1: no response).
  int HttpsGet(int port, const std::string& ca, bool with_cert = false) const {
    std::unique_ptr<httplib::SSLClient> client =
        with_cert ? std::make_unique<httplib::SSLClient>("localhost", port, certs_.client_cert, certs_.client_key)
                  : std::make_unique<httplib::SSLClient>("localhost", port);
    client->set_ca_cert_path(ca.c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(3, 0);
    client->set_read_timeout(5, 0);
    httplib::Result r = client->Get("/v1/models");
    return r ? r->status : -1;
  }

  TempDir dir_;
  TestCerts certs_;
};

TEST_F(TlsTest, ServerTlsAcceptsClientsTrustingItsCaOnly) {
  ASSERT_STARTED(t, StartServer(Config(false), std::make_unique<FakeEngine>()));
  EXPECT_TRUE(t.server->tls());
  EXPECT_EQ(GrpcCall(t.server->port(), Trusting(certs_.ca)), grpc::OK);
  EXPECT_NE(GrpcCall(t.server->port(), grpc::InsecureChannelCredentials()), grpc::OK);
  EXPECT_NE(GrpcCall(t.server->port(), Trusting(certs_.other_ca)), grpc::OK);

  const int http = t.server->http_port();
  EXPECT_EQ(HttpsGet(http, certs_.ca), 200);
  EXPECT_EQ(HttpsGet(http, certs_.other_ca), -1);
  auto plain = HttpClient(http);
  plain->set_read_timeout(3, 0);
  httplib::Result r = plain->Get("/health");
  EXPECT_TRUE(!r || r->status != 200) << "a plaintext request got an answer over the TLS port";
  // A generation over HTTPS works end to end.
  httplib::SSLClient client("localhost", http);
  client.set_ca_cert_path(certs_.ca.c_str());
  client.enable_server_certificate_verification(true);
  httplib::Result gen = client.Post("/v1/images/generations", R"({"prompt": "over tls"})", "application/json");
  ASSERT_TRUE(gen) << httplib::to_string(gen.error());
  EXPECT_EQ(gen->status, 200) << gen->body;
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutACertificate) {
  ASSERT_STARTED(t, StartServer(Config(true), std::make_unique<FakeEngine>()));
  EXPECT_NE(GrpcCall(t.server->port(), Trusting(certs_.ca)), grpc::OK);
  EXPECT_EQ(GrpcCall(t.server->port(), Trusting(certs_.ca, /*with_cert=*/true)), grpc::OK);
  EXPECT_EQ(HttpsGet(t.server->http_port(), certs_.ca), -1);
  EXPECT_EQ(HttpsGet(t.server->http_port(), certs_.ca, /*with_cert=*/true), 200);
}

TEST_F(TlsTest, ArgenClientConnectsWithTheCaAndAnApiKey) {
  server::ServerConfig c = Config(true);
  c.api_keys_file = dir_.Write("keys", absl::StrCat("cli ", server::Sha256Hex("cli-key"), "\n"));
  ASSERT_STARTED(t, StartServer(c, std::make_unique<FakeEngine>()));
  const std::string server = absl::StrCat("localhost:", t.server->port());
  auto run = [&](std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = client::RunClient(args, out, err);
    return std::make_pair(code, out.str() + err.str());
  };
  const std::vector<std::string> tls = {"--server",         server,       "--ca_file",      certs_.ca, "--cert_file",
                                        certs_.client_cert, "--key_file", certs_.client_key};
  std::vector<std::string> ok = tls;
  ok.insert(ok.end(), {"--api_key", "cli-key", "info"});
  auto [code, text] = run(ok);
  EXPECT_EQ(code, client::kOk) << text;
  EXPECT_NE(text.find("fake"), std::string::npos) << text;
  std::vector<std::string> no_key = tls;
  no_key.push_back("info");
  auto [code2, text2] = run(no_key);
  EXPECT_EQ(code2, client::kServerError) << text2;
  EXPECT_NE(text2.find("UNAUTHENTICATED"), std::string::npos) << text2;
  setenv("ARGEN_API_KEY", "cli-key", 1);
  auto [code3, text3] = run(no_key);
  unsetenv("ARGEN_API_KEY");
  EXPECT_EQ(code3, client::kOk) << text3;
  EXPECT_EQ(run({"--server", server, "--ca_file", dir_.path() + "/none.pem", "info"}).first, client::kUsage);
}

TEST_F(TlsTest, BadCertificateFilesStopTheServerNamingTheKey) {
  struct Case {
    std::function<void(server::ServerConfig&)> change;
    const char* key;
  };
  const std::string garbage = dir_.Write("garbage.pem", "not a certificate\n");
  const std::vector<Case> cases = {
      {[&](server::ServerConfig& c) { c.tls_cert_file = dir_.path() + "/missing.pem"; }, "tls.cert_file"},
      {[&](server::ServerConfig& c) { c.tls_cert_file = garbage; }, "tls.cert_file"},
      {[&](server::ServerConfig& c) { c.tls_key_file = garbage; }, "tls.key_file"},
      {[&](server::ServerConfig& c) { c.tls_key_file = certs_.client_key; }, "tls.key_file"},  // not its key
      {[&](server::ServerConfig& c) { c.tls_client_ca_file = garbage; }, "tls.client_ca_file"},
      {[&](server::ServerConfig& c) { c.tls_key_file = ""; }, "tls.key_file"},
  };
  for (const Case& k : cases) {
    server::ServerConfig c = Config(false);
    k.change(c);
    absl::StatusOr<std::unique_ptr<server::ArgenServer>> s =
        server::ArgenServer::Start(c, std::make_unique<FakeEngine>());
    ASSERT_FALSE(s.ok()) << k.key;
    EXPECT_NE(s.status().message().find(k.key), std::string::npos) << s.status();
  }
}

}  // namespace
}  // namespace argen::serving_test
