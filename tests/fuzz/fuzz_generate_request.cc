// Fuzzes what the server does with a Generate request before any engine
// step: the raw message bytes (server/generate_wire.cc: protobuf parse,
// invalid-UTF-8 diagnosis), the prompt byte bound, the proto-to-engine
// mapping with defaults and policy resolution (server/request_mapping.cc),
// and the engine's Prepare on the tiny checkpoint (tokenizing, validation,
// exact KV need). Inputs starting with '#' are protobuf text format, so
// mutation also works at the level of fields and values.
#include <memory>
#include <string_view>

#include "engine/engine.h"
#include "google/protobuf/text_format.h"
#include "server/generate_wire.h"
#include "server/prompt_limits.h"
#include "server/request_mapping.h"
#include "tests/fuzz/fuzz_driver.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

argen::engine::Engine& TinyEngine() {
  static argen::engine::Engine* engine = [] {
    argen::engine::EngineOptions o;
    o.model_dir = argen::fuzz::SourceDir() + "/tests/goldens/tiny/tiny-mha";
    o.backend = "cpu";
    o.threads = 1;
    o.kv_budget_bytes = int64_t{1} << 30;
    absl::StatusOr<std::unique_ptr<argen::engine::Engine>> e = argen::engine::CreateEngine(o);
    if (!e.ok()) __builtin_trap();
    return e->release();
  }();
  return *engine;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace argen::server;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<argen::v1::GenerateRequest> request = absl::InvalidArgumentError("unset");
  if (!bytes.empty() && bytes[0] == '#') {
    argen::v1::GenerateRequest parsed;
    google::protobuf::TextFormat::Parser parser;
    parser.AllowPartialMessage(true);
    // Text format checks UTF-8 itself; its logging stays quiet for fuzzing.
    if (!parser.ParseFromString(std::string(bytes), &parsed)) return 0;
    std::string wire;
    parsed.SerializeToString(&wire);
    request = ParseGenerateRequest(wire);
  } else {
    request = ParseGenerateRequest(bytes);
  }
  if (!request.ok()) {
    if (request.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  argen::engine::Engine& engine = TinyEngine();
  ServerConfig config;
  config.model_dir = "tiny";
  config.max_images_per_request = 4;
  const int64_t max_bytes = PromptByteLimit(0, engine.info().max_prompt_tokens, 1 << 20);
  if (!CheckPromptBytes(request->prompt(), max_bytes).ok()) return 0;
  absl::StatusOr<argen::engine::GenerationRequest> mapped =
      ToGenerationRequest(*request, config, engine.info(), /*random_seed=*/7);
  if (!mapped.ok()) {
    if (mapped.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  absl::StatusOr<argen::engine::PreparedRequest> prepared = engine.Prepare(*mapped);
  if (prepared.ok() && prepared->kv_bytes <= 0) __builtin_trap();  // every request needs KV
  return 0;
}
