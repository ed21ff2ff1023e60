// Stop signals of argen_server (SIGTERM, SIGINT).
//
// Every thread blocks them, so the kernel can only hand them to the one
// thread that waits for them (sigwait): never to a thread whose default
// action would kill the process mid-drain. Threads inherit the mask of the
// thread that starts them, so the mask has to be set before any thread
// exists: argen_server's main.cc registers BlockStopSignalsAtLoad in the
// executable's .preinit_array, which the dynamic loader runs before any
// shared library's constructor (OpenBLAS starts its thread pool in one,
// before main()).
//
// Behaviour (docs/operations.md): the first signal starts the drain; any
// further SIGTERM/SIGINT while draining is logged and ignored; the drain
// still ends within drain_timeout_s and the process exits 0.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace argen::server {

// {SIGTERM, SIGINT}.
sigset_t StopSignals();

// Blocks the stop signals in the calling thread (and so in every thread it
// starts later). Async-signal-safe; the .preinit_array signature.
void BlockStopSignalsAtLoad(int argc, char** argv, char** envp);

// Waits for the next stop signal (they must be blocked); returns its number.
int WaitForStopSignal();

// "SIGTERM", "SIGINT" or "signal <n>".
const char* StopSignalName(int signal_number);

// While alive, takes every further stop signal and passes it to `on_signal`
// (on its own thread), so that a repeated signal during the drain is
// reported instead of staying pending.
class RepeatedStopSignalWatcher {
 public:
  explicit RepeatedStopSignalWatcher(std::function<void(int)> on_signal);
  ~RepeatedStopSignalWatcher();
  RepeatedStopSignalWatcher(const RepeatedStopSignalWatcher&) = delete;
  RepeatedStopSignalWatcher& operator=(const RepeatedStopSignalWatcher&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// True when every thread of this process blocks both stop signals (reads
// /proc/self/task/*/status; the calling thread must not be inside sigwait).
// For tests and a startup self-check.
bool AllThreadsBlockStopSignals();

}  // namespace argen::server
