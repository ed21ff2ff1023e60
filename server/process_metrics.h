// The standard process_* metrics (as the Go and Python Prometheus clients
// export them), which prometheus-cpp does not provide: CPU time, resident
// and virtual memory, open and maximum file descriptors, start time. Read
// from /proc/self at Update() (the server calls it before each scrape).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace argen::server {

struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // Unix time
  double open_fds = 0;
  double max_fds = 0;  // RLIMIT_NOFILE soft limit
};

// This process's figures; an error names the /proc file it could not read.
absl::StatusOr<ProcessStats> ReadProcessStats();

class ProcessMetrics {
 public:
  explicit ProcessMetrics(prometheus::Registry& registry);
  // Thread-safe. On a read error the previous values stay.
  void Update();

 private:
  absl::Mutex mu_;
  double cpu_reported_ ABSL_GUARDED_BY(mu_) = 0;
  prometheus::Counter& cpu_;
  prometheus::Gauge& resident_;
  prometheus::Gauge& virtual_;
  prometheus::Gauge& start_time_;
  prometheus::Gauge& open_fds_;
  prometheus::Gauge& max_fds_;
};

}  // namespace argen::server
