#include "engine/cuda/gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace argen::cuda {
namespace {

// The process-wide algorithm choices of kLtTuned, by (device, rows, in, out, beta != 0, alignment).
using GlobalKey = std::tuple<int, int, int, int, bool, int>;
struct Registry {
  std::mutex mu;
  std::map<GlobalKey, cublasLtMatmulAlgo_t> algos;
  GemmTuningStats stats;
};
Registry& GetRegistry() {
  static Registry* r = new Registry;  // never destroyed: used from destructors of static objects too
  return *r;
}

// Largest power of two (<= 256) dividing the address (or byte count).
int AlignmentOf(uintptr_t v) {
  int a = 256;
  while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

absl::Status LtStatus(cublasStatus_t s, absl::string_view what) { return CublasStatus(s, what); }

}  // namespace

absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        int rows, int in, int out, float* y, float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  const float alpha = 1.0f;
  // Column-major view: y^T [out x rows] = W [in x out]^T * x^T [in x rows].
  return CublasStatus(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w,
                                   CUDA_R_16BF, in, x, CUDA_R_16BF, in, &beta, y, CUDA_R_32F, out,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      what);
}

const char* GemmModeName(GemmMode m) {
  switch (m) {
    case GemmMode::kCublas: return "cublas";
    case GemmMode::kLtHeuristic: return "lt-heuristic";
    case GemmMode::kLtTuned: return "lt-tuned";
  }
  return "?";
}

bool ParseGemmMode(absl::string_view s, GemmMode* m) {
  if (s == "cublas") *m = GemmMode::kCublas;
  else if (s == "lt-heuristic") *m = GemmMode::kLtHeuristic;
  else if (s == "lt-tuned") *m = GemmMode::kLtTuned;
  else return false;
  return true;
}

GemmTuningStats GetGemmTuningStats() {
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.stats;
}

absl::Status Gemm::Init(cudaStream_t stream, size_t scratch_floats) {
  Reset();
  stream_ = stream;
  ARGEN_CUDA_RETURN(cudaGetDevice(&device_), "gemm device");
  ARGEN_STATUS_RETURN(CublasStatus(cublasCreate(&cublas_), "create handle"));
  ARGEN_STATUS_RETURN(CublasStatus(cublasSetStream(cublas_, stream_), "set stream"));
  // A fixed workspace keeps cuBLAS / cuBLASLt from allocating during the step.
  {
    absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(kWorkspaceBytes, "cublas workspace");
    if (!ws.ok()) return ws.status();
    workspace_ = *std::move(ws);
  }
  ARGEN_STATUS_RETURN(CublasStatus(cublasSetWorkspace(cublas_, workspace_.as(), kWorkspaceBytes), "workspace"));
  ARGEN_STATUS_RETURN(LtStatus(cublasLtCreate(&lt_), "create cublasLt handle"));
  if (scratch_floats > 0) {
    absl::StatusOr<DeviceBuffer> s = DeviceBuffer::Allocate(scratch_floats * sizeof(float), "gemm tuning scratch");
    if (!s.ok()) return s.status();
    scratch_ = *std::move(s);
    ARGEN_CUDA_RETURN(cudaMemsetAsync(scratch_.as(), 0, scratch_floats * sizeof(float), stream_), "gemm scratch");
    scratch_floats_ = scratch_floats;
  }
  events_.assign(2 * kTuneCandidates, nullptr);
  for (cudaEvent_t& e : events_) ARGEN_CUDA_RETURN(cudaEventCreate(&e), "gemm tuning events");
  return absl::OkStatus();
}

namespace {
void DestroyPlanHandles(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                        cublasLtMatrixLayout_t c) {
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
}
}  // namespace

void Gemm::Reset() {
  for (auto& [key, p] : plans_) DestroyPlanHandles(p.desc, p.a, p.b, p.c);
  plans_.clear();
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  events_.clear();
  if (lt_) cublasLtDestroy(lt_);
  lt_ = nullptr;
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  workspace_ = DeviceBuffer();
  scratch_ = DeviceBuffer();
  scratch_floats_ = 0;
}

