// Test harness: runs one (row, layer, kv_head) of a policy step by step and
// tracks, independently of the policy, which decode position each slot holds.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/sparse/policy.h"

namespace argen::sparse::test_util {

class PolicyRun {
 public:
  // head_index: layer * kv_heads + kv_head (ssd's class comes from it).
  explicit PolicyRun(const ResolvedPolicy& p, int32_t head_index = -1)
      : p_(p),
        l_(LayoutFor(p)),
        ints_(l_.ints_per_head),
        floats_(l_.floats_per_head + 1),
        attended_(l_.max_attended),
        shadow_(l_.n_slots, -1) {
    InitState(p_, l_, state(), head_index);
  }

  PolicyState state() { return PolicyState{ints_.data(), floats_.data()}; }
  const PolicyLayout& layout() const { return l_; }

  // Plans step t; returns the attended decode positions (in list order), as
  // recorded by the shadow slot map. Sets evicted to the position overwritten
  // (-1 if the slot was empty).
  std::vector<int32_t> Plan(int32_t t, int32_t* evicted = nullptr) {
    int32_t slot = -1;
    count_ = PlanStep(p_, l_, state(), t, &slot, attended_.data());
    write_slot_ = slot;
    if (count_ < 0) return {};
    if (evicted) *evicted = shadow_[slot];
    shadow_[slot] = t;
    std::vector<int32_t> pos;
    for (int32_t i = 0; i < count_; ++i) pos.push_back(shadow_[attended_[i]]);
    return pos;
  }
  void Observe(int32_t t, const std::vector<float>& probs) {
    ObserveStep(p_, l_, state(), t, attended_.data(), probs.data(), count_);
  }
  int32_t count() const { return count_; }
  int32_t write_slot() const { return write_slot_; }
  const std::vector<int32_t>& attended_slots() const { return attended_; }
  const std::vector<int32_t>& shadow() const { return shadow_; }
  std::vector<int32_t> SkipLags() {
    std::vector<int32_t> lags;
    for (int32_t i = 0; i < SkipCount(state()); ++i) lags.push_back(SkipLag(l_, state(), i));
    return lags;
  }

 private:
  ResolvedPolicy p_;
  PolicyLayout l_;
  std::vector<int32_t> ints_;
  std::vector<float> floats_;
  std::vector<int32_t> attended_;
  std::vector<int32_t> shadow_;
  int32_t count_ = 0;
  int32_t write_slot_ = -1;
};

}  // namespace argen::sparse::test_util
