#include "engine/vq_cuda/cudnn_convs.h"

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace argen::vq {
namespace {

std::string ShapeName(const CudnnConvShape& s, int32_t batch) {
  return absl::StrCat(batch, "x", s.h, "x", s.w, "x", s.cin, " -> ", s.cout);
}

absl::Status CudnnStatus(cudnnStatus_t st, absl::string_view what) {
  if (st == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat("cudnn: ", what, ": ", cudnnGetErrorString(st), " (", static_cast<int>(st), ")");
  const int family = static_cast<int>(st) / 1000;
  if (family == 3) return absl::FailedPreconditionError(msg);  // CUDNN_STATUS_NOT_SUPPORTED*
  if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    return absl::ResourceExhaustedError(msg);
  if (family == 1) return absl::FailedPreconditionError(msg);  // not initialised, sub-library missing or mismatched
  return absl::InternalError(msg);
}

#define ARGEN_CUDNN_RETURN(expr, what)                                                           \
  do {                                                                                           \
    if (absl::Status argen_cs_ = CudnnStatus((expr), (what)); !argen_cs_.ok()) return argen_cs_; \
  } while (0)

const char* AlgoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "winograd_nonfused";
    default:
      return "?";
  }
}

}  // namespace

struct CudnnConvs::Impl {
  cudnnHandle_t handle = nullptr;
  struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
    size_t memory = 0;
    float ms = -1;  // measured (benchmark) or -1
  };
  std::vector<CudnnConvShape> shapes;
  std::vector<cudnnFilterDescriptor_t> filters;
  std::map<std::pair<int32_t, int32_t>, Plan> plans;  // (shape, batch)
  int32_t largest_batch = 0;
  bool benchmarked = false;

  ~Impl() {
    for (auto& [key, p] : plans) {
      if (p.x) cudnnDestroyTensorDescriptor(p.x);
      if (p.y) cudnnDestroyTensorDescriptor(p.y);
      if (p.conv) cudnnDestroyConvolutionDescriptor(p.conv);
    }
    for (cudnnFilterDescriptor_t f : filters) cudnnDestroyFilterDescriptor(f);
    if (handle) cudnnDestroy(handle);
  }
};

CudnnConvs::CudnnConvs(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnConvs::~CudnnConvs() = default;

absl::StatusOr<std::unique_ptr<CudnnConvs>> CudnnConvs::Create(cudaStream_t stream) {
  auto impl = std::make_unique<Impl>();
  ARGEN_CUDNN_RETURN(cudnnCreate(&impl->handle), "cudnnCreate");
  ARGEN_CUDNN_RETURN(cudnnSetStream(impl->handle, stream), "cudnnSetStream");
  return std::unique_ptr<CudnnConvs>(new CudnnConvs(std::move(impl)));
}

absl::Status CudnnConvs::Plan(const std::vector<CudnnConvShape>& shapes, const std::vector<const void*>& weights,
                              const std::vector<int32_t>& batches, bool benchmark, void* x, void* y, void* find_ws,
                              size_t workspace_limit) {
  Impl& m = *impl_;
  if (weights.size() != shapes.size()) return absl::InvalidArgumentError("cudnn plan: one filter per shape");
  // Appended: this call's shape i is shape first + i (Forward's numbering).
  const size_t first = m.shapes.size();
  m.shapes.insert(m.shapes.end(), shapes.begin(), shapes.end());
  m.benchmarked = benchmark;
  for (const CudnnConvShape& s : shapes) {
    if (s.cin % 8 != 0 || s.cout % 8 != 0)
      return absl::FailedPreconditionError(
          absl::StrCat("cudnn plan: ", ShapeName(s, 1), ": channels not multiples of 8"));
    cudnnFilterDescriptor_t f = nullptr;
    ARGEN_CUDNN_RETURN(cudnnCreateFilterDescriptor(&f), "cudnnCreateFilterDescriptor");
    m.filters.push_back(f);
    ARGEN_CUDNN_RETURN(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, s.cout, s.cin, 3, 3),
                       absl::StrCat("filter ", ShapeName(s, 1)));
  }
  for (size_t si = first; si < m.shapes.size(); ++si) {
    const CudnnConvShape& s = m.shapes[si];
    for (int32_t batch : batches) {
      m.largest_batch = std::max(m.largest_batch, batch);
      const std::string name = ShapeName(s, batch);
      if (int64_t{batch} * std::max(s.cin, s.cout) * s.h * s.w > INT_MAX)
        return absl::FailedPreconditionError(absl::StrCat("cudnn plan: ", name, ": more than 2^31 elements"));
      Impl::Plan& p = m.plans[{static_cast<int32_t>(si), batch}];
      ARGEN_CUDNN_RETURN(cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor");
      ARGEN_CUDNN_RETURN(cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor");
      ARGEN_CUDNN_RETURN(cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor");
      ARGEN_CUDNN_RETURN(
          cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, batch, s.cin, s.h, s.w),
          absl::StrCat("input ", name));
      ARGEN_CUDNN_RETURN(
          cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, batch, s.cout, s.h, s.w),
          absl::StrCat("output ", name));
      ARGEN_CUDNN_RETURN(
          cudnnSetConvolution2dDescriptor(p.conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          absl::StrCat("convolution ", name));
      ARGEN_CUDNN_RETURN(cudnnSetConvolutionMathType(p.conv, CUDNN_TENSOR_OP_MATH), absl::StrCat("math type ", name));
      int on = 0, oc = 0, oh = 0, ow = 0;
      ARGEN_CUDNN_RETURN(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, m.filters[si], &on, &oc, &oh, &ow),
                         absl::StrCat("output dims ", name));
      if (on != batch || oc != s.cout || oh != s.h || ow != s.w)
        return absl::InternalError(absl::StrCat("cudnn plan: ", name, ": unexpected output dims"));

      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      if (benchmark) {
        ARGEN_CUDNN_RETURN(cudnnFindConvolutionForwardAlgorithmEx(m.handle, p.x, x, m.filters[si], weights[si - first],
                                                                  p.conv, p.y, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                  &returned, perf, find_ws, workspace_limit),
                           absl::StrCat("find algorithm ", name));
      } else {
        ARGEN_CUDNN_RETURN(cudnnGetConvolutionForwardAlgorithm_v7(m.handle, p.x, m.filters[si], p.conv, p.y,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                           absl::StrCat("algorithm heuristics ", name));
      }
      bool found = false;
      for (int i = 0; i < returned && !found; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > workspace_limit) continue;
        p.algo = perf[i].algo;
        p.math = perf[i].mathType;
        p.memory = perf[i].memory;
        p.ms = benchmark ? perf[i].time : -1.0f;
        found = true;
      }
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat("cudnn plan: ", name, ": no algorithm runs within ",
                                                          workspace_limit, " bytes of workspace (", returned,
                                                          " candidates)"));
      }
      ARGEN_CUDNN_RETURN(cudnnSetConvolutionMathType(p.conv, p.math), absl::StrCat("math type ", name));
    }
  }
  return absl::OkStatus();
}

