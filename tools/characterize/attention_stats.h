// Section 3 statistics of one attention head's decode-phase attention map,
// accumulated one query at a time (no full map kept):
//  * attention mass on prompt / local / middle keys (Fig. 8): local = the most
//    recent ceil(local_fraction x (t + 1)) decoded keys of query t (itself
//    included), middle = the other decoded keys;
//  * vertical vs diagonal cosine similarity of attention-score vectors at query
//    distance d (Fig. 10): with v_t the score vector of query t,
//      vertical(d) = cos(v_i[0..i], v_{i+d}[0..i]),
//      diagonal(d) = cos(v_i[0..i], v_{i+d}[d..i+d]),
//    averaged over all queries i with i + d < T (a zero vector against a
//    non-zero one counts as cosine 0; pairs where both are zero are skipped);
//  * locality score s (ssd-notes): the mean over queries of the fraction of
//    attention on keys before the query that lies further than `window`
//    positions back: sum_{k <= q-1-w} a(k) / sum_{k <= q-1} a(k).
// Key indexing for the similarities and s: `KeySpace::kDecode` uses decode
// positions only (v_t = weights of decode keys 0..t), `kSequence` the whole
// sequence (prompt keys first, query index L_p + t).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace argen::characterize {

enum class KeySpace { kDecode, kSequence };

struct StatsOptions {
  int32_t prompt_len = 0;
  int32_t max_queries = 0;    // decode queries expected (L_dec); bounds memory
  int32_t max_distance = 32;  // largest query distance d for the similarities
  double local_fraction = 0.1;
  int32_t locality_window = 32;  // w of the locality score
  KeySpace similarity_keys = KeySpace::kDecode;
};

struct MassSummary {
  double prompt = 0, local = 0, middle = 0;  // means over queries; sum to ~1
  int64_t queries = 0;
};

// Mean of cosines at one distance (count = number of query pairs).
struct SimilarityAt {
  double vertical = 0, diagonal = 0;
  int64_t pairs = 0;
};

class HeadStats {
 public:
  explicit HeadStats(const StatsOptions& options);

  // Adds query t = queries(): `probs` holds the weights over prompt keys
  // (prompt_len of them) then decode keys 0..t (t + 1), i.e. prompt_len + t + 1
  // values. Keys a sparse policy did not attend are 0.
  absl::Status AddQuery(std::span<const float> probs);

  int32_t queries() const { return queries_; }
  MassSummary Mass() const;
  // d in 1..max_distance.
  SimilarityAt Similarity(int32_t d) const;
  // Locality score over the whole sequence (the notes' formula) and over
  // decode keys only (prompt excluded). NaN when no query qualifies.
  double LocalityScore() const;
  double DecodeLocalityScore() const;

 private:
  std::span<const float> Row(int32_t t) const;  // stored row of query t

  StatsOptions o_;
  int32_t queries_ = 0;
  int32_t row_len_ = 0;
  std::vector<float> ring_;  // (max_distance + 1) rows of prompt_len + max_queries
  double mass_prompt_ = 0, mass_local_ = 0, mass_middle_ = 0;
  std::vector<double> vertical_sum_, diagonal_sum_;
  std::vector<int64_t> pairs_;
  double locality_sum_ = 0, decode_locality_sum_ = 0;
  int64_t locality_n_ = 0, decode_locality_n_ = 0;
};

}  // namespace argen::characterize
