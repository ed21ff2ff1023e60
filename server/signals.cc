#include "server/signals.h"

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace argen::server {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void BlockStopSignalsAtLoad(int, char**, char**) {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal() {
  const sigset_t set = StopSignals();
  int signal_number = 0;
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

const char* StopSignalName(int signal_number) {
  if (signal_number == SIGTERM) return "SIGTERM";
  if (signal_number == SIGINT) return "SIGINT";
  return "signal";
}

RepeatedStopSignalWatcher::RepeatedStopSignalWatcher(std::function<void(int)> on_signal) {
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    const sigset_t set = StopSignals();
    const timespec poll = {0, 100 * 1000 * 1000};
    while (!stop_.load(std::memory_order_acquire)) {
      const int signal_number = sigtimedwait(&set, nullptr, &poll);
      if (signal_number > 0) on_signal(signal_number);
    }
  });
}

RepeatedStopSignalWatcher::~RepeatedStopSignalWatcher() {
  stop_.store(true, std::memory_order_release);
  thread_.join();
}

bool AllThreadsBlockStopSignals() {
  // SigBlk is a hex mask with bit (n - 1) set for blocked signal n.
  const unsigned long long want = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
  std::error_code ec;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream status(task.path() / "status");
    std::string line;
    bool seen = false;
    while (std::getline(status, line)) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      seen = true;
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      if ((mask & want) != want) return false;
    }
    if (seen) ++threads;  // a thread that exited meanwhile has no status
  }
  return !ec && threads > 0;
}

}  // namespace argen::server
