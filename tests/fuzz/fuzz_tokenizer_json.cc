// Fuzzes tokenizer.json parsing (engine/tokenizer: added tokens, normalizer
// and pre-tokenizer specs, BPE / WordLevel models, decoders,
// post-processors) and then uses what loaded: a tokenizer that loads must
// encode and decode without crashing.
#include <string_view>

#include "engine/families/janus/janus_chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using argen::tokenizer::Tokenizer;
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Tokenizer> tok = Tokenizer::LoadFromJson(json, "fuzz/tokenizer.json");
  if (!tok.ok()) return 0;
  for (std::string_view text :
       {"a red circle", " 12  345\n\nx", "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xf0\x9f\x98\x80", ""}) {
    absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text, /*add_special_tokens=*/true);
    if (!ids.ok()) continue;
    for (int32_t id : *ids) {
      if (id < 0 || id >= tok->IdLimit()) __builtin_trap();  // an id the tokenizer does not have
    }
    (void)tok->Decode(*ids, /*skip_special_tokens=*/false);
    (void)tok->Decode(*ids, /*skip_special_tokens=*/true);
  }
  (void)argen::janus::BuildGenerationPrompt(*tok, "a cat", 64);
  const int32_t limit = tok->IdLimit();
  for (int32_t id : {0, limit - 1, limit, -1}) (void)tok->IdToToken(id);
  return 0;
}
