// argen_bench --project-bounded: a batch of a bounded-memory policy decodes
// its first S steps and the rest is projected from its steady step. Once a
// row's n_slots decode slots are full every step attends and holds the same
// keys, so a step costs what the steps after n_slots cost: S must leave at
// least kSteadySteps of them to average. Dense and unbounded policies (n_slots
// >= l_dec) grow a key a step and always run whole.
#pragma once

#include <string>

#include "kernels/sparse/policy_types.h"

namespace argen::bench {

inline constexpr int kSteadySteps = 256;

// The decode steps a batch runs (l_dec - 1 unless projected); 0 with *why when
// `project_steps` leaves fewer than kSteadySteps past n_slots.
inline int DecodeStepsToRun(const sparse::ResolvedPolicy& policy, int project_steps, std::string* why) {
  const int all = policy.l_dec - 1;
  if (project_steps <= 0 || policy.n_slots >= policy.l_dec || project_steps >= all) return all;
  if (project_steps < policy.n_slots + kSteadySteps) {
    *why = "--project-bounded " + std::to_string(project_steps) + " is fewer than n_slots " +
           std::to_string(policy.n_slots) + " + " + std::to_string(kSteadySteps) + " steady steps";
    return 0;
  }
  return project_steps;
}

// The whole decode's seconds: the `ran` steps measured (`measured_s`) and the
// other l_dec - 1 - ran at the steady step.
inline double ProjectedDecodeSeconds(double measured_s, double steady_ms, int l_dec, int ran) {
  return measured_s + (l_dec - 1 - ran) * steady_ms * 1e-3;
}

}  // namespace argen::bench
