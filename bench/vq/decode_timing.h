// What the VQ decode benchmarks (vq_decode_bench.cc, emu3vq_decode_bench.cc)
// share: their flag readers, the timing loop (a warm-up call, then one call a
// run on the same random codes, wall and process CPU seconds) and the
// closing table of medians against a baseline row of the same batch.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace argen::bench {

inline int IntFlag(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

inline std::string StrFlag(int argc, char** argv, const char* flag, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return fallback;
}

inline std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(',', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// CPU seconds of all threads of the process: with one thread, a contention-free
// measure of the work on a shared machine.
inline double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct DecodeRow {
  std::string label;  // the backend and precision, e.g. cuda-bf16
  int batch = 0;
  double median_s = 0, min_s = 0;
};

// Per batch: `decode(batch)` once to warm up, then `runs` times, printing
// "LABEL run R: batch B in S s (ms/image, CPU s/image)" each; appends the
// batch's row. `decode` makes or reuses the batch's random codes itself (the
// time of one call is what a caller waits: upload, network, conversion and
// download). false (the error printed) when a call fails.
inline bool TimeDecodes(const std::string& label, const std::function<absl::Status(int batch)>& decode,
                        const std::vector<int>& batches, int runs, std::vector<DecodeRow>* rows) {
  for (int batch : batches) {
    if (absl::Status s = decode(batch); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", label.c_str(), std::string(s.message()).c_str());
      return false;
    }
    std::vector<double> secs;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double cpu0 = ProcessCpuSeconds();
      const absl::Status s = decode(batch);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = ProcessCpuSeconds() - cpu0;
      if (!s.ok()) {
        std::fprintf(stderr, "%s: %s\n", label.c_str(), std::string(s.message()).c_str());
        return false;
      }
      std::printf("%s run %d: batch %d in %.4f s (%.3f ms/image, %.3f CPU s/image)\n", label.c_str(), r, batch, sec,
                  1e3 * sec / batch, cpu / batch);
      secs.push_back(sec);
    }
    rows->push_back({label, batch, Median(secs), *std::min_element(secs.begin(), secs.end())});
    std::fflush(stdout);
  }
  return true;
}

// The closing table: per row its median, images/s, ms/image and, where
// `baseline_of` names a row of the same batch, that row's median over this one.
inline void PrintDecodeTable(const char* label_title, const std::vector<DecodeRow>& rows,
                             const std::function<const DecodeRow*(const DecodeRow&)>& baseline_of) {
  std::printf("\n%-10s %6s %12s %12s %12s %10s\n", label_title, "batch", "median s", "images/s", "ms/image",
              "vs first");
  for (const DecodeRow& r : rows) {
    std::printf("%-10s %6d %12.4f %12.2f %12.3f", r.label.c_str(), r.batch, r.median_s, r.batch / r.median_s,
                1e3 * r.median_s / r.batch);
    if (const DecodeRow* base = baseline_of(r)) std::printf(" %9.2fx", base->median_s / r.median_s);
    std::printf("\n");
  }
}

}  // namespace argen::bench
