#include "engine/families/llamagen/t5_encoder_cuda.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::llamagen {

absl::StatusOr<std::unique_ptr<CudaT5Encoder>> CudaT5Encoder::Open(const std::string& t5_dir, int32_t max_tokens) {
  absl::StatusOr<T5EncoderConfig> config = LoadT5EncoderConfig(t5_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(t5_dir);
  if (!ckpt.ok()) return ckpt.status();
  return Create(*config, std::shared_ptr<const checkpoint::Checkpoint>(std::move(*ckpt)), max_tokens);
}

absl::StatusOr<std::unique_ptr<CudaT5Encoder>> CudaT5Encoder::Create(const T5EncoderConfig& config,
                                                                     std::shared_ptr<const checkpoint::Checkpoint> ckpt,
                                                                     int32_t max_tokens) {
  if (max_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CudaT5Encoder: max_tokens must be positive, got ", max_tokens));
  }
  absl::StatusOr<std::string> embed = T5EmbeddingName(*ckpt, config);
  if (!embed.ok()) return embed.status();
  // bucket(r) for r = key - query in [-(max_tokens - 1), max_tokens - 1]: the CPU encoder's.
  std::vector<int32_t> buckets(2 * static_cast<size_t>(max_tokens) - 1);
  for (int32_t r = -(max_tokens - 1); r <= max_tokens - 1; ++r) {
    buckets[r + max_tokens - 1] =
        T5RelativeBucket(r, config.relative_attention_num_buckets, config.relative_attention_max_distance);
  }
  vq::T5StackShape shape;
  shape.d_model = config.d_model;
  shape.d_kv = config.d_kv;
  shape.num_heads = config.num_heads;
  shape.d_ff = config.d_ff;
  shape.num_layers = config.num_layers;
  shape.num_buckets = config.relative_attention_num_buckets;
  shape.eps = config.layer_norm_epsilon;
  const checkpoint::Checkpoint& c = *ckpt;
  absl::StatusOr<std::unique_ptr<vq::CudaT5Stack>> stack = vq::CudaT5Stack::Create(
      shape, [&c](const std::string& name, const std::vector<int64_t>& dims) { return c.LoadF32(name, dims); }, buckets,
      max_tokens);
  if (!stack.ok()) return stack.status();
  return std::unique_ptr<CudaT5Encoder>(
      new CudaT5Encoder(config, std::move(ckpt), *std::move(embed), *std::move(stack)));
}

absl::StatusOr<std::vector<float>> CudaT5Encoder::Encode(const std::vector<int32_t>& ids) const {
  const T5EncoderConfig& c = config_;
  for (const int32_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("T5 token id ", id, " is outside [0, ", c.vocab_size, ")"));
    }
  }
  if (ids.size() > static_cast<size_t>(stack_->max_tokens())) {
    return absl::InvalidArgumentError(
        absl::StrCat(ids.size(), " T5 tokens: the GPU encoder takes at most ", stack_->max_tokens()));
  }
  const int32_t n = static_cast<int32_t>(ids.size());
  std::vector<float> rows(static_cast<size_t>(n) * c.d_model), hidden(rows.size());
  if (n == 0) return hidden;
  if (absl::Status s = ckpt_->ReadRowsF32(embed_name_, ids.data(), n, rows.data()); !s.ok()) return s;
  if (absl::Status s = stack_->Run(rows.data(), n, hidden.data()); !s.ok()) return s;
  return hidden;
}

}  // namespace argen::llamagen
