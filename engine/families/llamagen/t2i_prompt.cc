#include "engine/families/llamagen/t2i_prompt.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/families/llamagen/caption_clean.h"

namespace argen::llamagen {

absl::StatusOr<std::shared_ptr<const T2iPrompt>> T2iPrompt::Load(const std::string& t5_dir,
                                                                 const checkpoint::Checkpoint& gpt, int32_t caption_dim,
                                                                 int32_t dim, int32_t slots) {
  absl::StatusOr<std::unique_ptr<T5Encoder>> encoder = T5Encoder::Open(t5_dir);
  if (!encoder.ok()) return encoder.status();
  return Load(*std::move(encoder), t5_dir, gpt, caption_dim, dim, slots);
}

absl::StatusOr<std::shared_ptr<const T2iPrompt>> T2iPrompt::Load(std::unique_ptr<T5TextEncoder> encoder,
                                                                 const std::string& t5_dir,
                                                                 const checkpoint::Checkpoint& gpt, int32_t caption_dim,
                                                                 int32_t dim, int32_t slots) {
  if (encoder == nullptr) return absl::InvalidArgumentError("T2iPrompt: no T5 encoder");
  const T5EncoderConfig& t5 = encoder->config();
  if (t5.d_model != caption_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(t5_dir, ": the T5 encoder's d_model ", t5.d_model, " is not the GPT's caption_dim ", caption_dim));
  }
  const std::string spiece = (std::filesystem::path(t5_dir) / "spiece.model").string();
  absl::StatusOr<std::unique_ptr<T5Tokenizer>> tokenizer = T5Tokenizer::Open(spiece, t5.eos_token_id, slots);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > t5.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(spiece, ": ", (*tokenizer)->vocab_size(),
                                                   " pieces, more than the encoder's vocab_size ", t5.vocab_size));
  }
  absl::StatusOr<CaptionEmbedder> embedder = CaptionEmbedder::Load(gpt, caption_dim, dim, slots);
  if (!embedder.ok()) return embedder.status();
  return std::shared_ptr<const T2iPrompt>(
      new T2iPrompt(*std::move(tokenizer), std::move(encoder), *std::move(embedder)));
}

absl::StatusOr<PrefixEmbeddings> T2iPrompt::Embed(const std::string& caption) const {
  const std::string cleaned = CleanCaption(caption);
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(cleaned);
  if (!ids.ok()) return ids.status();
  // An empty caption is </s> alone: the official code conditions on it too.
  absl::StatusOr<std::vector<float>> features = encoder_->Encode(*ids);
  if (!features.ok()) return features.status();
  return embedder_.Embed(*features);
}

}  // namespace argen::llamagen
