#include "bench/gpu/flow_head_micro.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/gpu/captured_graph.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/sampling.h"

namespace argen::bench {
namespace {

constexpr int kWarmReplays = 2;
constexpr int kTimedReplays = 10;

}  // namespace

absl::StatusOr<std::unique_ptr<FlowHeadMicro>> FlowHeadMicro::Create(const model::FlowMatchingHeadDesc& desc,
                                                                     int32_t max_pairs) {
  std::unique_ptr<FlowHeadMicro> m(new FlowHeadMicro());
  absl::StatusOr<std::unique_ptr<cuda::DeviceFlowHead>> head = cuda::DeviceFlowHead::Create(desc);
  if (!head.ok()) return head.status();
  m->head_ = *std::move(head);
  m->max_pairs_ = max_pairs;
  ARGEN_CUDA_RETURN(cudaStreamCreateWithFlags(&m->stream_, cudaStreamNonBlocking), "head micro stream");
  ARGEN_STATUS_RETURN(m->gemm_.Init(m->stream_));
  const size_t rows = 2 * static_cast<size_t>(max_pairs);
  for (auto [buf, bytes, what] :
       {std::tuple{&m->conditions_, sizeof(float) * rows * m->head_->cond_dim(), "head micro conditions"},
        std::tuple{&m->sampling_, sizeof(kernels::PairSampling) * max_pairs, "head micro sampling"},
        std::tuple{&m->tokens_, sizeof(float) * max_pairs * m->head_->token_dim(), "head micro tokens"},
        std::tuple{&m->nonfinite_, sizeof(int32_t), "head micro flag"}}) {
    absl::StatusOr<cuda::DeviceBuffer> b = cuda::DeviceBuffer::Allocate(bytes, what);
    if (!b.ok()) return b.status();
    *buf = *std::move(b);
  }
  return m;
}

FlowHeadMicro::~FlowHeadMicro() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  gemm_.Reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<FlowHeadTiming> FlowHeadMicro::Time(int32_t pairs, float cfg_weight) {
  if (pairs < 1 || pairs > max_pairs_) {
    return absl::InvalidArgumentError(absl::StrCat("head micro: ", pairs, " pairs, room for 1 to ", max_pairs_));
  }
  const int64_t C = head_->cond_dim();
  std::vector<float> conditions(2 * static_cast<size_t>(pairs) * C);
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.4f);
  for (float& x : conditions) x = normal(rng);
  std::vector<kernels::PairSampling> sampling(pairs);
  for (int32_t p = 0; p < pairs; ++p) {
    sampling[p].cfg_weight = cfg_weight;
    sampling[p].seed = 1234;
    sampling[p].image_index = p;
    sampling[p].step = 7;
  }
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(conditions_.as(), conditions.data(), sizeof(float) * conditions.size(),
                                    cudaMemcpyHostToDevice, stream_),
                    "head micro conditions");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(sampling_.as(), sampling.data(), sizeof(kernels::PairSampling) * pairs,
                                    cudaMemcpyHostToDevice, stream_),
                    "head micro sampling");
  ARGEN_CUDA_RETURN(cudaMemsetAsync(nonfinite_.as(), 0, sizeof(int32_t), stream_), "head micro flag");
  auto enqueue = [&] {
    return head_->EnqueueSample(gemm_, stream_, conditions_.as<float>(), sampling_.as<kernels::PairSampling>(), pairs,
                                tokens_.as<float>(), nullptr, nullptr, nonfinite_.as<int32_t>());
  };
  FlowHeadTiming t;
  ARGEN_STATUS_RETURN(enqueue());  // warm-up (cuBLAS picks its kernels)
  absl::StatusOr<double> eager = TimeCalls(stream_, kTimedReplays, enqueue);
  if (!eager.ok()) return eager.status();
  t.eager_ms = *eager;
  absl::StatusOr<CapturedGraph> graph = CapturedGraph::Capture(stream_, enqueue, "head micro graph");
  if (!graph.ok()) return graph.status();
  const auto replay = [&] { return graph->Launch(stream_); };
  for (int i = 0; i < kWarmReplays; ++i) ARGEN_STATUS_RETURN(replay());
  absl::StatusOr<double> graphed = TimeCalls(stream_, kTimedReplays, replay);
  if (!graphed.ok()) return graphed.status();
  t.graph_ms = *graphed;
  int32_t flag = 1;
  ARGEN_CUDA_RETURN(cudaMemcpy(&flag, nonfinite_.as(), sizeof(int32_t), cudaMemcpyDeviceToHost), "head micro flag");
  t.finite = flag == 0;
  return t;
}

}  // namespace argen::bench
