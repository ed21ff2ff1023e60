// The T5 text encoder on the CPU in f32 (transformers' T5EncoderModel, read for
// its arithmetic): token embeddings (shared.weight), then per block
//   x += o(attn(ln0(x)))   scores = q k^T + position bias (no 1/sqrt(d_kv) scaling)
//   x += wo(gelu_tanh(wi_0(ln1(x))) * wi_1(ln1(x)))
// and a final T5 LayerNorm (RMS, weight only, no mean subtraction, no bias).
// The position bias is block 0's relative_attention_bias over bidirectional
// log buckets, shared by every block. LlamaGen t2i runs it once per request
// on the caption's tokens (no padding: padded slots are masked in T5 and
// zeroed after it, so the real tokens' features are the same either way).
// It holds the weights in f32 (FLAN-T5-XL's encoder: about 1.2 G parameters,
// 4.8 GB); the token table stays in the memory-mapped checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/llamagen/t5_config.h"

namespace argen::llamagen {

// T5's relative-position bucket of key position minus query position
// (bidirectional: half the buckets for keys after the query; exact below
// num_buckets / 4, logarithmic up to max_distance), as transformers computes
// it in float32.
int32_t T5RelativeBucket(int32_t relative_position, int32_t num_buckets, int32_t max_distance);

// What LlamaGen t2i's prompt recipe runs: the CPU encoder below or the GPU
// one (t5_encoder_cuda.h, CUDA builds). Encode is thread-safe in both.
class T5TextEncoder {
 public:
  virtual ~T5TextEncoder() = default;
  virtual const T5EncoderConfig& config() const = 0;
  // The last hidden state [ids.size() x d_model], row-major.
  virtual absl::StatusOr<std::vector<float>> Encode(const std::vector<int32_t>& ids) const = 0;
};

// The name of the token table in `ckpt` (T5EncoderModel ties
// encoder.embed_tokens to shared: a checkpoint may keep either), checked to
// be [vocab_size, d_model]; errors name the directory.
absl::StatusOr<std::string> T5EmbeddingName(const checkpoint::Checkpoint& ckpt, const T5EncoderConfig& config);

class T5Encoder : public T5TextEncoder {
 public:
  // Opens the hub directory (config.json, model.safetensors or shards,
  // pytorch_model*.bin) and loads the encoder's tensors: the decoder and
  // lm_head of a T5ForConditionalGeneration checkpoint are never read.
  // Errors name the directory, file or tensor.
  static absl::StatusOr<std::unique_ptr<T5Encoder>> Open(const std::string& t5_dir);
  // Over an opened checkpoint (tests).
  static absl::StatusOr<std::unique_ptr<T5Encoder>> Create(const T5EncoderConfig& config,
                                                           std::shared_ptr<const checkpoint::Checkpoint> ckpt);

  const T5EncoderConfig& config() const override { return config_; }

  // The last hidden state [ids.size() x d_model], row-major. Ids must lie in
  // [0, vocab_size) (InvalidArgument otherwise); thread-safe.
  absl::StatusOr<std::vector<float>> Encode(const std::vector<int32_t>& ids) const override;

 private:
  struct Block {
    std::vector<float> ln0, q, k, v, o, ln1, wi0, wi1, wo;
  };
  T5Encoder(T5EncoderConfig config, std::shared_ptr<const checkpoint::Checkpoint> ckpt)
      : config_(std::move(config)), ckpt_(std::move(ckpt)) {}

  T5EncoderConfig config_;
  std::shared_ptr<const checkpoint::Checkpoint> ckpt_;
  std::string embed_name_;
  std::vector<float> relative_bias_;  // [buckets, heads]
  std::vector<Block> blocks_;
  std::vector<float> final_norm_;
};

}  // namespace argen::llamagen
