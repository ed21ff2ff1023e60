#include "tools/characterize/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace argen::characterize {
namespace {

// Cosine of a[0..n) and b[0..n). One zero vector: 0 (no shared weight, as
// torch.cosine_similarity's eps gives); both zero: NaN (the pair is skipped).
double Cosine(const float* a, const float* b, int32_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int32_t k = 0; k < n; ++k) {
    ab += static_cast<double>(a[k]) * b[k];
    aa += static_cast<double>(a[k]) * a[k];
    bb += static_cast<double>(b[k]) * b[k];
  }
  if (aa <= 0 && bb <= 0) return std::numeric_limits<double>::quiet_NaN();
  if (aa <= 0 || bb <= 0) return 0.0;
  return ab / std::sqrt(aa * bb);
}

// Fraction of the mass of keys [0, q) that lies on keys [0, q - w); NaN if
// keys [0, q) carry no mass.
double FarFraction(const float* a, int32_t q, int32_t w) {
  double total = 0, far = 0;
  for (int32_t k = 0; k < q; ++k) {
    total += a[k];
    if (k <= q - 1 - w) far += a[k];
  }
  return total > 0 ? far / total : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

HeadStats::HeadStats(const StatsOptions& options) : o_(options) {
  row_len_ = o_.prompt_len + o_.max_queries;
  ring_.assign(static_cast<size_t>(o_.max_distance + 1) * row_len_, 0.0f);
  vertical_sum_.assign(o_.max_distance + 1, 0.0);
  diagonal_sum_.assign(o_.max_distance + 1, 0.0);
  pairs_.assign(o_.max_distance + 1, 0);
}

std::span<const float> HeadStats::Row(int32_t t) const {
  return {ring_.data() + static_cast<size_t>(t % (o_.max_distance + 1)) * row_len_, static_cast<size_t>(row_len_)};
}

absl::Status HeadStats::AddQuery(std::span<const float> probs) {
  const int32_t t = queries_;
  if (t >= o_.max_queries) {
    return absl::OutOfRangeError(absl::StrCat("attention stats: query ", t, " beyond max_queries ", o_.max_queries));
  }
  const int32_t n = o_.prompt_len + t + 1;
  if (static_cast<int32_t>(probs.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("attention stats: query ", t, " has ", probs.size(),
                                                   " weights, expected prompt_len + t + 1 = ", n));
  }
  float* row = ring_.data() + static_cast<size_t>(t % (o_.max_distance + 1)) * row_len_;
  std::memcpy(row, probs.data(), sizeof(float) * n);
  std::fill(row + n, row + row_len_, 0.0f);

  // Mass on prompt / local / middle.
  const int32_t lp = o_.prompt_len;
  const int32_t n_local = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(o_.local_fraction * (t + 1) - 1e-9)));
  double prompt = 0, local = 0, middle = 0;
  for (int32_t k = 0; k < lp; ++k) prompt += row[k];
  for (int32_t k = 0; k <= t; ++k) (k > t - n_local ? local : middle) += row[lp + k];
  mass_prompt_ += prompt;
  mass_local_ += local;
  mass_middle_ += middle;

  // Similarities against the earlier queries i = t - d.
  const bool decode = o_.similarity_keys == KeySpace::kDecode;
  const int32_t origin = decode ? lp : 0;  // index of key 0 in a stored row
  for (int32_t d = 1; d <= o_.max_distance && d <= t; ++d) {
    const float* earlier = Row(t - d).data() + origin;
    const float* later = row + origin;
    const int32_t len = (decode ? 0 : lp) + (t - d) + 1;  // keys 0..i of the earlier query
    const double v = Cosine(earlier, later, len);
    const double g = Cosine(earlier, later + d, len);
    if (std::isnan(v) || std::isnan(g)) continue;
    vertical_sum_[d] += v;
    diagonal_sum_[d] += g;
    pairs_[d] += 1;
  }

  // Locality: keys strictly before the query.
  const double s = FarFraction(row, lp + t, o_.locality_window);
  if (!std::isnan(s)) {
    locality_sum_ += s;
    ++locality_n_;
  }
  const double sd = FarFraction(row + lp, t, o_.locality_window);
  if (!std::isnan(sd)) {
    decode_locality_sum_ += sd;
    ++decode_locality_n_;
  }
  ++queries_;
  return absl::OkStatus();
}

MassSummary HeadStats::Mass() const {
  MassSummary m;
  m.queries = queries_;
  if (queries_ == 0) return m;
  m.prompt = mass_prompt_ / queries_;
  m.local = mass_local_ / queries_;
  m.middle = mass_middle_ / queries_;
  return m;
}

SimilarityAt HeadStats::Similarity(int32_t d) const {
  SimilarityAt s;
  if (d < 1 || d > o_.max_distance || pairs_[d] == 0) {
    s.vertical = s.diagonal = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  s.pairs = pairs_[d];
  s.vertical = vertical_sum_[d] / pairs_[d];
  s.diagonal = diagonal_sum_[d] / pairs_[d];
  return s;
}

double HeadStats::LocalityScore() const {
  return locality_n_ ? locality_sum_ / locality_n_ : std::numeric_limits<double>::quiet_NaN();
}
double HeadStats::DecodeLocalityScore() const {
  return decode_locality_n_ ? decode_locality_sum_ / decode_locality_n_ : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace argen::characterize