absl::Status Gemm::MakePlan(const Key& key, Plan* plan) {
  const auto [rows, in, out, accumulate, align] = key;
  (void)accumulate;
  ARGEN_STATUS_RETURN(LtStatus(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "lt desc"));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  ARGEN_STATUS_RETURN(LtStatus(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "lt transa"));
  ARGEN_STATUS_RETURN(LtStatus(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "lt transb"));
  // Column-major view as in LinearBf16: A = W stored [in x out] (op T), B = x^T [in x rows], C = D = y^T [out x rows].
  ARGEN_STATUS_RETURN(LtStatus(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, in, out, in), "lt layout A"));
  ARGEN_STATUS_RETURN(LtStatus(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, in, rows, in), "lt layout B"));
  ARGEN_STATUS_RETURN(LtStatus(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, out, rows, out), "lt layout C"));

  cublasLtMatmulPreference_t pref = nullptr;
  ARGEN_STATUS_RETURN(LtStatus(cublasLtMatmulPreferenceCreate(&pref), "lt preference"));
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t al = static_cast<uint32_t>(align);
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(kTuneCandidates);
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(lt_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, kTuneCandidates,
                                        results.data(), &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm (or an unsupported combination): this shape runs cublasGemmEx.
  if (st != CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates.push_back(results[i]);
  return absl::OkStatus();
}

cublasStatus_t Gemm::RunLt(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* x,
                           const __nv_bfloat16* w, float* y, float beta) const {
  const float alpha = 1.0f;
  return cublasLtMatmul(lt_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, y, plan.c, y, plan.c, &algo,
                        workspace_.as(), kWorkspaceBytes, stream_);
}

absl::Status Gemm::Choose(const Key& key, Plan* plan, const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
                          float beta) {
  Registry& reg = GetRegistry();
  const auto [rows, in, out, accumulate, align] = key;
  const GlobalKey gkey{device_, rows, in, out, accumulate, align};
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.algos.find(gkey);
    if (it != reg.algos.end()) {
      plan->algo = it->second;
      plan->have_final = true;
      return absl::OkStatus();
    }
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ARGEN_CUDA_RETURN(cudaStreamIsCapturing(stream_, &capture), "gemm: capture status");
  // Timing target: the real output when beta == 0 (the winner overwrites it
  // afterwards), else the scratch with the same beta (the real output keeps
  // the residual it must accumulate onto).
  float* target = nullptr;
  if (beta == 0.f) target = y;
  else if (static_cast<size_t>(rows) * static_cast<size_t>(out) <= scratch_floats_) target = scratch_.as<float>();
  cublasLtMatmulAlgo_t chosen = plan->candidates[0].algo;
  bool timed = false;
  double spent_ms = 0;
  const int n = static_cast<int>(plan->candidates.size());
  if (capture == cudaStreamCaptureStatusNone && target != nullptr && n > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<bool> ok(n, false);
    for (int i = 0; i < n; ++i) {
      const cublasLtMatmulAlgo_t& algo = plan->candidates[i].algo;
      if (RunLt(*plan, algo, x, w, target, beta) != CUBLAS_STATUS_SUCCESS) continue;  // warm-up
      ARGEN_CUDA_RETURN(cudaEventRecord(events_[2 * i], stream_), "gemm tuning event");
      bool good = true;
      for (int r = 0; r < kTuneReps && good; ++r) good = RunLt(*plan, algo, x, w, target, beta) == CUBLAS_STATUS_SUCCESS;
      ARGEN_CUDA_RETURN(cudaEventRecord(events_[2 * i + 1], stream_), "gemm tuning event");
      ok[i] = good;
    }
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "gemm tuning");
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) {
      if (!ok[i]) continue;
      float ms = 0;
      ARGEN_CUDA_RETURN(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]), "gemm tuning time");
      if (ms < best) {
        best = ms;
        chosen = plan->candidates[i].algo;
      }
    }
    timed = true;
    spent_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::lock_guard<std::mutex> lock(reg.mu);
  auto [it, inserted] = reg.algos.emplace(gkey, chosen);  // another object may have chosen first: take its choice
  if (inserted) {
    if (timed) ++reg.stats.shapes_tuned;
    else ++reg.stats.shapes_untimed;
  }
  reg.stats.tuning_ms += spent_ms;
  plan->algo = it->second;
  plan->have_final = true;
  return absl::OkStatus();
}

absl::Status Gemm::Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y,
                          float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  if (mode_ == GemmMode::kCublas || lt_ == nullptr) return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  // cuBLASLt's alignment covers the pointers and the leading dimensions (in bf16, out fp32).
  const int align = std::min({AlignmentOf(reinterpret_cast<uintptr_t>(x)), AlignmentOf(reinterpret_cast<uintptr_t>(w)),
                              AlignmentOf(reinterpret_cast<uintptr_t>(y)), AlignmentOf(uintptr_t(in) * 2),
                              AlignmentOf(uintptr_t(out) * 4)});
  if (align < 16) return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  const Key key{rows, in, out, beta != 0.f, align};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Plan p;
    const absl::Status s = MakePlan(key, &p);
    if (!s.ok()) {
      DestroyPlanHandles(p.desc, p.a, p.b, p.c);
      return absl::InternalError(absl::StrCat(what, ": ", s.message()));
    }
    it = plans_.emplace(key, p).first;
  }
  Plan& plan = it->second;
  if (plan.candidates.empty()) return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  const cublasLtMatmulAlgo_t* algo = &plan.candidates[0].algo;
  if (mode_ == GemmMode::kLtTuned) {
    if (!plan.have_final) {
      const absl::Status s = Choose(key, &plan, x, w, y, beta);
      if (!s.ok()) return absl::InternalError(absl::StrCat(what, ": ", s.message()));
    }
    algo = &plan.algo;
  }
  const cublasStatus_t st = RunLt(plan, *algo, x, w, y, beta);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    // Rejected before launching anything: this shape runs cublasGemmEx from now on.
    plan.candidates.clear();
    return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  }
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return CublasStatus(st, absl::StrCat(what, " (cublasLt)"));
}

}  // namespace argen::cuda
