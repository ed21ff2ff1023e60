// RequestHandle's per-stream bound (stream_buffer_bytes) and cancel reasons.
#include <gtest/gtest.h>

#include "scheduler/request_handle.h"

namespace argen::scheduler {
namespace {

ImageEvent Image(size_t bytes) {
  ImageEvent e;
  e.encoded.assign(bytes, 'x');
  return e;
}

TEST(RequestHandleBoundTest, OverflowDropsWhatWaitsAndCancelsWithResourceExhausted) {
  RequestHandle h("r", absl::InfiniteFuture(), /*max_buffered_bytes=*/10000);
  h.Push(QueuedEvent{});
  h.Push(Image(4000));
  h.Push(Image(4000));
  EXPECT_FALSE(h.cancelled());
  EXPECT_GT(h.buffered_bytes(), 8000);
  h.Push(Image(4000));  // over the bound
  ASSERT_TRUE(h.cancelled());
  EXPECT_EQ(h.cancel_reason().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(h.cancel_reason().message().find("stream_buffer_bytes 10000"), std::string::npos) << h.cancel_reason();
  EXPECT_EQ(h.buffered_bytes(), 0);  // freed, not kept for a reader that may never come
  EXPECT_FALSE(h.Next(absl::ZeroDuration()).has_value());
  // The Finished event always gets through, whatever waits.
  h.Push(FinishedEvent{h.cancel_reason(), {}});
  std::optional<RequestEvent> e;
  while ((e = h.Next(absl::ZeroDuration())) && !std::holds_alternative<FinishedEvent>(*e)) {
  }
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(std::get<FinishedEvent>(*e).status.code(), absl::StatusCode::kResourceExhausted);
}

TEST(RequestHandleBoundTest, TakenEventsFreeTheirBytes) {
  RequestHandle h("r", absl::InfiniteFuture(), 10000);
  for (int i = 0; i < 100; ++i) {
    h.Push(Image(4000));
    ASSERT_TRUE(h.Next(absl::ZeroDuration()).has_value());
  }
  EXPECT_FALSE(h.cancelled());  // a reader that keeps up never hits the bound
  EXPECT_EQ(h.buffered_bytes(), 0);
}

TEST(RequestHandleBoundTest, NoBoundByDefaultAndTheFirstCancelReasonWins) {
  RequestHandle h("r", absl::InfiniteFuture());
  for (int i = 0; i < 64; ++i) h.Push(Image(1 << 20));
  EXPECT_FALSE(h.cancelled());
  h.Cancel(absl::DeadlineExceededError("request deadline expired"));
  h.Cancel();
  EXPECT_EQ(h.cancel_reason().code(), absl::StatusCode::kDeadlineExceeded);
  RequestHandle plain("p", absl::InfiniteFuture());
  plain.Cancel();
  EXPECT_EQ(plain.cancel_reason().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace argen::scheduler
