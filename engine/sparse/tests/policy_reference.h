// Straightforward reference implementations of every policy, in decode
// position space with std containers, written from the policy definitions
// (docs/policies.md, Algorithm 1 of the paper) and independent of policy.h's
// slot/lag representation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/sparse/policy_types.h"

namespace argen::sparse::test_util {

class ReferencePolicy {
 public:
  explicit ReferencePolicy(const ResolvedPolicy& p) : p_(p) {}

  // Attended decode positions at step t, ascending.
  std::vector<int32_t> Plan(int32_t t) {
    std::vector<int32_t> att;
    switch (p_.kind) {
      case PolicyKind::kDense:
        for (int32_t i = 0; i <= t; ++i) att.push_back(i);
        break;
      case PolicyKind::kSlidingWindow:
        for (int32_t i = std::max(0, t - p_.n_att + 1); i <= t; ++i) att.push_back(i);
        break;
      case PolicyKind::kStreamingLlm:
        for (int32_t i = 0; i <= t; ++i) {
          if (i < p_.n_sink || i > t - (p_.n_att - p_.n_sink)) att.push_back(i);
        }
        break;
      case PolicyKind::kH2O:
      case PolicyKind::kTova:
      case PolicyKind::kAlisa: {
        if (static_cast<int32_t>(score_.size()) == p_.n_att) {
          const int32_t protect = p_.kind == PolicyKind::kTova ? 1 : p_.n_recent;
          int32_t victim = -1;
          for (const auto& [pos, s] : score_) {  // ascending positions: ties -> oldest
            if (pos > t - protect) continue;
            if (victim < 0 || s < score_[victim]) victim = pos;
          }
          score_.erase(victim);
        }
        score_[t] = 0.0f;
        for (const auto& [pos, s] : score_) att.push_back(pos);
        break;
      }
      case PolicyKind::kDiagonal:
      case PolicyKind::kDiagonalSink4:
        att = DiagonalPlan(t);
        break;
    }
    last_ = att;
    return att;
  }

  // probs[i]: weight of the i-th attended position returned by Plan(t).
  void Observe(int32_t t, const std::vector<float>& probs) {
    switch (p_.kind) {
      case PolicyKind::kH2O:
        for (size_t i = 0; i < last_.size(); ++i) score_[last_[i]] += probs[i];
        break;
      case PolicyKind::kTova:
        for (size_t i = 0; i < last_.size(); ++i) score_[last_[i]] = probs[i];
        break;
      case PolicyKind::kAlisa: {
        const float decay = 1.0f - 1.0f / static_cast<float>(p_.n_recent);
        for (size_t i = 0; i < last_.size(); ++i) score_[last_[i]] = score_[last_[i]] * decay + probs[i];
        break;
      }
      case PolicyKind::kDiagonal:
      case PolicyKind::kDiagonalSink4:
        DiagonalObserve(t, probs);
        break;
      default:
        break;
    }
  }

 private:
  // Algorithm 1 literally, on the positions after the sinks (u = t - n_sink),
  // with N_r' = n_recent - n_sink and N_att' = n_att - n_sink: skip_idx holds
  // positions and shifts by +1 every step of phases 2 and 3.
  std::vector<int32_t> DiagonalPlan(int32_t t) {
    const int32_t s = p_.n_sink, nr = p_.n_recent - s, na = p_.n_att - s;
    std::vector<int32_t> att;
    for (int32_t i = 0; i < std::min(t + 1, s); ++i) att.push_back(i);
    select_ = false;
    if (t < s) return att;
    const int32_t u = t - s;
    std::vector<int32_t> window;
    for (int32_t i = std::max(0, u - nr); i <= u; ++i) window.push_back(i);
    if (u >= nr) window.erase(window.begin());  // phase 3: K[u - N_r] evicted
    if (u < na - 1) {
      // phase 1: full attention over the window
    } else {
      for (int32_t& j : skip_) j += 1;
      if (u < nr && static_cast<int32_t>(skip_.size()) < nr - na) select_ = true;
    }
    for (int32_t i : window) {
      if (std::find(skip_.begin(), skip_.end(), i) == skip_.end()) att.push_back(i + s);
    }
    return att;
  }
  void DiagonalObserve(int32_t t, const std::vector<float>& probs) {
    if (!select_) return;
    const int32_t s = p_.n_sink;
    int32_t best = -1;
    for (size_t i = 0; i < last_.size(); ++i) {
      if (last_[i] < s) continue;
      if (best < 0 || probs[i] < probs[best]) best = static_cast<int32_t>(i);
    }
    skip_.push_back(last_[best] - s);
  }

  ResolvedPolicy p_;
  std::map<int32_t, float> score_;  // score policies: resident position -> score
  std::vector<int32_t> skip_;       // diagonal: skip_idx (positions after the sinks)
  std::vector<int32_t> last_;
  bool select_ = false;
};

}  // namespace argen::sparse::test_util
