#include "engine/cuda/device_weights.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_memory.h"
#include "kernels/fill_kernels.h"

namespace argen::cuda {
namespace {

using model::LinearRef;
using model::NormRef;
using model::TensorFill;
using model::TensorRef;

// Where each tensor goes inside the one allocation, decided before allocating.
class Layout {
 public:
  enum Kind { kBf16, kF32 };
  struct Entry {
    Kind kind;
    int64_t count;
    size_t offset;
    const void** target;
    std::vector<const TensorRef*> parts;  // concatenated along rows (fused q|k|v, gate|up)
    float fill;                           // random weights: the constant of f32 entries
  };
  void Add(Kind kind, const void** target, std::vector<const TensorRef*> parts) {
    int64_t count = 0;
    for (const TensorRef* t : parts) count += t->used_elements();
    const size_t bytes = count * (kind == kBf16 ? 2 : 4);
    const float fill = parts.front()->fill == TensorFill::kOne ? 1.f : 0.f;
    entries_.push_back({kind, count, total_, target, std::move(parts), fill});
    total_ += (bytes + 255) / 256 * 256;
  }
  size_t total() const { return total_; }
  std::vector<Entry>& entries() { return entries_; }

 private:
  size_t total_ = 0;
  std::vector<Entry> entries_;
};

template <typename T>
const void** Slot(const T** p) {
  return reinterpret_cast<const void**>(p);
}

void Norm(Layout& l, const NormRef& n, DeviceNorm& out) {
  l.Add(Layout::kF32, Slot(&out.weight), {&n.weight});
  if (n.bias.present()) l.Add(Layout::kF32, Slot(&out.bias), {&n.bias});
}

void Matrix(Layout& l, const bf16** target, std::vector<const TensorRef*> parts) {
  l.Add(Layout::kBf16, Slot(target), std::move(parts));
}

void Bias(Layout& l, const float** target, const TensorRef& bias) {
  if (bias.present()) l.Add(Layout::kF32, Slot(target), {&bias});
}

// Lists every tensor of the spec (layer order as the first CUDA backend's, so
// random weights of a Janus shape are the same as before).
void Describe(const model::ModelSpec& spec, DeviceWeights& w, Layout& l) {
  w.layers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const model::LayerRefs& r = spec.layers[i];
    DeviceLayer& L = w.layers[i];
    Norm(l, r.input_norm, L.input_norm);
    Matrix(l, &L.qkv, {&r.q.weight, &r.k.weight, &r.v.weight});
    Matrix(l, &L.o, {&r.o.weight});
    if (spec.stack.qk_norm) {
      Norm(l, r.q_norm, L.q_norm);
      Norm(l, r.k_norm, L.k_norm);
    }
    Norm(l, r.post_norm, L.post_norm);
    Matrix(l, &L.gate_up, {&r.gate.weight, &r.up.weight});
    Matrix(l, &L.down, {&r.down.weight});
  }
  Norm(l, spec.output.final_norm, w.final_norm);
  Matrix(l, &w.input_table, {&spec.input.table});
  if (spec.input.fc1.present()) {
    Matrix(l, &w.fc1_w, {&spec.input.fc1.weight});
    Bias(l, &w.fc1_b, spec.input.fc1.bias);
    Matrix(l, &w.fc2_w, {&spec.input.fc2.weight});
    Bias(l, &w.fc2_b, spec.input.fc2.bias);
  }
  if (spec.output.projector.present()) {
    Matrix(l, &w.projector_w, {&spec.output.projector.weight});
    Bias(l, &w.projector_b, spec.output.projector.bias);
  }
  Matrix(l, &w.head_w, {&spec.output.head.weight});
  Bias(l, &w.head_b, spec.output.head.bias);
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

absl::StatusOr<DeviceWeights> UploadWeights(const model::ModelSpec& spec, const model::WeightSource& source) {
  DeviceWeights w;
  Layout layout;
  Describe(spec, w, layout);
  if (absl::Status fits = CheckDeviceMemoryFits(static_cast<int64_t>(layout.total()), "the model's weights (bf16)",
                                                "the model does not fit this device");
      !fits.ok()) {
    return fits;
  }
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  char* base = w.storage.as<char>();
  std::vector<float> host;
  std::vector<uint16_t> staging;
  for (const Layout::Entry& e : layout.entries()) {
    *e.target = base + e.offset;
    host.clear();
    for (const TensorRef* t : e.parts) {
      absl::StatusOr<std::vector<float>> part = source.Load(*t);
      if (!part.ok()) return part.status();
      host.insert(host.end(), part->begin(), part->end());
    }
    if (static_cast<int64_t>(host.size()) != e.count) {
      return absl::InternalError(absl::StrCat("device weights: '", e.parts.front()->name, "' gave ", host.size(),
                                              " elements, expected ", e.count));
    }
    if (e.kind == Layout::kF32) {
      ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset, host.data(), e.count * 4, cudaMemcpyHostToDevice),
                        "upload f32 weight");
    } else {
      staging.resize(e.count);
      for (int64_t i = 0; i < e.count; ++i) staging[i] = ToBf16(host[i]);
      ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset, staging.data(), e.count * 2, cudaMemcpyHostToDevice),
                        "upload bf16 weight");
    }
  }
  return w;
}

absl::StatusOr<DeviceWeights> RandomDeviceWeights(const model::ModelSpec& spec, uint64_t seed, float scale) {
  DeviceWeights w;
  Layout layout;
  Describe(spec, w, layout);
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  char* base = w.storage.as<char>();
  uint64_t stream_id = 0;
  for (const Layout::Entry& e : layout.entries()) {
    *e.target = base + e.offset;
    if (e.kind == Layout::kF32) {
      ARGEN_CUDA_RETURN(kernels::FillF32(reinterpret_cast<float*>(base + e.offset), e.count, e.fill),
                        "fill f32 weight");
    } else {
      ARGEN_CUDA_RETURN(
          kernels::FillRandomBf16(reinterpret_cast<bf16*>(base + e.offset), e.count, seed, ++stream_id, scale),
          "fill random bf16 weight");
    }
  }
  ARGEN_CUDA_RETURN(cudaDeviceSynchronize(), "random weights");
  return w;
}

}  // namespace argen::cuda
