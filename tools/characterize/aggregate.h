// Aggregates per-prompt HeadStats of every (layer, head) and writes the CSVs
// of argen_characterize: mass.csv, similarity.csv, locality.csv.
// Averages: per head over prompts (each prompt's per-query mean counts once);
// per layer and overall over heads. Similarities are pair-weighted means over
// prompts (Fig. 10 averages over all layers, heads and queries).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/characterize/attention_stats.h"

namespace argen::characterize {

struct HeadSummary {
  double prompt = 0, local = 0, middle = 0;  // mean attention mass
  double locality = 0, decode_locality = 0;  // mean s over prompts (NaN-skipping)
  int32_t prompts = 0, locality_n = 0, decode_locality_n = 0;
  std::vector<double> vertical_sum, diagonal_sum;  // pair-weighted sums per d
  std::vector<int64_t> pairs;
};

class Aggregate {
 public:
  Aggregate(int32_t layers, int32_t heads, int32_t max_distance, double semantic_threshold = 0.45);

  // Adds one prompt's statistics of (layer, head).
  void Add(int32_t layer, int32_t head, const HeadStats& stats);

  const HeadSummary& head(int32_t layer, int32_t head) const { return heads_[layer * n_heads_ + head]; }
  // Means over the heads of one layer (layer >= 0) or of all layers (-1).
  double MeanMass(int32_t layer, int which /*0 prompt, 1 local, 2 middle*/) const;
  // Pair-weighted similarity at distance d over one layer or all (-1).
  SimilarityAt Similarity(int32_t layer, int32_t d) const;

  // mass.csv: scope,layer,head,prompt,local,middle (scope head|layer|all).
  absl::Status WriteMassCsv(const std::string& path) const;
  // similarity.csv: scope,layer,d,vertical,diagonal,pairs (scope layer|all).
  absl::Status WriteSimilarityCsv(const std::string& path) const;
  // locality.csv: layer,head,s,s_decode,type; type from s: "local" when
  // s < threshold (spatial-local head), else "semantic" (ssd-notes' tau).
  absl::Status WriteLocalityCsv(const std::string& path) const;

 private:
  int32_t n_layers_, n_heads_, max_distance_;
  double threshold_;
  std::vector<HeadSummary> heads_;
};

}  // namespace argen::characterize
