// The GPU image decoders' weights as one host blob uploaded once: each
// tensor appended at a 256-byte boundary and named by its offset (floats),
// so a decoder's layer tables are plain offsets into one device buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/vq/vq_weights.h"

namespace argen::vq {

// A Conv2d's shape and where its weight and bias sit in the blob.
struct BlobConv {
  int32_t cin = 0, cout = 0, kernel = 0;
  size_t w = 0, b = 0;
};

class WeightBlob {
 public:
  static constexpr size_t kAlignFloats = 64;  // 256 bytes
  // Appends `v`; returns its offset.
  size_t Add(const std::vector<float>& v) {
    const size_t off = data_.size();
    data_.insert(data_.end(), v.begin(), v.end());
    data_.resize((data_.size() + kAlignFloats - 1) / kAlignFloats * kAlignFloats, 0.0f);
    return off;
  }
  BlobConv Conv(const Conv2dWeights& c) { return {c.cin, c.cout, c.kernel, Add(c.weight), Add(c.bias)}; }
  const std::vector<float>& data() const { return data_; }

 private:
  std::vector<float> data_;
};

}  // namespace argen::vq
