#include "engine/kv/range_allocator.h"

#include "absl/strings/str_cat.h"

namespace argen::kv {

RangeAllocator::RangeAllocator(int64_t capacity) : capacity_(capacity) {
  if (capacity > 0) free_[0] = capacity;
}

absl::StatusOr<int64_t> RangeAllocator::Allocate(int64_t size, const char* what) {
  if (size <= 0) size = 1;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const int64_t offset = it->first, rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_[offset + size] = rest;
    used_[offset] = size;
    in_use_ += size;
    return offset;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": no free range of ", size, " in a pool of ", capacity_, " (", in_use_, " in use)"));
}

bool RangeAllocator::CanAllocate(int64_t size, int64_t count) const {
  if (size <= 0) size = 1;
  int64_t fits = 0;
  for (const auto& [offset, length] : free_) {
    fits += length / size;
    if (fits >= count) return true;
  }
  return fits >= count;
}

bool RangeAllocator::CanAllocateSequence(const std::vector<int64_t>& sizes) const {
  std::map<int64_t, int64_t> free = free_;
  for (int64_t size : sizes) {
    if (size <= 0) size = 1;
    auto it = free.begin();
    while (it != free.end() && it->second < size) ++it;
    if (it == free.end()) return false;
    const int64_t offset = it->first, length = it->second;
    free.erase(it);
    if (length > size) free.emplace(offset + size, length - size);
  }
  return true;
}

void RangeAllocator::Free(int64_t offset) {
  auto u = used_.find(offset);
  if (u == used_.end()) return;
  int64_t start = offset, size = u->second;
  in_use_ -= size;
  used_.erase(u);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

}  // namespace argen::kv
