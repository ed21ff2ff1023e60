#include "engine/vq_cuda/cuda_t5_stack.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq_cuda/side_cublas_stream.h"
#include "kernels/t5_kernels.h"

namespace argen::vq {
namespace {

using cuda::CublasStatus;
using cuda::CudaStatus;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

constexpr size_t kAlignFloats = 64;  // each tensor at a 256-byte boundary
constexpr int32_t kMaxTokens = 4096;

// One block's weights as float offsets into the device weight buffer.
struct DBlock {
  size_t ln0 = 0, qkv = 0, o = 0, ln1 = 0, wi = 0, wo = 0;
};

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const std::string& what) {
  auto b = DeviceBuffer::Allocate(bytes, absl::StrCat("CudaT5Stack: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

absl::Status Pin(PinnedBuffer& buf, size_t bytes, const std::string& what) {
  auto b = PinnedBuffer::Allocate(bytes, absl::StrCat("CudaT5Stack: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

struct CudaT5Stack::State {
  T5StackShape shape;
  int32_t max_tokens = 0;

  std::vector<DBlock> blocks;
  size_t rel_bias = 0, final_norm = 0;
  DeviceBuffer weights, buckets, x, normed, qkv, ctx, scores, gate_up, act;
  PinnedBuffer in_host, out_host;
  std::mutex mu;  // guards the buffers and the stream's work
  // Last, so it is destroyed first: the stream is drained and the handle gone
  // before the buffers above are freed (the order before the fold).
  SideCublasStream gpu;

  const float* P(size_t off) const { return weights.as<float>() + off; }

  // y[rows][out] = x[rows][in] W^T (+ y with accumulate); W row-major [out][in] (torch Linear).
  // Column-major: C [out x rows] = op_T(W viewed [in x out]) x (x viewed [in x rows]).
  absl::Status Linear(const float* in_rows, int32_t rows, size_t w, int32_t in, int32_t out, float* y, bool accumulate,
                      const char* what) const {
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    return CublasStatus(cublasSgemm(gpu.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, P(w), in, in_rows,
                                    in, &beta, y, out),
                        what);
  }

  // Uploads every tensor into one buffer (offsets first, one allocation), then the bucket table.
  absl::Status Setup(const T5TensorSource& source, const std::vector<int32_t>& bucket_table) {
    const T5StackShape& sh = shape;
    const int64_t d = sh.d_model, inner = sh.inner_dim(), ff = sh.d_ff;
    size_t total = 0;
    auto reserve = [&total](int64_t floats) {
      const size_t off = total;
      total += (static_cast<size_t>(floats) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
      return off;
    };
    rel_bias = reserve(static_cast<int64_t>(sh.num_buckets) * sh.num_heads);
    blocks.resize(sh.num_layers);
    for (DBlock& b : blocks) {
      b.ln0 = reserve(d);
      b.qkv = reserve(3 * inner * d);
      b.o = reserve(d * inner);
      b.ln1 = reserve(d);
      b.wi = reserve(2 * ff * d);
      b.wo = reserve(d * ff);
    }
    final_norm = reserve(d);
    ARGEN_STATUS_RETURN(Alloc(weights, total * sizeof(float), absl::StrCat("weights (", sh.num_layers, " blocks)")));
    // Tensor by tensor: only one is on the host at a time.
    auto upload = [&](const std::string& name, std::vector<int64_t> dims, size_t off) -> absl::Status {
      absl::StatusOr<std::vector<float>> v = source(name, dims);
      if (!v.ok()) return v.status();
      size_t want = 1;
      for (int64_t n : dims) want *= static_cast<size_t>(n);
      if (v->size() != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("CudaT5Stack: ", name, " has ", v->size(), " values, expected ", want));
      }
      return CudaStatus(
          cudaMemcpy(weights.as<float>() + off, v->data(), v->size() * sizeof(float), cudaMemcpyHostToDevice),
          absl::StrCat("CudaT5Stack: upload ", name));
    };
    ARGEN_STATUS_RETURN(upload("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                               {sh.num_buckets, sh.num_heads}, rel_bias));
    for (int32_t i = 0; i < sh.num_layers; ++i) {
      const std::string attn = absl::StrCat("encoder.block.", i, ".layer.0.");
      const std::string ffn = absl::StrCat("encoder.block.", i, ".layer.1.");
      const DBlock& b = blocks[i];
      ARGEN_STATUS_RETURN(upload(attn + "layer_norm.weight", {d}, b.ln0));
      // q | k | v stacked: one GEMM gives each token's [q, k, v] row.
      ARGEN_STATUS_RETURN(upload(attn + "SelfAttention.q.weight", {inner, d}, b.qkv));
      ARGEN_STATUS_RETURN(upload(attn + "SelfAttention.k.weight", {inner, d}, b.qkv + inner * d));
      ARGEN_STATUS_RETURN(upload(attn + "SelfAttention.v.weight", {inner, d}, b.qkv + 2 * inner * d));
      ARGEN_STATUS_RETURN(upload(attn + "SelfAttention.o.weight", {d, inner}, b.o));
      ARGEN_STATUS_RETURN(upload(ffn + "layer_norm.weight", {d}, b.ln1));
      // wi_0 | wi_1 stacked: one GEMM gives each token's [gate, up] row.
      ARGEN_STATUS_RETURN(upload(ffn + "DenseReluDense.wi_0.weight", {ff, d}, b.wi));
      ARGEN_STATUS_RETURN(upload(ffn + "DenseReluDense.wi_1.weight", {ff, d}, b.wi + ff * d));
      ARGEN_STATUS_RETURN(upload(ffn + "DenseReluDense.wo.weight", {d, ff}, b.wo));
    }
    ARGEN_STATUS_RETURN(upload("encoder.final_layer_norm.weight", {d}, final_norm));

    ARGEN_STATUS_RETURN(Alloc(buckets, bucket_table.size() * sizeof(int32_t), "bucket table"));
    ARGEN_CUDA_RETURN(
        cudaMemcpy(buckets.as(), bucket_table.data(), bucket_table.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
        "CudaT5Stack: upload the bucket table");

    const size_t t = static_cast<size_t>(max_tokens);
    ARGEN_STATUS_RETURN(Alloc(x, t * d * sizeof(float), "residual stream"));
    ARGEN_STATUS_RETURN(Alloc(normed, t * d * sizeof(float), "normed"));
    ARGEN_STATUS_RETURN(Alloc(qkv, t * 3 * inner * sizeof(float), "q|k|v"));
    ARGEN_STATUS_RETURN(Alloc(ctx, t * inner * sizeof(float), "attention output"));
    ARGEN_STATUS_RETURN(Alloc(scores, static_cast<size_t>(sh.num_heads) * t * t * sizeof(float), "scores"));
    ARGEN_STATUS_RETURN(Alloc(gate_up, t * 2 * ff * sizeof(float), "gate|up"));
    ARGEN_STATUS_RETURN(Alloc(act, t * ff * sizeof(float), "gated activation"));
    ARGEN_STATUS_RETURN(Pin(in_host, t * d * sizeof(float), "token rows"));
    ARGEN_STATUS_RETURN(Pin(out_host, t * d * sizeof(float), "features"));
    return absl::OkStatus();
  }

  // The stack on n token rows already in x; leaves the last hidden state in normed.
  absl::Status Network(int32_t n) const {
    const T5StackShape& sh = shape;
    const int32_t d = sh.d_model, inner = sh.inner_dim(), heads = sh.num_heads, dk = sh.d_kv, ff = sh.d_ff;
    float* xs = x.as<float>();
    float* nm = normed.as<float>();
    float* qkvp = qkv.as<float>();
    float* ctxp = ctx.as<float>();
    float* sc = scores.as<float>();
    const float one = 1.0f, zero = 0.0f;
    const int32_t qkv_ld = 3 * inner;
    const long long score_stride = static_cast<long long>(n) * n;
    for (const DBlock& b : blocks) {
      ARGEN_CUDA_RETURN(kernels::T5RmsNorm(xs, P(b.ln0), n, d, sh.eps, nm, gpu.stream()), "T5 layer_norm (attention)");
      ARGEN_STATUS_RETURN(Linear(nm, n, b.qkv, d, 3 * inner, qkvp, false, "T5 q|k|v"));
      // Per head h, column-major views of the row-major buffers (q_h at column h*dk,
      // k_h at inner + h*dk, v_h at 2*inner + h*dk, row stride 3*inner):
      // scores_h[i][j] = q_h[i] . k_h[j]: C [n x n] (ldc n, C(j, i) = scores_h[i][j]) = K_h^T-op x Q_h.
      ARGEN_STATUS_RETURN(
          CublasStatus(cublasSgemmStridedBatched(gpu.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, n, n, dk, &one, qkvp + inner,
                                                 qkv_ld, dk, qkvp, qkv_ld, dk, &zero, sc, n, score_stride, heads),
                       "T5 attention scores"));
      ARGEN_CUDA_RETURN(
          kernels::T5BiasSoftmax(sc, P(rel_bias), buckets.as<int32_t>(), max_tokens, heads, n, gpu.stream()),
          "T5 bias + softmax");
      // ctx_h[i][c] = sum_j p_h[i][j] v_h[j][c]: C [dk x n] (ldc inner) = V_h x P_h.
      ARGEN_STATUS_RETURN(CublasStatus(
          cublasSgemmStridedBatched(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, dk, n, n, &one, qkvp + 2 * inner, qkv_ld,
                                    dk, sc, n, score_stride, &zero, ctxp, inner, dk, heads),
          "T5 attention output"));
      ARGEN_STATUS_RETURN(Linear(ctxp, n, b.o, inner, d, xs, /*accumulate=*/true, "T5 o"));  // x += o(ctx)
      ARGEN_CUDA_RETURN(kernels::T5RmsNorm(xs, P(b.ln1), n, d, sh.eps, nm, gpu.stream()),
                        "T5 layer_norm (feed-forward)");
      ARGEN_STATUS_RETURN(Linear(nm, n, b.wi, d, 2 * ff, gate_up.as<float>(), false, "T5 wi_0|wi_1"));
      ARGEN_CUDA_RETURN(kernels::T5GatedGelu(gate_up.as<float>(), n, ff, act.as<float>(), gpu.stream()),
                        "T5 gated gelu");
      ARGEN_STATUS_RETURN(Linear(act.as<float>(), n, b.wo, ff, d, xs, /*accumulate=*/true, "T5 wo"));  // x += wo(...)
    }
    ARGEN_CUDA_RETURN(kernels::T5RmsNorm(xs, P(final_norm), n, d, sh.eps, nm, gpu.stream()), "T5 final_layer_norm");
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<CudaT5Stack>> CudaT5Stack::Create(const T5StackShape& shape,
                                                                 const T5TensorSource& source,
                                                                 const std::vector<int32_t>& buckets,
                                                                 int32_t max_tokens) {
  if (max_tokens <= 0 || max_tokens > kMaxTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaT5Stack: max_tokens must be in [1, ", kMaxTokens, "], got ", max_tokens));
  }
  if (shape.d_model <= 0 || shape.d_kv <= 0 || shape.num_heads <= 0 || shape.d_ff <= 0 || shape.num_layers < 0 ||
      shape.num_buckets <= 0) {
    return absl::InvalidArgumentError("CudaT5Stack: the T5 shape's sizes must be positive");
  }
  if (buckets.size() != 2 * static_cast<size_t>(max_tokens) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("CudaT5Stack: ", buckets.size(), " buckets for max_tokens ",
                                                   max_tokens, ", expected ", 2 * max_tokens - 1));
  }
  for (const int32_t b : buckets) {
    if (b < 0 || b >= shape.num_buckets) {
      return absl::InvalidArgumentError(
          absl::StrCat("CudaT5Stack: bucket ", b, " is outside [0, ", shape.num_buckets, ")"));
    }
  }
  auto s = std::make_unique<State>();
  s->shape = shape;
  s->max_tokens = max_tokens;
  ARGEN_STATUS_RETURN(s->gpu.Init("CudaT5Stack", /*tf32=*/false));
  ARGEN_STATUS_RETURN(s->Setup(source, buckets));
  return std::unique_ptr<CudaT5Stack>(new CudaT5Stack(std::move(s)));
}

CudaT5Stack::CudaT5Stack(std::unique_ptr<State> state) : s_(std::move(state)) {}
CudaT5Stack::~CudaT5Stack() = default;

size_t CudaT5Stack::weight_bytes() const { return s_->weights.bytes(); }
int32_t CudaT5Stack::max_tokens() const { return s_->max_tokens; }

absl::Status CudaT5Stack::Run(const float* rows, int32_t n, float* out) {
  State& s = *s_;
  if (n <= 0 || n > s.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(n, " T5 tokens: the GPU encoder takes 1 to ", s.max_tokens));
  }
  const size_t bytes = static_cast<size_t>(n) * s.shape.d_model * sizeof(float);
  std::lock_guard<std::mutex> lock(s.mu);
  std::memcpy(s.in_host.as(), rows, bytes);
  auto run = [&]() -> absl::Status {
    ARGEN_CUDA_RETURN(cudaSetDevice(s.gpu.device()), "T5 encode: set device");
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(s.x.as(), s.in_host.as(), bytes, cudaMemcpyHostToDevice, s.gpu.stream()),
                      "T5 encode: upload token rows");
    ARGEN_STATUS_RETURN(s.Network(n));
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(s.out_host.as(), s.normed.as(), bytes, cudaMemcpyDeviceToHost, s.gpu.stream()),
                      "T5 encode: download features");
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(s.gpu.stream()), "T5 encode: synchronize");
    return absl::OkStatus();
  };
  absl::Status st = run();
  if (!st.ok()) {
    cudaStreamSynchronize(s.gpu.stream());  // whatever was queued finishes before the staging is reused
    return st;
  }
  std::memcpy(out, s.out_host.as(), bytes);
  return absl::OkStatus();
}

}  // namespace argen::vq
