// Percentiles of measured latencies (nearest-rank on the sorted sample).
#pragma once

#include <vector>

namespace argen::client {

// q in [0, 1]; 0 for an empty sample. Nearest rank: the smallest value with
// at least q of the sample at or below it.
double Percentile(std::vector<double> values, double q);

// Arithmetic mean; 0 for an empty sample.
double Mean(const std::vector<double>& values);

}  // namespace argen::client
