#include "engine/cuda/stage_timer.h"

namespace argen::cuda {

StageTimer::~StageTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void StageTimer::Enable(bool on, cudaStream_t stream) {
  enabled_ = on;
  stream_ = stream;
}

void StageTimer::BeginPass() {
  if (!enabled_) return;
  used_ = 0;
  stages_.clear();
  Mark(Stage::kCount);  // start marker, charged to nothing
}

void StageTimer::Mark(Stage stage) {
  if (!enabled_) return;
  if (used_ == events_.size()) {
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    events_.push_back(e);
  }
  cudaEventRecord(events_[used_++], stream_);
  stages_.push_back(stage);
}

void StageTimer::EndPass() {
  if (!enabled_ || used_ < 2) return;
  for (size_t i = 1; i < used_; ++i) {
    float ms = 0.f;
    if (cudaEventElapsedTime(&ms, events_[i - 1], events_[i]) == cudaSuccess && stages_[i] != Stage::kCount)
      totals_.ms[static_cast<int>(stages_[i])] += ms;
  }
}

void StageTimer::CountStep() {
  if (enabled_) totals_.steps += 1;
}

StageTimes StageTimer::Take() {
  StageTimes t = totals_;
  totals_ = StageTimes{};
  return t;
}

}  // namespace argen::cuda
