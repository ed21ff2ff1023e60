// The T5 text encoder on the GPU: the same arithmetic as the CPU T5Encoder
// (t5_encoder.h, the reference) over the caption's real tokens (no padding,
// as the CPU encoder). The token rows are gathered on the host from the
// memory-mapped checkpoint; the block stack runs on engine/vq_cuda's
// CudaT5Stack, given the CPU's relative-position buckets (T5RelativeBucket),
// so the buckets are the CPU's exactly. Runs once per request for LlamaGen
// t2i (family option t5_backend cuda).
//
// Precision: fp32 weights and fp32 cuBLAS GEMMs (CUBLAS_DEFAULT_MATH). It runs
// once per request on at most 120 tokens, so its cost is reading the weights
// once; fp32 keeps it the CPU's arithmetic up to summation order, at 4.8 GB
// for FLAN-T5-XL's encoder (1.2 G parameters), which the H200 holds beside
// the 775M GPT. bf16 would halve that at a precision cost no caller needs yet.
//
// Memory: the stack's weights are uploaded once at Open (tensor by tensor;
// the token table stays in the checkpoint); activations for max_tokens are
// allocated at Open. Encode is thread-safe (the stack serialises its runs);
// device failures come back as absl::Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/llamagen/t5_config.h"
#include "engine/families/llamagen/t5_encoder.h"
#include "engine/vq_cuda/cuda_t5_stack.h"

namespace argen::llamagen {

class CudaT5Encoder : public T5TextEncoder {
 public:
  // As T5Encoder::Open / Create, onto the current CUDA device; max_tokens: the
  // longest id sequence Encode takes (LlamaGen: the caption slots). No GPU or
  // too little memory: a Status (ResourceExhausted for memory).
  static absl::StatusOr<std::unique_ptr<CudaT5Encoder>> Open(const std::string& t5_dir, int32_t max_tokens);
  static absl::StatusOr<std::unique_ptr<CudaT5Encoder>> Create(const T5EncoderConfig& config,
                                                               std::shared_ptr<const checkpoint::Checkpoint> ckpt,
                                                               int32_t max_tokens);
  const T5EncoderConfig& config() const override { return config_; }
  // Ids must lie in [0, vocab_size) and number at most max_tokens (InvalidArgument otherwise).
  absl::StatusOr<std::vector<float>> Encode(const std::vector<int32_t>& ids) const override;

  size_t weight_bytes() const { return stack_->weight_bytes(); }

 private:
  CudaT5Encoder(T5EncoderConfig config, std::shared_ptr<const checkpoint::Checkpoint> ckpt, std::string embed_name,
                std::unique_ptr<vq::CudaT5Stack> stack)
      : config_(std::move(config)),
        ckpt_(std::move(ckpt)),
        embed_name_(std::move(embed_name)),
        stack_(std::move(stack)) {}

  T5EncoderConfig config_;
  std::shared_ptr<const checkpoint::Checkpoint> ckpt_;
  std::string embed_name_;
  std::unique_ptr<vq::CudaT5Stack> stack_;
};

}  // namespace argen::llamagen
