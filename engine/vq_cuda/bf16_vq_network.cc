#include "engine/vq_cuda/bf16_vq_network.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq_cuda/vq_program.h"
#include "kernels/vq_nhwc_kernels.h"
#if defined(ARGEN_WITH_CUDNN)
#include "engine/vq_cuda/cudnn_convs.h"
#endif

namespace argen::vq {

static_assert(kVqNhwcMaxGroupNormChannels == kernels::kVqGnMaxChannels, "program and kernel limits agree");
static_assert(kVqNhwcMaxConvOutChannels == kernels::kVqConvOutMaxChannels, "program and kernel limits agree");

#if defined(ARGEN_WITH_CUDNN)

namespace {

using bf16 = __nv_bfloat16;
using cuda::CublasStatus;
using cuda::CudaStatus;
using cuda::DeviceBuffer;

// The primitives on the device. Pointers are the network's buffers.
class GpuPrimitives final : public VqPrimitives {
 public:
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  const CudnnConvs* convs = nullptr;
  void* cudnn_ws = nullptr;
  size_t cudnn_ws_bytes = 0;
  bf16* act[3] = {nullptr, nullptr, nullptr};
  bf16* qkv = nullptr;
  float* scores = nullptr;
  bf16* probs = nullptr;
  const bf16* half = nullptr;
  const float* flt = nullptr;
  float* out = nullptr;
  double2* gn_partial = nullptr;
  float2* gn_ss = nullptr;
  const int32_t* tokens = nullptr;

  static bool IsFloat(VqSpace s) {
    return s == VqSpace::kScores || s == VqSpace::kFloatWeights || s == VqSpace::kOutput;
  }
  void* Raw(VqPtr p) const {
    switch (p.space) {
      case VqSpace::kNone:
        return nullptr;
      case VqSpace::kAct0:
        return act[0] + p.offset;
      case VqSpace::kAct1:
        return act[1] + p.offset;
      case VqSpace::kAct2:
        return act[2] + p.offset;
      case VqSpace::kQkv:
        return qkv + p.offset;
      case VqSpace::kScores:
        return scores + p.offset;
      case VqSpace::kProbs:
        return probs + p.offset;
      case VqSpace::kHalfWeights:
        return const_cast<bf16*>(half) + p.offset;
      case VqSpace::kFloatWeights:
        return const_cast<float*>(flt) + p.offset;
      case VqSpace::kOutput:
        return out + p.offset;
    }
    return nullptr;
  }
  bf16* H(VqPtr p) const { return p.valid() && !IsFloat(p.space) ? static_cast<bf16*>(Raw(p)) : nullptr; }
  float* F(VqPtr p) const { return p.valid() && IsFloat(p.space) ? static_cast<float*>(Raw(p)) : nullptr; }

