// Fuzzes Encode on arbitrary prompt text with the tokenizers argen ships and
// tests with (the shipped model's byte-level BPE and a DeepSeek-style one):
// UTF-8 decoding, added-token splitting, regex pre-tokenization, BPE merges,
// the generation prompt template. Byte-level BPE without a normalizer is
// lossless, so every valid input must decode back to itself.
#include <memory>
#include <string_view>

#include "engine/families/janus/janus_chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_driver.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using argen::tokenizer::Tokenizer;

std::vector<std::unique_ptr<Tokenizer>>& Tokenizers() {
  static auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<Tokenizer>>;
    for (const char* path :
         {"/models/argen-scenes-v1/tokenizer.json", "/tests/goldens/tokenizer/bpe_deepseek/tokenizer.json"}) {
      absl::StatusOr<Tokenizer> tok = Tokenizer::LoadFromFile(argen::fuzz::SourceDir() + path);
      if (!tok.ok()) __builtin_trap();  // a committed tokenizer must load
      v->push_back(std::make_unique<Tokenizer>(*std::move(tok)));
    }
    return v;
  }();
  return *all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : Tokenizers()) {
    absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text, /*add_special_tokens=*/false);
    (void)argen::janus::BuildGenerationPrompt(*tok, text, 1024);
    if (!ids.ok()) continue;  // invalid UTF-8: refused, fine
    absl::StatusOr<std::string> back = tok->Decode(*ids);
    if (!back.ok() || *back != text) __builtin_trap();  // lossless round trip
  }
  return 0;
}
