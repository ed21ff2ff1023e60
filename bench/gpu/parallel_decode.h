// argen_bench --parallel-window W: a batch decoded with ZipAR-style image rows
// in flight (engine/model/parallel_schedule.h), as the server's parallel
// decoding feeds the backend: every image of the batch on the same schedule
// (it depends on positions only), each step one plan with every pair's
// queries out of order. Forced tokens are not modelled (the random model's
// row breaks are sampled like any token): the step shapes are the server's.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/backend.h"
#include "engine/model/sampler.h"

namespace argen::bench {

struct ParallelDecodeResult {
  int steps = 0;              // decode steps the schedule took (sequential: l_dec - 1)
  double timed_steps_ms = 0;  // wall time of the `stage_steps` steps the stage timer timed (the middle ones)
};

// The number of steps a schedule of l_dec tokens in rows of `period` at `window` takes.
int ParallelSteps(int l_dec, int period, int window);

// Decodes tokens 1 .. l_dec - 1 of every pair (rows[2i], rows[2i + 1], sampling[i]) whose token 0
// (token0[i]) the prefill made; the backend's stage timer runs for `stage_steps` steps in the middle of
// the schedule, where the most image rows are in flight (its last steps have one).
absl::Status DecodeInParallel(cuda::CudaBackend& be, std::span<const model::RowId> rows,
                              std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token0, int l_dec,
                              int period, int window, int stage_steps, ParallelDecodeResult* out);

}  // namespace argen::bench