  absl::Status Lookup(VqPtr table, int32_t table_rows, int32_t dim, int64_t token_offset, int64_t count,
                      VqPtr o) override {
    return CudaStatus(kernels::VqNhwcLookup(H(table), table_rows, dim, tokens + token_offset, count, H(o), stream),
                      "lookup");
  }
  absl::Status Conv3x3(int32_t shape_index, const VqConvShape&, int32_t n, VqPtr in, VqPtr weight, VqPtr o,
                       float beta) override {
    return convs->Forward(shape_index, n, H(in), H(weight), H(o), beta, cudnn_ws, cudnn_ws_bytes);
  }
  absl::Status Gemm(const VqGemm& g) override {
    if (g.lda > INT_MAX || g.ldb > INT_MAX || g.ldc > INT_MAX)
      return absl::InternalError("gemm: leading dimension > 2^31");
    const cudaDataType_t ct = g.c.space == VqSpace::kScores ? CUDA_R_32F : CUDA_R_16BF;
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float alpha = g.alpha, beta = g.beta;
    if (g.batch == 1) {
      return CublasStatus(cublasGemmEx(cublas, ta, tb, g.m, g.n, g.k, &alpha, Raw(g.a), CUDA_R_16BF,
                                       static_cast<int>(g.lda), Raw(g.b), CUDA_R_16BF, static_cast<int>(g.ldb), &beta,
                                       Raw(g.c), ct, static_cast<int>(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          g.what);
    }
    return CublasStatus(cublasGemmStridedBatchedEx(
                            cublas, ta, tb, g.m, g.n, g.k, &alpha, Raw(g.a), CUDA_R_16BF, static_cast<int>(g.lda),
                            g.stride_a, Raw(g.b), CUDA_R_16BF, static_cast<int>(g.ldb), g.stride_b, &beta, Raw(g.c), ct,
                            static_cast<int>(g.ldc), g.stride_c, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        g.what);
  }
  absl::Status GroupNorm(const VqGroupNormArgs& a) override {
    return CudaStatus(kernels::VqNhwcGroupNorm(H(a.in), F(a.in_bias), F(a.gamma), F(a.beta), a.images, a.hw, a.channels,
                                               a.groups, a.eps, a.swish, gn_partial, gn_ss, H(a.out), stream),
                      "group norm");
  }
  absl::Status Upsample2x(VqPtr in, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t channels, VqPtr o) override {
    return CudaStatus(kernels::VqNhwcUpsample2x(H(in), F(bias), n, h, w, channels, H(o), stream), "upsample");
  }
  absl::Status AddBias(VqPtr x, VqPtr bias, int64_t rows, int32_t channels) override {
    return CudaStatus(kernels::VqNhwcAddBias(H(x), F(bias), rows, channels, stream), "bias");
  }
  absl::Status SoftmaxToBf16(VqPtr s, int64_t rows, int32_t n, VqPtr p) override {
    return CudaStatus(kernels::VqSoftmaxRowsToBf16(F(s), rows, n, H(p), stream), "softmax");
  }
  absl::Status ConvOut(VqPtr in, VqPtr weight_t, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t cin, VqPtr o,
                       int64_t plane_stride) override {
    return CudaStatus(kernels::VqNhwcConvOut3(H(in), F(weight_t), F(bias), n, h, w, cin, F(o), plane_stride, stream),
                      "conv_out");
  }
};

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(std::max<size_t>(bytes, 256), absl::StrCat("bf16 VQ: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

struct Bf16VqNetwork::Impl {
  VqProgram program;
  std::vector<int32_t> ladder;
  int32_t chunk = 1;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudnnConvs> convs;
  DeviceBuffer half, flt, act[3], qkv, scores, probs, out, gn_partial, gn_ss, cudnn_ws, zero_tokens;
  GpuPrimitives prims;
  size_t scratch = 0;
  std::string description;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);  // nothing in flight on the buffers freed next
  }
};

Bf16VqNetwork::Bf16VqNetwork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16VqNetwork::~Bf16VqNetwork() = default;

absl::StatusOr<std::unique_ptr<Bf16VqNetwork>> Bf16VqNetwork::Create(const VqDecoderWeights& weights,
                                                                     const vq::Vq16Config& config,
                                                                     const Bf16VqOptions& options, cudaStream_t stream,
                                                                     cublasHandle_t cublas) {
  auto program = VqProgram::Build(weights, config);
  if (!program.ok()) return program.status();
  auto m = std::make_unique<Impl>();
  m->program = std::move(*program);
  const VqProgram& p = m->program;
  m->stream = stream;

  // Per-image bytes of every chunk-sized buffer.
  int64_t gn_partial_per_image = 0, gn_channels = 0;
  for (const VqOp& op : p.ops()) {
    if (op.kind != VqOpKind::kGroupNorm) continue;
    gn_partial_per_image =
        std::max(gn_partial_per_image, kernels::VqGroupNormPartialBytes(1, int64_t{op.h} * op.w, op.cin));
    gn_channels = std::max<int64_t>(gn_channels, op.cin);
  }
  const int64_t per_image = 3 * p.act_elems() * 2 + p.qkv_elems() * 2 + p.score_elems() * (4 + 2) + 3 * p.pixels() * 4 +
                            gn_partial_per_image + gn_channels * 8 + p.cells() * 4;
  const int64_t cudnn_limit = std::min(options.cudnn_workspace_bytes, options.workspace_bytes / 4);
  const int64_t budget = options.workspace_bytes - cudnn_limit;
  int64_t chunk = std::min<int64_t>(options.max_images_per_chunk, budget / per_image);
  // cuDNN's and cuBLAS's dimensions are ints; grids take at most 65535 images.
  chunk = std::min<int64_t>({chunk, INT_MAX / p.act_elems(), 65535});
  if (chunk < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("bf16 VQ: workspace_bytes ", options.workspace_bytes,
                                                     " is too small: one ", config.image_size, " px image needs ",
                                                     per_image + cudnn_limit, " bytes"));
  }
  m->chunk = static_cast<int32_t>(chunk);
  m->ladder = VqLadder(m->chunk);
  const size_t n = static_cast<size_t>(chunk);

  ARGEN_STATUS_RETURN(Alloc(m->half, p.half_weights().size() * 2, "half weights"));
  ARGEN_STATUS_RETURN(Alloc(m->flt, p.float_weights().size() * 4, "float weights"));
  for (int i = 0; i < 3; ++i) ARGEN_STATUS_RETURN(Alloc(m->act[i], n * p.act_elems() * 2, "activation"));
  ARGEN_STATUS_RETURN(Alloc(m->qkv, n * p.qkv_elems() * 2, "attention q|k|v"));
  ARGEN_STATUS_RETURN(Alloc(m->scores, n * p.score_elems() * 4, "attention scores"));
  ARGEN_STATUS_RETURN(Alloc(m->probs, n * p.score_elems() * 2, "attention probabilities"));
  ARGEN_STATUS_RETURN(Alloc(m->out, n * 3 * p.pixels() * 4, "output pixels"));
  ARGEN_STATUS_RETURN(Alloc(m->gn_partial, n * gn_partial_per_image, "group norm partial sums"));
  ARGEN_STATUS_RETURN(Alloc(m->gn_ss, n * gn_channels * 8, "group norm scale/shift"));
  ARGEN_STATUS_RETURN(Alloc(m->zero_tokens, n * p.cells() * 4, "warm-up tokens"));
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(m->half.as(), p.half_weights().data(), p.half_weights().size() * 2,
                                    cudaMemcpyHostToDevice, stream),
                    "bf16 VQ: upload weights");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(m->flt.as(), p.float_weights().data(), p.float_weights().size() * 4,
                                    cudaMemcpyHostToDevice, stream),
                    "bf16 VQ: upload weights");
  // Finite data for the algorithm search; id 0 for the warm-up decode.
  for (int i = 0; i < 3; ++i)
    ARGEN_CUDA_RETURN(cudaMemsetAsync(m->act[i].as(), 0, m->act[i].bytes(), stream), "bf16 VQ: clear");
  ARGEN_CUDA_RETURN(cudaMemsetAsync(m->zero_tokens.as(), 0, m->zero_tokens.bytes(), stream), "bf16 VQ: clear");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "bf16 VQ: upload weights");

