#include "tools/characterize/aggregate.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace argen::characterize {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path, " for writing"));
  f << text;
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace

Aggregate::Aggregate(int32_t layers, int32_t heads, int32_t max_distance, double semantic_threshold)
    : n_layers_(layers),
      n_heads_(heads),
      max_distance_(max_distance),
      threshold_(semantic_threshold),
      heads_(static_cast<size_t>(layers) * heads) {
  for (HeadSummary& h : heads_) {
    h.vertical_sum.assign(max_distance + 1, 0.0);
    h.diagonal_sum.assign(max_distance + 1, 0.0);
    h.pairs.assign(max_distance + 1, 0);
  }
}

void Aggregate::Add(int32_t layer, int32_t head, const HeadStats& stats) {
  HeadSummary& h = heads_[layer * n_heads_ + head];
  const MassSummary m = stats.Mass();
  if (m.queries > 0) {
    // Running mean over prompts.
    h.prompts += 1;
    h.prompt += (m.prompt - h.prompt) / h.prompts;
    h.local += (m.local - h.local) / h.prompts;
    h.middle += (m.middle - h.middle) / h.prompts;
  }
  const double s = stats.LocalityScore();
  if (!std::isnan(s)) {
    h.locality_n += 1;
    h.locality += (s - h.locality) / h.locality_n;
  }
  const double sd = stats.DecodeLocalityScore();
  if (!std::isnan(sd)) {
    h.decode_locality_n += 1;
    h.decode_locality += (sd - h.decode_locality) / h.decode_locality_n;
  }
  for (int32_t d = 1; d <= max_distance_; ++d) {
    const SimilarityAt sim = stats.Similarity(d);
    if (sim.pairs == 0) continue;
    h.vertical_sum[d] += sim.vertical * sim.pairs;
    h.diagonal_sum[d] += sim.diagonal * sim.pairs;
    h.pairs[d] += sim.pairs;
  }
}

double Aggregate::MeanMass(int32_t layer, int which) const {
  double sum = 0;
  int32_t n = 0;
  for (int32_t l = 0; l < n_layers_; ++l) {
    if (layer >= 0 && l != layer) continue;
    for (int32_t hh = 0; hh < n_heads_; ++hh) {
      const HeadSummary& h = head(l, hh);
      if (h.prompts == 0) continue;
      sum += which == 0 ? h.prompt : which == 1 ? h.local : h.middle;
      ++n;
    }
  }
  return n ? sum / n : kNaN;
}

SimilarityAt Aggregate::Similarity(int32_t layer, int32_t d) const {
  SimilarityAt s;
  double v = 0, g = 0;
  for (int32_t l = 0; l < n_layers_; ++l) {
    if (layer >= 0 && l != layer) continue;
    for (int32_t hh = 0; hh < n_heads_; ++hh) {
      const HeadSummary& h = head(l, hh);
      v += h.vertical_sum[d];
      g += h.diagonal_sum[d];
      s.pairs += h.pairs[d];
    }
  }
  s.vertical = s.pairs ? v / s.pairs : kNaN;
  s.diagonal = s.pairs ? g / s.pairs : kNaN;
  return s;
}

absl::Status Aggregate::WriteMassCsv(const std::string& path) const {
  std::string out = "scope,layer,head,prompt,local,middle\n";
  for (int32_t l = 0; l < n_layers_; ++l) {
    for (int32_t hh = 0; hh < n_heads_; ++hh) {
      const HeadSummary& h = head(l, hh);
      absl::StrAppendFormat(&out, "head,%d,%d,%.6f,%.6f,%.6f\n", l, hh, h.prompt, h.local, h.middle);
    }
  }
  for (int32_t l = 0; l < n_layers_; ++l) {
    absl::StrAppendFormat(&out, "layer,%d,-1,%.6f,%.6f,%.6f\n", l, MeanMass(l, 0), MeanMass(l, 1), MeanMass(l, 2));
  }
  absl::StrAppendFormat(&out, "all,-1,-1,%.6f,%.6f,%.6f\n", MeanMass(-1, 0), MeanMass(-1, 1), MeanMass(-1, 2));
  return WriteFile(path, out);
}

absl::Status Aggregate::WriteSimilarityCsv(const std::string& path) const {
  std::string out = "scope,layer,d,vertical,diagonal,pairs\n";
  for (int32_t l = -1; l < n_layers_; ++l) {
    for (int32_t d = 1; d <= max_distance_; ++d) {
      const SimilarityAt s = Similarity(l, d);
      absl::StrAppendFormat(&out, "%s,%d,%d,%.6f,%.6f,%d\n", l < 0 ? "all" : "layer", l, d, s.vertical, s.diagonal,
                            s.pairs);
    }
  }
  return WriteFile(path, out);
}

absl::Status Aggregate::WriteLocalityCsv(const std::string& path) const {
  std::string out = "layer,head,s,s_decode,type\n";
  for (int32_t l = 0; l < n_layers_; ++l) {
    for (int32_t hh = 0; hh < n_heads_; ++hh) {
      const HeadSummary& h = head(l, hh);
      const double s = h.locality_n ? h.locality : kNaN;
      const double sd = h.decode_locality_n ? h.decode_locality : kNaN;
      const char* type = std::isnan(s) ? "unknown" : s < threshold_ ? "local" : "semantic";
      absl::StrAppendFormat(&out, "%d,%d,%.6f,%.6f,%s\n", l, hh, s, sd, type);
    }
  }
  return WriteFile(path, out);
}

}  // namespace argen::characterize
