#include "server/tls_config.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"

namespace argen::server {
namespace {

// The oldest queued OpenSSL error as text (and clears the queue).
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no details from OpenSSL";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::StatusOr<std::string> ReadFile(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("key '", key, "': cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(const std::string& pem) { return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

// Every certificate in `pem`, in order; none is an error.
absl::StatusOr<std::vector<X509*>> ReadCertificates(const std::string& pem, const std::string& what) {
  BioPtr bio = MemoryBio(pem);
  std::vector<X509*> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.push_back(cert);
  ERR_clear_error();  // the read past the last certificate
  if (certs.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no PEM certificate in it"));
  return certs;
}

void FreeAll(std::vector<X509*>& certs) {
  for (X509* c : certs) X509_free(c);
  certs.clear();
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTls(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("keys 'tls.cert_file' and 'tls.key_file': set both (TLS) or neither (plaintext)");
  }
  if (!files.client_ca_file.empty() && files.cert_file.empty()) {
    return absl::InvalidArgumentError("key 'tls.client_ca_file': mutual TLS needs tls.cert_file and tls.key_file too");
  }
  TlsMaterial m;
  absl::StatusOr<std::string> cert = ReadFile("tls.cert_file", files.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile("tls.key_file", files.key_file);
  if (!key.ok()) return key.status();
  m.cert_pem = *std::move(cert);
  m.key_pem = *std::move(key);
  if (!files.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile("tls.client_ca_file", files.client_ca_file);
    if (!ca.ok()) return ca.status();
    m.client_ca_pem = *std::move(ca);
  }
  // Check everything once on a throwaway context, naming the file at fault.
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (context == nullptr) return absl::InternalError(absl::StrCat("TLS: ", OpenSslError()));
  absl::Status s = ConfigureServerContext(context, m);
  SSL_CTX_free(context);
  if (!s.ok()) {
    std::string files_text = absl::StrCat("tls.cert_file '", files.cert_file, "', tls.key_file '", files.key_file, "'");
    if (!files.client_ca_file.empty()) {
      absl::StrAppend(&files_text, ", tls.client_ca_file '", files.client_ca_file, "'");
    }
    return absl::InvalidArgumentError(absl::StrCat(s.message(), " (", files_text, ")"));
  }
  return m;
}

absl::Status ConfigureServerContext(SSL_CTX* context, const TlsMaterial& material) {
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_options(context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  absl::StatusOr<std::vector<X509*>> chain = ReadCertificates(material.cert_pem, "key 'tls.cert_file'");
  if (!chain.ok()) return chain.status();
  if (SSL_CTX_use_certificate(context, (*chain)[0]) != 1) {
    FreeAll(*chain);
    return absl::InvalidArgumentError(absl::StrCat("key 'tls.cert_file': ", OpenSslError()));
  }
  X509_free((*chain)[0]);
  for (size_t i = 1; i < chain->size(); ++i) {
    // add0: the context takes the reference.
    if (SSL_CTX_add0_chain_cert(context, (*chain)[i]) != 1) {
      for (size_t j = i; j < chain->size(); ++j) X509_free((*chain)[j]);
      return absl::InvalidArgumentError(absl::StrCat("key 'tls.cert_file': chain: ", OpenSslError()));
    }
  }
  BioPtr key_bio = MemoryBio(material.key_pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("key 'tls.key_file': not an unencrypted PEM private key: ", OpenSslError()));
  }
  const int used = SSL_CTX_use_PrivateKey(context, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(context) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("key 'tls.key_file': does not match the certificate of tls.cert_file: ", OpenSslError()));
  }
  if (material.mutual()) {
    absl::StatusOr<std::vector<X509*>> cas = ReadCertificates(material.client_ca_pem, "key 'tls.client_ca_file'");
    if (!cas.ok()) return cas.status();
    X509_STORE* store = SSL_CTX_get_cert_store(context);
    for (X509* ca : *cas) {
      X509_STORE_add_cert(store, ca);
      SSL_CTX_add_client_CA(context, ca);  // tells clients which CA to present a certificate of
    }
    FreeAll(*cas);
    ERR_clear_error();
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsMaterial* material) {
  if (material == nullptr) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(material->mutual()
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = material->client_ca_pem;
  options.pem_key_cert_pairs.push_back({material->key_pem, material->cert_pem});
  return grpc::SslServerCredentials(options);
}

}  // namespace argen::server