  // cuDNN: descriptors and algorithms for every shape at every ladder size.
  auto convs = CudnnConvs::Create(stream);
  if (!convs.ok()) return convs.status();
  m->convs = std::move(*convs);
  std::vector<CudnnConvShape> shapes;
  std::vector<const void*> filters;
  for (const VqConvShape& s : p.conv_shapes()) {
    shapes.push_back({s.cin, s.cout, s.h, s.w});
    filters.push_back(m->half.as<bf16>() + s.example_weight);
  }
  {
    DeviceBuffer find_ws;
    ARGEN_STATUS_RETURN(Alloc(find_ws, static_cast<size_t>(cudnn_limit), "cuDNN algorithm search workspace"));
    ARGEN_STATUS_RETURN(m->convs->Plan(shapes, filters, m->ladder, options.benchmark_algorithms, m->act[0].as(),
                                       m->act[1].as(), find_ws.as(), static_cast<size_t>(cudnn_limit)));
  }
  ARGEN_STATUS_RETURN(Alloc(m->cudnn_ws, m->convs->workspace_bytes(), "cuDNN workspace"));

  GpuPrimitives& g = m->prims;
  g.stream = stream;
  g.cublas = cublas;
  g.convs = m->convs.get();
  g.cudnn_ws = m->cudnn_ws.as();
  g.cudnn_ws_bytes = m->cudnn_ws.bytes();
  for (int i = 0; i < 3; ++i) g.act[i] = m->act[i].as<bf16>();
  g.qkv = m->qkv.as<bf16>();
  g.scores = m->scores.as<float>();
  g.probs = m->probs.as<bf16>();
  g.half = m->half.as<bf16>();
  g.flt = m->flt.as<float>();
  g.out = m->out.as<float>();
  g.gn_partial = m->gn_partial.as<double2>();
  g.gn_ss = m->gn_ss.as<float2>();
  m->scratch = 3 * m->act[0].bytes() + m->qkv.bytes() + m->scores.bytes() + m->probs.bytes() + m->out.bytes() +
               m->gn_partial.bytes() + m->gn_ss.bytes() + m->cudnn_ws.bytes();

