// First-fit allocator of [offset, offset + size) ranges inside a fixed pool
// (bytes), with coalescing on free. Host bookkeeping only: the KV manager
// (engine/kv/kv_manager.h) carves a device's one pool allocation with it.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::kv {

class RangeAllocator {
 public:
  explicit RangeAllocator(int64_t capacity = 0);
  // ResourceExhausted (naming `what`) when no free range is large enough.
  absl::StatusOr<int64_t> Allocate(int64_t size, const char* what);
  // Whether `count` Allocate(size) calls in a row would all succeed now.
  // Exact: first fit carves equal sizes from the front of each free range in
  // turn, so a range of L holds floor(L / size) of them.
  bool CanAllocate(int64_t size, int64_t count) const;
  // Whether Allocate(sizes[0]), Allocate(sizes[1]), ... in that order would
  // all succeed now (first fit replayed on a copy of the free ranges).
  bool CanAllocateSequence(const std::vector<int64_t>& sizes) const;
  void Free(int64_t offset);  // unknown offsets are ignored
  int64_t capacity() const { return capacity_; }
  int64_t in_use() const { return in_use_; }

 private:
  int64_t capacity_;
  int64_t in_use_ = 0;
  std::map<int64_t, int64_t> free_;  // offset -> size
  std::map<int64_t, int64_t> used_;  // offset -> size
};

}  // namespace argen::kv
