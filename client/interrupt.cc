#include "client/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

namespace argen::client {
namespace {

std::atomic<bool> g_interrupted{false};
std::mutex g_mu;  // guards g_contexts
std::set<grpc::ClientContext*>* g_contexts =
    new std::set<grpc::ClientContext*>;  // never destroyed: the signal thread may outlive main's statics

void CancelAll() {
  g_interrupted.store(true);
  std::lock_guard<std::mutex> lock(g_mu);
  for (grpc::ClientContext* c : *g_contexts) c->TryCancel();
}

}  // namespace

void InstallInterruptHandler() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // Inherited by every thread started later (gRPC's, the command's).
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (int seen = 0;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (++seen > 1) {
        static const char kMsg[] = "argen_client: interrupted again; exiting now\n";
        (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
        _exit(kInterruptedExitCode);
      }
      static const char kMsg[] = "\nargen_client: interrupted; cancelling (Ctrl-C again to exit now)\n";
      (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
      CancelAll();
    }
  }).detach();
}

bool InterruptRequested() { return g_interrupted.load(); }

CancelOnInterrupt::CancelOnInterrupt(grpc::ClientContext& context) : context_(context) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_contexts->insert(&context_);
  if (g_interrupted.load()) context_.TryCancel();
}

CancelOnInterrupt::~CancelOnInterrupt() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_contexts->erase(&context_);
}

void RequestInterruptForTesting() { CancelAll(); }

void ResetInterruptForTesting() { g_interrupted.store(false); }

}  // namespace argen::client
