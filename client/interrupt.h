// Ctrl-C for the client. Install() (from main, before any thread starts)
// blocks SIGINT and SIGTERM in every thread and waits for them on one of its
// own: the first cancels every call in flight (the server frees their rows at
// once; images already written stay, whole, since no write is ever cut short
// by a handler) and commands end with exit code 130; a second one exits at
// once with 130. Without Install() (in-process tests) nothing changes.
#pragma once

#include <mutex>

#include "grpcpp/client_context.h"

namespace argen::client {

inline constexpr int kInterruptedExitCode = 130;  // 128 + SIGINT, as shells report it

void InstallInterruptHandler();

// The CANCELLED message of a call that an interrupt kept from being sent.
inline constexpr char kNotSentMessage[] = "interrupted before the call was sent";

// True once a signal came; calls not yet started are not sent.
bool InterruptRequested();

// Registers a call's context for cancellation on interrupt while in scope.
// A context registered after the interrupt is cancelled at once.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext& context);
  ~CancelOnInterrupt();
  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

 private:
  grpc::ClientContext& context_;
};

// Testing: raises the interrupt as a signal would (cancels registered calls).
void RequestInterruptForTesting();
// Testing: clears it again.
void ResetInterruptForTesting();

}  // namespace argen::client
