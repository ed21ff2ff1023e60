// TLS for the gRPC and HTTP front ends, from PEM files named in the config
// (tls.cert_file, tls.key_file, optional tls.client_ca_file for mutual TLS).
// The files are read and checked once at startup, so a bad file stops the
// server with a message naming its key instead of failing every handshake.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace argen::server {

struct TlsFiles {
  std::string cert_file;       // PEM: the server certificate, then its chain
  std::string key_file;        // PEM: its private key (unencrypted)
  std::string client_ca_file;  // PEM: CAs client certificates must chain to; empty: no client certs
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

struct TlsMaterial {
  std::string cert_pem, key_pem, client_ca_pem;
  bool mutual() const { return !client_ca_pem.empty(); }
};

// Reads and checks the files (parseable, key matches certificate, CA file
// holds certificates). Errors name the config key and the file.
absl::StatusOr<TlsMaterial> LoadTls(const TlsFiles& files);

// Server side of `material` on an OpenSSL context (TLS 1.2+; client
// certificates required and verified when mutual()).
absl::Status ConfigureServerContext(SSL_CTX* context, const TlsMaterial& material);

// gRPC server credentials: TLS from `material`, or plaintext when null.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsMaterial* material);

}  // namespace argen::server
