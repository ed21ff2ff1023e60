#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace argen::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

absl::StatusOr<std::string> ReadText(const char* path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Seconds since the epoch at boot: "btime" in /proc/stat.
absl::StatusOr<double> BootTime() {
  absl::StatusOr<std::string> stat = ReadText("/proc/stat");
  if (!stat.ok()) return stat.status();
  std::istringstream lines(*stat);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return absl::UnavailableError("/proc/stat has no btime line");
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats() {
  absl::StatusOr<std::string> stat = ReadText("/proc/self/stat");
  if (!stat.ok()) return stat.status();
  // Fields after the command name, which is in parentheses and may hold spaces.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return absl::UnavailableError("/proc/self/stat: no ')'");
  std::istringstream rest(stat->substr(close + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string x; rest >> x;) f.push_back(x);
  if (f.size() < 22) return absl::UnavailableError("/proc/self/stat: too few fields");
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ProcessStats s;
  // proc(5): utime 14, stime 15, starttime 22 (ticks), vsize 23 (bytes), rss 24 (pages).
  s.cpu_seconds = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / ticks;
  s.virtual_bytes = std::stod(f[23 - 3]);
  s.resident_bytes = std::stod(f[24 - 3]) * page;
  absl::StatusOr<double> boot = BootTime();
  if (!boot.ok()) return boot.status();
  s.start_time_seconds = *boot + std::stod(f[22 - 3]) / ticks;
  if (DIR* dir = opendir("/proc/self/fd")) {
    int n = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(dir);
    s.open_fds = n - 1;  // not the descriptor opendir itself holds
  } else {
    return absl::UnavailableError("cannot list /proc/self/fd");
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) s.max_fds = static_cast<double>(limit.rlim_cur);
  return s;
}

ProcessMetrics::ProcessMetrics(prometheus::Registry& registry)
    : cpu_(BuildCounter()
               .Name("process_cpu_seconds_total")
               .Help("Total user and system CPU time spent in seconds")
               .Register(registry)
               .Add({})),
      resident_(BuildGauge()
                    .Name("process_resident_memory_bytes")
                    .Help("Resident memory size in bytes")
                    .Register(registry)
                    .Add({})),
      virtual_(BuildGauge()
                   .Name("process_virtual_memory_bytes")
                   .Help("Virtual memory size in bytes")
                   .Register(registry)
                   .Add({})),
      start_time_(BuildGauge()
                      .Name("process_start_time_seconds")
                      .Help("Start time of the process since unix epoch in seconds")
                      .Register(registry)
                      .Add({})),
      open_fds_(
          BuildGauge().Name("process_open_fds").Help("Number of open file descriptors").Register(registry).Add({})),
      max_fds_(BuildGauge()
                   .Name("process_max_fds")
                   .Help("Maximum number of open file descriptors")
                   .Register(registry)
                   .Add({})) {
  Update();
}

void ProcessMetrics::Update() {
  absl::StatusOr<ProcessStats> s = ReadProcessStats();
  if (!s.ok()) return;
  absl::MutexLock lock(&mu_);
  // A counter only goes up: add what was used since the last update.
  if (s->cpu_seconds > cpu_reported_) {
    cpu_.Increment(s->cpu_seconds - cpu_reported_);
    cpu_reported_ = s->cpu_seconds;
  }
  resident_.Set(s->resident_bytes);
  virtual_.Set(s->virtual_bytes);
  start_time_.Set(s->start_time_seconds);
  open_fds_.Set(s->open_fds);
  max_fds_.Set(s->max_fds);
}

}  // namespace argen::server