  // One decode per ladder size: every call checked, cuDNN's plans built now rather than in a caller's decode.
  std::unique_ptr<Bf16VqNetwork> net(new Bf16VqNetwork(std::move(m)));
  for (int32_t size : net->impl_->ladder) {
    if (absl::Status s = net->Run(net->impl_->zero_tokens.as<int32_t>(), size); !s.ok()) {
      cudaStreamSynchronize(stream);
      return absl::Status(s.code(), absl::StrCat("bf16 VQ warm-up at batch ", size, ": ", s.message()));
    }
  }
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "bf16 VQ: warm-up");
  ARGEN_CUDA_RETURN(cudaGetLastError(), "bf16 VQ: warm-up");
  Impl& im = *net->impl_;
  std::string ladder;
  for (int32_t s : im.ladder) absl::StrAppend(&ladder, ladder.empty() ? "" : ",", s);
  im.description =
      absl::StrCat("bf16 NHWC: chunk ", im.chunk, " (ladder ", ladder, "), scratch ", im.scratch >> 20,
                   " MiB, weights ", (im.half.bytes() + im.flt.bytes()) >> 20, " MiB; ", im.convs->Describe());
  return net;
}

absl::Status Bf16VqNetwork::Run(const int32_t* tokens, int32_t n) {
  Impl& m = *impl_;
  if (n < 1 || n > m.chunk) return absl::InternalError(absl::StrCat("bf16 VQ: ", n, " images, chunk ", m.chunk));
  m.prims.tokens = tokens;
  const int64_t plane = int64_t{n} * m.program.pixels();
  for (auto [first, size] : VqPieces(n, m.ladder)) {
    ARGEN_STATUS_RETURN(m.program.Run(m.prims, size, int64_t{first} * m.program.cells(), first, plane));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Bf16VqNetwork::Profile(int32_t n) {
  Impl& m = *impl_;
  if (std::find(m.ladder.begin(), m.ladder.end(), n) == m.ladder.end())
    return absl::InvalidArgumentError(absl::StrCat("bf16 VQ profile: batch ", n, " is not a ladder size"));
  const std::vector<VqOp>& ops = m.program.ops();
  std::vector<cudaEvent_t> events(ops.size() + 1, nullptr);
  absl::Status st;
  for (cudaEvent_t& e : events) {
    if (st.ok()) st = CudaStatus(cudaEventCreate(&e), "bf16 VQ profile: event");
  }
  if (st.ok()) {
    m.prims.tokens = m.zero_tokens.as<int32_t>();
    cudaError_t record = cudaSuccess;
    st = m.program.Run(m.prims, n, 0, 0, int64_t{n} * m.program.pixels(), [&](size_t i) {
      if (record == cudaSuccess) record = cudaEventRecord(events[i], m.stream);
    });
    if (st.ok()) st = CudaStatus(record, "bf16 VQ profile: record");
    if (st.ok()) st = CudaStatus(cudaStreamSynchronize(m.stream), "bf16 VQ profile: synchronize");
  }
  std::string out;
  if (st.ok()) {
    const char* kinds[] = {"lookup", "conv3x3", "linear", "groupnorm", "upsample", "attention", "conv_out"};
    double kind_ms[7] = {0}, kind_flop[7] = {0}, kind_bytes[7] = {0};
    std::vector<double> shape_ms(m.program.conv_shapes().size(), 0.0);
    double total = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events[i], events[i + 1]);
      const VqOp& op = ops[i];
      const int k = static_cast<int>(op.kind);
      const double px = static_cast<double>(n) * op.h * op.w;
      kind_ms[k] += ms;
      total += ms;
      switch (op.kind) {
        case VqOpKind::kConv3x3:
          kind_flop[k] += 2.0 * op.cin * op.cout * 9 * px;
          shape_ms[op.shape] += ms;
          break;
        case VqOpKind::kLinear:
          kind_flop[k] += 2.0 * op.cin * op.cout * px;
          break;
        case VqOpKind::kAttention:
          kind_flop[k] += 2.0 * op.cin * op.cin * 4 * px + 4.0 * op.cin * px * op.h * op.w;
          break;
        case VqOpKind::kConvOut:
          kind_flop[k] += 2.0 * op.cin * 3 * 9 * px;
          break;
        case VqOpKind::kGroupNorm:
          kind_bytes[k] += 3.0 * 2 * op.cin * px;
          break;
        case VqOpKind::kUpsample:
          kind_bytes[k] += 5.0 * 2 * op.cin * px;
          break;
        case VqOpKind::kLookup:
          break;
      }
    }
    absl::StrAppend(&out, "bf16 profile, batch ", n, ": ", total, " ms (", 1e3 * n / total, " img/s of GPU time)");
    for (int k = 0; k < 7; ++k) {
      if (kind_ms[k] <= 0) continue;
      absl::StrAppend(&out, "\n  ", kinds[k], ": ", kind_ms[k], " ms (", 100.0 * kind_ms[k] / total, "%)");
      if (kind_flop[k] > 0) absl::StrAppend(&out, ", ", kind_flop[k] / kind_ms[k] / 1e9, " TFLOP/s");
      if (kind_bytes[k] > 0) absl::StrAppend(&out, ", ", kind_bytes[k] / kind_ms[k] / 1e6, " GB/s");
    }
    for (size_t s = 0; s < shape_ms.size(); ++s) {
      const VqConvShape& c = m.program.conv_shapes()[s];
      double flop = 0;
      for (const VqOp& op : ops)
        if (op.kind == VqOpKind::kConv3x3 && op.shape == static_cast<int32_t>(s))
          flop += 2.0 * c.cin * c.cout * 9 * static_cast<double>(n) * c.h * c.w;
      absl::StrAppend(&out, "\n    conv ", c.cin, "->", c.cout, " @", c.h, ": ", shape_ms[s], " ms, ",
                      shape_ms[s] > 0 ? flop / shape_ms[s] / 1e9 : 0.0, " TFLOP/s");
    }
  }
  for (cudaEvent_t e : events)
    if (e) cudaEventDestroy(e);
  if (!st.ok()) return st;
  return out;
}

