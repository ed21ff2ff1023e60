#include "bench/gpu/parallel_decode.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/model/parallel_schedule.h"
#include "engine/model/step_plan.h"

namespace argen::bench {

int ParallelSteps(int l_dec, int period, int window) {
  model::ParallelSchedule schedule(l_dec, period, window, {});
  schedule.Made(0);
  int steps = 0;
  while (!schedule.done()) {
    schedule.Next();
    schedule.Commit();
    ++steps;
  }
  return steps;
}

absl::Status DecodeInParallel(cuda::CudaBackend& be, std::span<const model::RowId> rows,
                              std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token0, int l_dec,
                              int period, int window, int stage_steps, ParallelDecodeResult* out) {
  using Clock = std::chrono::steady_clock;
  const int images = static_cast<int>(sampling.size());
  if (rows.size() != 2 * sampling.size() || token0.size() != sampling.size()) {
    return absl::InvalidArgumentError("DecodeInParallel: two rows and a token 0 a pair");
  }
  // The timed steps: the middle ones, where the most rows are in flight (the last ones have one).
  const int total = ParallelSteps(l_dec, period, window);
  const int timed_from = std::max(0, (total - stage_steps) / 2), timed_to = timed_from + stage_steps;
  model::ParallelSchedule schedule(l_dec, period, window, {});
  schedule.Made(0);
  // Every image's tokens by index (input ids), -1 where not made.
  std::vector<std::vector<int32_t>> made(images, std::vector<int32_t>(l_dec, -1));
  for (int i = 0; i < images; ++i) made[i][0] = token0[i];
  model::StepPlanBuilder builder;
  std::vector<int32_t> sampled;
  out->steps = 0;
  out->timed_steps_ms = 0;
  while (!schedule.done()) {
    const std::vector<model::ParallelSchedule::Query>& queries = schedule.Next();
    if (out->steps == timed_from) be.SetStageTiming(true);
    if (out->steps == timed_to) be.SetStageTiming(false);
    builder.Clear();
    builder.AllowOutOfOrder();
    for (int i = 0; i < images; ++i) {
      for (int side = 0; side < 2; ++side) {
        builder.AddRow(rows[2 * i + side]);
        for (const model::ParallelSchedule::Query& q : queries) {
          builder.AddQuery(model::QueryKind::kDecode, made[i][q.input_token], q.index, q.provisional);
        }
      }
      builder.AddSampling(sampling[i]);
    }
    sampled.assign(static_cast<size_t>(images) * queries.size(), -1);
    const auto a = Clock::now();
    const absl::Status s = be.Forward(builder.Plan(), {sampled, nullptr});
    if (!s.ok()) return s;
    if (out->steps >= timed_from && out->steps < timed_to) {
      out->timed_steps_ms += std::chrono::duration<double, std::milli>(Clock::now() - a).count();
    }
    for (int i = 0; i < images; ++i) {
      for (size_t j = 0; j < queries.size(); ++j) {
        if (queries[j].records) made[i][queries[j].index + 1] = sampled[i * queries.size() + j];
      }
    }
    schedule.Commit();
    ++out->steps;
  }
  return absl::OkStatus();
}

}  // namespace argen::bench
