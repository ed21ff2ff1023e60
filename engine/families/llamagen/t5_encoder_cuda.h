// The T5 text encoder on the GPU: the same arithmetic as the CPU T5Encoder
// (t5_encoder.h, the reference): token rows, then per block
//   x += o(attn(ln0(x)))   scores = q k^T + block 0's relative position bias (no scaling)
//   x += wo(gelu_tanh(wi_0(ln1(x))) * wi_1(ln1(x)))
// and the final RMS norm, over the caption's real tokens (no padding, as the
// CPU encoder). Runs once per request for LlamaGen t2i (family option
// t5_backend cuda).
//
// Precision: fp32 weights and fp32 cuBLAS GEMMs (CUBLAS_DEFAULT_MATH). It runs
// once per request on at most 120 tokens, so its cost is reading the weights
// once; fp32 keeps it the CPU's arithmetic up to summation order, at 4.8 GB
// for FLAN-T5-XL's encoder (1.2 G parameters), which the H200 holds beside
// the 775M GPT. bf16 would halve that at a precision cost no caller needs yet.
//
// Memory: the weights are uploaded once at Open (tensor by tensor; the token
// table stays in the memory-mapped checkpoint: Encode gathers the request's
// rows on the host and uploads them); activations for max_tokens are
// allocated at Open. Encode allocates only its result.
//
// Streams and thread-safety: its own lowest-priority non-blocking stream;
// Encode calls serialise on a mutex; CUDA and cuBLAS failures come back as
// absl::Status, never as a crash.
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
  ~CudaT5Encoder() override;
  CudaT5Encoder(const CudaT5Encoder&) = delete;
  CudaT5Encoder& operator=(const CudaT5Encoder&) = delete;

  const T5EncoderConfig& config() const override;
  // Ids must lie in [0, vocab_size) and number at most max_tokens (InvalidArgument otherwise).
  absl::StatusOr<std::vector<float>> Encode(const std::vector<int32_t>& ids) const override;

  size_t weight_bytes() const;

  struct State;

 private:
  explicit CudaT5Encoder(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace argen::llamagen