const float* Bf16VqNetwork::output() const { return impl_->out.as<float>(); }
int32_t Bf16VqNetwork::chunk() const { return impl_->chunk; }
size_t Bf16VqNetwork::scratch_bytes() const { return impl_->scratch; }
size_t Bf16VqNetwork::weight_bytes() const { return impl_->half.bytes() + impl_->flt.bytes(); }
const std::string& Bf16VqNetwork::description() const { return impl_->description; }

#else  // !ARGEN_WITH_CUDNN

struct Bf16VqNetwork::Impl {
  std::string description;
};
Bf16VqNetwork::Bf16VqNetwork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16VqNetwork::~Bf16VqNetwork() = default;
absl::StatusOr<std::unique_ptr<Bf16VqNetwork>> Bf16VqNetwork::Create(const VqDecoderWeights&, const vq::Vq16Config&,
                                                                     const Bf16VqOptions&, cudaStream_t,
                                                                     cublasHandle_t) {
  return absl::FailedPreconditionError("bf16 VQ: this build has no cuDNN (cudnn.h / libcudnn not found at configure)");
}
absl::Status Bf16VqNetwork::Run(const int32_t*, int32_t) { return absl::FailedPreconditionError("no cuDNN"); }
absl::StatusOr<std::string> Bf16VqNetwork::Profile(int32_t) { return absl::FailedPreconditionError("no cuDNN"); }
const float* Bf16VqNetwork::output() const { return nullptr; }
int32_t Bf16VqNetwork::chunk() const { return 0; }
size_t Bf16VqNetwork::scratch_bytes() const { return 0; }
size_t Bf16VqNetwork::weight_bytes() const { return 0; }
const std::string& Bf16VqNetwork::description() const { return impl_->description; }

#endif

}  // namespace argen::vq
