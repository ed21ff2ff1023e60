// Steady-state decoding allocates nothing: after the first decode step has
// sized every buffer, further Step() calls make no C++ heap allocation
// (global operator new is counted in this test binary).
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "engine/model/create_engine.h"
#include "gtest/gtest.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace argen::model {
namespace {

TEST(DecodeAllocationTest, SteadyStateStepsDoNotAllocate) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  engine::EngineOptions options;
  options.model_dir = std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-gqa-sharded";
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(options);
  ASSERT_TRUE(e.ok()) << e.status();
  engine::Engine& engine = **e;
  for (const char* prompt : {"a red cube", "a long caption about two birds on a wire"}) {
    engine::GenerationRequest r;
    r.prompt = prompt;
    r.num_images = 2;
    r.sampling.top_k = 10;
    r.sampling.top_p = 0.9f;
    r.policy.kind = sparse::PolicyKind::kDiagonal;
    r.policy.sparsity = 0.5;
    absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(r);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(engine.Add(*p).ok());
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.Step().ok());  // prefill, then buffers grow
  g_allocations = 0;
  g_counting = true;
  bool ok = true;
  for (int i = 0; i < 40; ++i) ok = ok && engine.Step().ok();
  g_counting = false;
  EXPECT_TRUE(ok);
  EXPECT_EQ(g_allocations.load(), 0);
}

}  // namespace
}  // namespace argen::model
