// One streaming Generate call, collecting what the client needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "argen/v1/argen.grpc.pb.h"
#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace argen::client {

struct CallOptions {
  double timeout_seconds = 0;  // 0: no deadline
  bool keep_images = true;     // false: GenerateResult::images stays empty (load tests)
};

struct GenerateResult {
  grpc::Status status;
  v1::Accepted accepted;
  std::vector<v1::Image> images;
  int32_t images_received = 0;
  v1::RequestMetrics metrics;
  bool has_metrics = false;
  double wall_seconds = 0;            // call start -> stream end, as the client saw it
  double first_image_seconds = -1;    // call start -> first Image event; -1: none came
  std::vector<double> image_seconds;  // call start -> each Image event
};

// `on_event` (optional) sees every event as it arrives (progress display,
// writing images at once). It may move the image payload out.
GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request, const CallOptions& options,
                            const std::function<void(v1::GenerateEvent&)>& on_event = nullptr);
GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request, double timeout_seconds,
                            const std::function<void(v1::GenerateEvent&)>& on_event = nullptr);

// The deadline of a call; 0: none.
void PrepareContext(grpc::ClientContext& context, double timeout_seconds);

// A request for more images than the server takes would fail after the
// connection: the most images any request asks (`counts`: images, and the
// line of `prompts_file` that asks it, 0: the command line's --count) against
// the server's max_images_per_request (GetModelInfo). OK within it, or when
// the server cannot tell; else INVALID_ARGUMENT naming the source.
absl::Status CheckImagesPerRequest(v1::ArGen::Stub& stub, double timeout_seconds,
                                   const std::vector<std::pair<int32_t, int>>& counts, const std::string& prompts_file);

// How the client reaches a server with TLS and API keys (all empty: plaintext, no key).
struct ChannelSecurity {
  std::string api_key;            // sent as "authorization: Bearer <key>" on every call
  std::string ca_pem;             // non-empty: TLS, trusting these CA certificates
  std::string cert_pem, key_pem;  // a client certificate, for mutual TLS
};

// A channel with the message size limit raised for image payloads.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int64_t max_message_bytes,
                                           const ChannelSecurity& security = {});

}  // namespace argen::client
