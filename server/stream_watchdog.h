// Bounds how long a Generate stream may sit in a blocked write.
//
// The synchronous gRPC API blocks ServerWriter::Write while the client's
// HTTP/2 window is full, i.e. while the client does not read. Without a
// bound, a client that stops reading would hold its stream thread and the
// events buffered for it forever. Every write of a stream goes through
// Write(); one watchdog thread cancels (ServerContext::TryCancel) any call
// whose write has not completed within stream_stall_timeout_s, which makes
// the write return false so the stream's thread and memory are freed. The
// decode loop never waits on a stream (events are queued per request), so a
// stalled client delays nobody else.
#pragma once

#include <functional>
#include <list>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace argen::server {

class StreamWatchdog {
 public:
  explicit StreamWatchdog(absl::Duration stall_timeout);
  ~StreamWatchdog();
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  // Runs `write` (one blocking write on `context`'s stream) and returns its
  // result. When the write has not returned within the stall timeout, the
  // call is cancelled; `*stalled` is then set (and the write returns false).
  bool Write(grpc::ServerContext* context, const std::function<bool()>& write, bool* stalled);

  absl::Duration stall_timeout() const { return stall_timeout_; }

 private:
  struct PendingWrite {
    grpc::ServerContext* context;
    absl::Time started;
    bool stalled = false;
  };
  void Loop();

  const absl::Duration stall_timeout_;
  absl::Mutex mu_;
  std::list<PendingWrite> pending_ ABSL_GUARDED_BY(mu_);  // stable iterators
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace argen::server
