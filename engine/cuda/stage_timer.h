// Optional per-stage GPU timing of the decode step with CUDA events recorded
// at stage boundaries (off by default: no events are recorded then).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <vector>

namespace argen::cuda {

// Indexing (the policies' work) is plan + observe + apply: the step's PlanKernel,
// the per-layer ObserveKernel (score policies), the step's diagonal ApplyKernel.
enum class Stage : int { kEmbed, kPlan, kQkv, kAttention, kObserve, kApply, kOProj, kFfn, kHead, kCount };
inline constexpr const char* kStageNames[] = {"embed", "plan",   "qkv", "attention", "observe",
                                              "apply", "o_proj", "ffn", "head"};

struct StageTimes {
  std::array<double, static_cast<int>(Stage::kCount)> ms{};
  int steps = 0;
};

class StageTimer {
 public:
  ~StageTimer();
  void Enable(bool on, cudaStream_t stream);
  bool enabled() const { return enabled_; }
  // Marks the end of `stage` (the time since the previous mark is charged to it).
  void Mark(Stage stage);
  // A decode pass's marks: a step of many queries may run as several passes
  // (max_batch_rows / 2 pairs each), whose times all count to that step.
  void BeginPass();
  // Call after the stream is synchronised: adds the pass's times to totals().
  void EndPass();
  // Counts one step (totals() are per step when divided by steps).
  void CountStep();
  StageTimes Take();

 private:
  bool enabled_ = false;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<Stage> stages_;
  size_t used_ = 0;
  StageTimes totals_;
};

}  // namespace argen::cuda
