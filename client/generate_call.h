// One streaming Generate call, collecting what the client needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "argen/v1/argen.grpc.pb.h"
#include "grpcpp/channel.h"

namespace argen::client {

struct GenerateResult {
  grpc::Status status;
  v1::Accepted accepted;
  std::vector<v1::Image> images;
  v1::RequestMetrics metrics;
  bool has_metrics = false;
  double wall_seconds = 0;  // call start -> stream end, as the client saw it
};

// `on_event` (optional) sees every event as it arrives (progress display).
GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request,
                            double timeout_seconds,
                            const std::function<void(const v1::GenerateEvent&)>& on_event = nullptr);

// How the client reaches a server with TLS and API keys (all empty: plaintext, no key).
struct ChannelSecurity {
  std::string api_key;  // sent as "authorization: Bearer <key>" on every call
  std::string ca_pem;   // non-empty: TLS, trusting these CA certificates
  std::string cert_pem, key_pem;  // a client certificate, for mutual TLS
};

// A channel with the message size limit raised for image payloads.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int64_t max_message_bytes,
                                           const ChannelSecurity& security = {});

}  // namespace argen::client
