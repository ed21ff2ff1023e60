// Stepping a row's policy state back (speculative decoding's rewinding,
// engine/model/step_plan.h): drops decode indices >= t, as if never written,
// so the next in-order step may feed t again. Defined for dense (a slot per
// index and no per-step state beyond the written set); the others keep a
// ring or scores that cannot step back.
#pragma once

#include <cstdint>

#include "kernels/sparse/policy.h"

namespace argen::sparse {

// Whether a row of this policy may rewind: dense.
ARGEN_SPARSE_HD bool PlansRewind(const ResolvedPolicy& p) {
  return p.kind == PolicyKind::kDense && p.n_slots >= p.l_dec;
}

// Returns false (state unchanged) for another policy or t outside [0, the next step].
ARGEN_SPARSE_HD bool RewindTo(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t) {
  if (!PlansRewind(p) || t < 0 || t > s.ints[kStateNextStep]) return false;
  int32_t* slot_pos = s.ints + l.off_slot_pos;
  for (int32_t i = t; i < p.l_dec; ++i) slot_pos[i] = -1;
  s.ints[kStateNextStep] = t;
  return true;
}

}  // namespace argen::sparse
