// Straightforward reference implementations of every policy, in decode
// position space with std containers, written from the policy definitions
// (docs/policies.md, Algorithm 1 of the paper) and independent of policy.h's
// slot/lag representation. The grid policies are written as sets of grid
// cells (row, column) chosen nearest-first, ssd and line_evict as a
// position -> score map.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "kernels/sparse/policy_types.h"

namespace argen::sparse::test_util {

class ReferencePolicy {
 public:
  // semantic: ssd's class of the head this reference follows.
  explicit ReferencePolicy(const ResolvedPolicy& p, bool semantic = false) : p_(p), semantic_(semantic) {}

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
      case PolicyKind::kGridWindow:
        att = GridWindowPlan(t);
        break;
      case PolicyKind::kDiagonalGrid:
        att = DiagonalGridPlan(t);
        break;
      case PolicyKind::kSsd:
        att = semantic_ ? SsdSemanticPlan(t) : Recent(t, p_.n_recent);
        break;
      case PolicyKind::kLineEvict:
        att = LineEvictPlan(t);
        break;
    }
    last_ = att;
    return att;
  }

  // probs[i]: weight of the i-th attended position returned by Plan(t).
  void Observe(int32_t t, const std::vector<float>& probs) {
    switch (p_.kind) {
      case PolicyKind::kH2O:
      case PolicyKind::kLineEvict:
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
      case PolicyKind::kDiagonalGrid:
        DiagonalGridObserve(t, probs);
        break;
      case PolicyKind::kSsd:
        if (semantic_) {
          for (size_t i = 0; i < last_.size(); ++i) score_[last_[i]] += probs[i];
        }
        break;
      default:
        break;
    }
  }

 private:
  // The sinks and the last `window` positions after them.
  std::vector<int32_t> Recent(int32_t t, int32_t window) const {
    std::vector<int32_t> att;
    for (int32_t i = 0; i <= t; ++i) {
      if (i < p_.n_sink || (i > t - window && i >= p_.n_sink)) att.push_back(i);
    }
    return att;
  }

  // Columns of [0, width) nearest `c`, nearest first (left before right on
  // ties), at most n of them.
  std::vector<int32_t> NearestColumns(int32_t c, int32_t n) const {
    std::vector<int32_t> cols;
    for (int32_t d = 0; static_cast<int32_t>(cols.size()) < n && d < c + p_.grid_width + 1; ++d) {
      for (int32_t col : {c - d, c + d}) {
        if (col >= 0 && col < p_.grid_width && static_cast<int32_t>(cols.size()) < n &&
            std::find(cols.begin(), cols.end(), col) == cols.end()) {
          cols.push_back(col);
        }
      }
    }
    return cols;
  }

  // grid_window: the run of the target's row, then in each row above the
  // grid_band columns nearest the target's column (the row right above also
  // gets as many more as the run is short of grid_run), the last one cut to
  // the budget (nearest columns kept). Falls back to the recent window if a
  // cell is outside the image or inside the sinks, or in the first N_att steps.
  std::vector<int32_t> GridWindowPlan(int32_t t) const {
    const int32_t period = p_.grid_period, g = t + 1, row = g / period, col = g % period;
    const int32_t budget = p_.n_att - p_.n_sink;
    std::set<int32_t> cells;
    int32_t left = budget, run = 0;
    bool inside = true;
    for (int32_t j = 1; j <= p_.grid_run && j <= col && left > 0; ++j, --left, ++run) {
      if (g - j < p_.n_sink) inside = false;
      cells.insert(g - j);
    }
    for (int32_t k = 1; left > 0; ++k) {
      const int32_t width = k == 1 ? p_.grid_band + p_.grid_run - run : p_.grid_band;
      const std::vector<int32_t> cols = NearestColumns(col, std::min(left, width));
      for (int32_t c : cols) {
        const int32_t pos = (row - k) * period + c;
        if (row - k < 0 || pos < p_.n_sink) inside = false;
        cells.insert(pos);
      }
      left -= static_cast<int32_t>(cols.size());
    }
    if (!inside || t + 1 <= p_.n_att) return Recent(t, budget);
    std::vector<int32_t> att;
    for (int32_t i = 0; i < p_.n_sink; ++i) att.push_back(i);
    att.insert(att.end(), cells.begin(), cells.end());
    return att;
  }

  // diagonal_grid's neighbourhood as lags (t - position), nearest first: the
  // run, then per row above the band offsets 0, +1, -1, +2, ... (unclamped).
  std::vector<int32_t> GridLags(int32_t n) const {
    std::vector<int32_t> lags;
    for (int32_t i = 0; i < p_.grid_run && static_cast<int32_t>(lags.size()) < n; ++i) lags.push_back(i);
    const int32_t left = p_.grid_band / 2, right = p_.grid_band - 1 - left;
    for (int32_t k = 1; static_cast<int32_t>(lags.size()) < n; ++k) {
      for (int32_t d = 0; d <= left && static_cast<int32_t>(lags.size()) < n; ++d) {
        lags.push_back(k * p_.grid_period - 1 + d);  // key d columns left of the target
        if (d >= 1 && d <= right && static_cast<int32_t>(lags.size()) < n) lags.push_back(k * p_.grid_period - 1 - d);
      }
    }
    return lags;
  }

  // diagonal_grid: the recent window until every lag of the initial set
  // (the first N_att' of GridLags) exists, then that set; each selection
  // skips the argmin and brings in the next lag of the window, while the
  // window (N_r' lags) has one that exists at the next step.
  std::vector<int32_t> DiagonalGridPlan(int32_t t) {
    const int32_t sinks = p_.n_sink, budget = p_.n_att - sinks, window = p_.n_recent - sinks;
    const std::vector<int32_t> lambda = GridLags(window);
    select_ = false;
    if (grid_lags_.empty()) {
      const int32_t start = sinks + *std::max_element(lambda.begin(), lambda.begin() + budget);
      if (t < start) return Recent(t, budget);
      grid_lags_.assign(lambda.begin(), lambda.begin() + budget);
    }
    const int32_t next = budget + static_cast<int32_t>(skipped_lags_.size());
    select_ = next < window && lambda[next] <= t + 1 - sinks;
    std::vector<int32_t> att;
    for (int32_t i = 0; i < sinks; ++i) att.push_back(i);
    for (int32_t lag : grid_lags_) att.push_back(t - lag);
    std::sort(att.begin(), att.end());
    return att;
  }
  void DiagonalGridObserve(int32_t t, const std::vector<float>& probs) {
    if (!select_) return;
    int32_t best = -1;  // last_ is ascending: ties -> the oldest key
    for (size_t i = 0; i < last_.size(); ++i) {
      if (last_[i] < p_.n_sink) continue;
      if (best < 0 || probs[i] < probs[best]) best = static_cast<int32_t>(i);
    }
    const int32_t lag = t - last_[best];
    grid_lags_.erase(std::find(grid_lags_.begin(), grid_lags_.end(), lag));
    skipped_lags_.push_back(lag);
    const std::vector<int32_t> lambda = GridLags(p_.n_recent - p_.n_sink);
    grid_lags_.push_back(lambda[p_.n_att - p_.n_sink + skipped_lags_.size() - 1]);
  }

  // ssd, semantic head: keeps M(t) earlier keys (the largest m with
  // 10 (L - 1) m <= t (L - 1 + 2t), at most N_att - 1), evicting the lowest
  // accumulated score, keys outside the grid's edge columns first.
  int32_t SsdKeep(int32_t t) const {
    if (p_.l_dec < 2) return 0;
    const int64_t l1 = p_.l_dec - 1;
    int32_t m = 0;
    while (10 * l1 * (m + 1) <= int64_t{t} * (l1 + 2 * int64_t{t})) ++m;
    return std::min(m, p_.n_att - 1);
  }
  bool Edge(int32_t pos) const {
    const int32_t c = pos % p_.grid_period;
    return c == 0 || c == p_.grid_width - 1;
  }
  std::vector<int32_t> SsdSemanticPlan(int32_t t) {
    while (static_cast<int32_t>(score_.size()) > SsdKeep(t)) {
      int32_t victim = -1;
      for (bool edges : {false, true}) {
        for (const auto& [pos, s] : score_) {  // ascending: ties -> oldest
          if (Edge(pos) != edges) continue;
          if (victim < 0 || s < score_[victim]) victim = pos;
        }
        if (victim >= 0) break;
      }
      score_.erase(victim);
    }
    score_[t] = 0.0f;
    std::vector<int32_t> att;
    for (const auto& [pos, s] : score_) att.push_back(pos);
    return att;
  }

  // line_evict: when the target t + 1 opens a grid line, the cache is cut to
  // the budget less the keys that line will add (its length, or what is left
  // of the image), evicting the key with the least attention from the line
  // just generated among the positions after the sinks and at least n_recent
  // older than t; every score then restarts from zero.
  std::vector<int32_t> LineEvictPlan(int32_t t) {
    if ((t + 1) % p_.grid_period == 0) {
      const int32_t keep = p_.n_att - std::min(p_.grid_period, p_.l_dec - t);
      while (static_cast<int32_t>(score_.size()) > keep) {
        int32_t victim = -1;
        for (const auto& [pos, s] : score_) {  // ascending: ties -> oldest
          if (pos < p_.n_sink || pos > t - p_.n_recent) continue;
          if (victim < 0 || s < score_[victim]) victim = pos;
        }
        score_.erase(victim);
      }
      for (auto& [pos, s] : score_) s = 0.0f;
    }
    score_[t] = 0.0f;
    std::vector<int32_t> att;
    for (const auto& [pos, s] : score_) att.push_back(pos);
    return att;
  }

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
  bool semantic_ = false;
  std::vector<int32_t> grid_lags_;     // diagonal_grid: attended lags (grid phase)
  std::vector<int32_t> skipped_lags_;  // diagonal_grid: skipped lags
  std::map<int32_t, float> score_;     // score policies, line_evict: resident position -> score
  std::vector<int32_t> skip_;          // diagonal: skip_idx (positions after the sinks)
  std::vector<int32_t> last_;
  bool select_ = false;
};

}  // namespace argen::sparse::test_util
