// LlamaGen t2i's prompt recipe on the host, once per request: caption ->
// language/t5.py's cleaning -> T5 tokens (with </s>, at most the caption
// slots) -> the T5 encoder's features -> the caption MLP -> the CFG pair's
// prefix embeddings (caption_embedder.h), which the engine feeds as prompt
// vectors. The T5 encoder is the CPU one or, given, the GPU one
// (t5_encoder_cuda.h); the rest runs on the host.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/llamagen/caption_embedder.h"
#include "engine/families/llamagen/t5_encoder.h"
#include "engine/families/llamagen/t5_tokenizer.h"

namespace argen::llamagen {

class T2iPrompt {
 public:
  // Loads the T5 directory (config.json, spiece.model, weights) and the
  // caption MLP from `gpt` (the GPT checkpoint); `caption_dim` must equal
  // T5's d_model. Errors name the file, field or tensor.
  static absl::StatusOr<std::shared_ptr<const T2iPrompt>> Load(const std::string& t5_dir,
                                                               const checkpoint::Checkpoint& gpt, int32_t caption_dim,
                                                               int32_t dim, int32_t slots);
  // With an encoder already opened over `t5_dir` (the GPU one, say).
  static absl::StatusOr<std::shared_ptr<const T2iPrompt>> Load(std::unique_ptr<T5TextEncoder> encoder,
                                                               const std::string& t5_dir,
                                                               const checkpoint::Checkpoint& gpt, int32_t caption_dim,
                                                               int32_t dim, int32_t slots);

  // The CFG pair's prefix embeddings of `caption`; one that cleans to nothing
  // is </s> alone, as in the official code. Thread-safe.
  absl::StatusOr<PrefixEmbeddings> Embed(const std::string& caption) const;

  int32_t slots() const { return embedder_.slots(); }

 private:
  T2iPrompt(std::unique_ptr<T5Tokenizer> tokenizer, std::unique_ptr<T5TextEncoder> encoder, CaptionEmbedder embedder)
      : tokenizer_(std::move(tokenizer)), encoder_(std::move(encoder)), embedder_(std::move(embedder)) {}
  std::unique_ptr<T5Tokenizer> tokenizer_;
  std::unique_ptr<T5TextEncoder> encoder_;
  CaptionEmbedder embedder_;
};

}  // namespace argen::llamagen
