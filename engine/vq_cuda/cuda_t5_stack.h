// The T5 encoder's block stack on the GPU, from token rows to the last hidden
// state: per block
//   x += o(attn(ln0(x)))   scores = q k^T + block 0's relative position bias (no scaling)
//   x += wo(gelu_tanh(wi_0(ln1(x))) * wi_1(ln1(x)))
// then the final RMS norm (T5LayerNorm: weight only, no mean, no bias), in
// fp32 with cuBLAS fp32 GEMMs. The family's CudaT5Encoder (engine/families/
// llamagen/t5_encoder_cuda.h) gathers the token rows and supplies the
// relative-position buckets; the CPU T5Encoder is the reference.
//
// Tensors are read by transformers' T5EncoderModel names (encoder.block.{i}.
// layer.0.SelfAttention.{q,k,v,o}.weight, ...) through the caller's source,
// one at a time, and uploaded into one device buffer (q|k|v and wi_0|wi_1
// stacked so each is one GEMM). Activations for max_tokens are allocated at
// Create; Run allocates nothing.
//
// Streams and thread-safety: its own lowest-priority non-blocking stream;
// Run calls serialise on a mutex; CUDA and cuBLAS failures come back as
// absl::Status, never as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::vq {

struct T5StackShape {
  int32_t d_model = 0, d_kv = 0, num_heads = 0, d_ff = 0, num_layers = 0;
  int32_t num_buckets = 0;  // rows of block 0's relative_attention_bias
  float eps = 1e-6f;
  int32_t inner_dim() const { return num_heads * d_kv; }
};

// name, expected shape -> the tensor as f32, row-major (errors name the tensor).
using T5TensorSource =
    std::function<absl::StatusOr<std::vector<float>>(const std::string& name, const std::vector<int64_t>& shape)>;

class CudaT5Stack {
 public:
  // buckets[r + max_tokens - 1]: the bucket of relative position r = key - query,
  // r in [-(max_tokens - 1), max_tokens - 1] (2 max_tokens - 1 entries, each in
  // [0, num_buckets)). No GPU or too little memory: a Status
  // (ResourceExhausted for memory); bad shapes or buckets: InvalidArgument.
  static absl::StatusOr<std::unique_ptr<CudaT5Stack>> Create(const T5StackShape& shape, const T5TensorSource& source,
                                                             const std::vector<int32_t>& buckets, int32_t max_tokens);
  ~CudaT5Stack();
  CudaT5Stack(const CudaT5Stack&) = delete;
  CudaT5Stack& operator=(const CudaT5Stack&) = delete;

  // rows: n token embeddings [n][d_model]; out: the last hidden state [n][d_model].
  // 0 < n <= max_tokens (InvalidArgument otherwise).
  absl::Status Run(const float* rows, int32_t n, float* out);

  size_t weight_bytes() const;
  int32_t max_tokens() const;

  struct State;

 private:
  explicit CudaT5Stack(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace argen::vq