int32_t CudnnConvs::shape_count() const { return static_cast<int32_t>(impl_->shapes.size()); }

size_t CudnnConvs::workspace_bytes() const {
  size_t most = 0;
  for (const auto& [key, p] : impl_->plans) most = std::max(most, p.memory);
  return most;
}

absl::Status CudnnConvs::Forward(int32_t shape, int32_t batch, const void* x, const void* w, void* y, float beta,
                                 void* workspace, size_t workspace_bytes) const {
  const Impl& m = *impl_;
  auto it = m.plans.find({shape, batch});
  if (it == m.plans.end())
    return absl::InternalError(absl::StrCat("cudnn forward: shape ", shape, " at batch ", batch, " was not planned"));
  const Impl::Plan& p = it->second;
  if (p.memory > workspace_bytes)
    return absl::InternalError(absl::StrCat("cudnn forward: workspace ", workspace_bytes, " < ", p.memory));
  const float alpha = 1.0f;
  return CudnnStatus(cudnnConvolutionForward(m.handle, &alpha, p.x, x, m.filters[shape], w, p.conv, p.algo, workspace,
                                             workspace_bytes, &beta, p.y, y),
                     absl::StrCat("convolution ", ShapeName(m.shapes[shape], batch)));
}

std::string CudnnConvs::Describe() const {
  const Impl& m = *impl_;
  std::string out = absl::StrCat("cuDNN ", cudnnGetVersion(), m.benchmarked ? ", benchmarked" : ", heuristics",
                                 "; at batch ", m.largest_batch, ":");
  for (size_t si = 0; si < m.shapes.size(); ++si) {
    auto it = m.plans.find({static_cast<int32_t>(si), m.largest_batch});
    if (it == m.plans.end()) continue;
    const Impl::Plan& p = it->second;
    absl::StrAppend(&out, " [", ShapeName(m.shapes[si], m.largest_batch), ": ", AlgoName(p.algo),
                    p.math == CUDNN_DEFAULT_MATH ? " (no tensor ops)" : "", ", ws ", p.memory >> 20, " MiB");
    if (p.ms >= 0) absl::StrAppend(&out, ", ", p.ms, " ms");
    absl::StrAppend(&out, "]");
  }
  return out;
}

}  // namespace argen::vq
