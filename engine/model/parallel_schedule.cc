#include "engine/model/parallel_schedule.h"

#include <algorithm>

namespace argen::model {

ParallelSchedule::ParallelSchedule(int32_t l_dec, int32_t period, int32_t window, std::span<const int32_t> forced)
    : l_dec_(l_dec),
      period_(std::max(period, 1)),
      window_(std::max(window, 1)),
      rows_((l_dec + period_ - 1) / period_) {
  known_.assign(l_dec_, 0);
  cursor_.assign(rows_, -1);
  fill_.assign(rows_, -1);
  if (rows_ > 0) cursor_[0] = 0;  // row 0's chain starts with the prefill's token 0
  for (int32_t t = 0; t < l_dec_ && t < static_cast<int32_t>(forced.size()); ++t) {
    if (forced[t] >= 0) Made(t);
  }
}

void ParallelSchedule::Made(int32_t k) {
  known_[k] = 1;
  while (leading_ < l_dec_ && known_[leading_]) ++leading_;
}

int32_t ParallelSchedule::ChainEnd(int32_t r) const { return std::min((r + 1) * period_ - 2, l_dec_ - 2); }

int32_t ParallelSchedule::RowKnown(int32_t r) const {
  int32_t c = 0;
  while (c < period_ && r * period_ + c < l_dec_ && known_[r * period_ + c]) ++c;
  return c;
}

int32_t ParallelSchedule::rows_in_flight() const {
  int32_t n = 0;
  for (int32_t r = 0; r < rows_; ++r) n += cursor_[r] >= 0 && cursor_[r] <= ChainEnd(r) ? 1 : 0;
  return n;
}

void ParallelSchedule::StartRows() {
  for (int32_t r = 0; r + 1 < rows_; ++r) {
    if (cursor_[r] < 0 || cursor_[r + 1] >= 0) continue;
    const int32_t row_len = std::min(period_, l_dec_ - r * period_);
    if (RowKnown(r) < std::min(window_, row_len)) continue;
    const int32_t start = ChainStart(r + 1);
    // Its first input is row r's last token: known (forced, or row r is
    // complete), or stood in for by row r - 1's newest token; row 1 waits.
    if (known(start) || r >= 1) cursor_[r + 1] = start;
  }
}

const std::vector<ParallelSchedule::Query>& ParallelSchedule::Next() {
  if (planned_) return next_;
  planned_ = true;
  next_.clear();
  if (done()) return next_;
  StartRows();
  const auto records = [&](int32_t q) { return q + 1 < l_dec_ && !known(q + 1); };
  for (int32_t r = 0; r < rows_; ++r) {
    // The fill sits between row r - 1's chain and row r's cursor: increasing order.
    if (fill_[r] >= 0 && known(fill_[r])) next_.push_back({fill_[r], fill_[r], false, records(fill_[r]), r});
    const int32_t q = cursor_[r];
    if (q < 0 || q > ChainEnd(r)) continue;
    if (known(q)) {
      next_.push_back({q, q, false, records(q), r});
    } else {
      // Row r's first query (StartRows started it with r >= 2): row r - 2's newest token stands in.
      const int32_t stand_in = (r - 2) * period_ + RowKnown(r - 2) - 1;
      next_.push_back({q, stand_in, true, records(q), r});
    }
  }
  return next_;
}

void ParallelSchedule::Commit() {
  for (const Query& q : next_) {
    if (q.records) Made(q.index + 1);
    if (q.provisional) {
      fill_[q.image_row] = q.index;
      ++cursor_[q.image_row];
    } else if (q.index == fill_[q.image_row]) {
      fill_[q.image_row] = -1;
    } else {
      ++cursor_[q.image_row];
    }
  }
  next_.clear();
  planned_ = false;
}

}  // namespace argen::model
