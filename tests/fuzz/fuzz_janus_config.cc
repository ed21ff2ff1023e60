// Fuzzes config.json of a checkpoint (engine/families/janus/janus_config.cc):
// the language, gen_vision, gen_aligner and gen_head sections and their
// cross-checks. What parses must describe a model the engine can size.
#include <string>

#include "engine/families/janus/janus_config.h"
#include "tests/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<argen::janus::JanusConfig> config = argen::janus::ParseJanusConfig(json, "fuzz/config.json");
  if (!config.ok()) return 0;
  const argen::janus::LanguageConfig& l = config->language;
  if (l.hidden_size <= 0 || l.num_hidden_layers <= 0 || l.num_attention_heads <= 0 || l.vocab_size <= 0 ||
      l.num_key_value_heads <= 0 || l.head_dim <= 0) {
    __builtin_trap();  // accepted sizes must be usable
  }
  const argen::vq::Vq16Config& v = config->gen_vision;
  if (v.ch_mult.empty() || v.image_size <= 0 || v.token_grid() <= 0) __builtin_trap();
  (void)v.image_tokens();
  return 0;
}
