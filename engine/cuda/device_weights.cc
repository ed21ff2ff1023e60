#include "engine/cuda/device_weights.h"

#include <cstring>
#include <functional>

#include "kernels/fill_kernels.h"

namespace argen::cuda {
namespace {

// Where each tensor goes inside the one allocation, decided before allocating.
class Layout {
 public:
  enum Kind { kBf16, kF32 };
  struct Entry {
    Kind kind;
    int64_t count;
    size_t offset;
    const void** target;
    const std::vector<float>* host;  // source for UploadWeights; null for random
    float fill;                      // random: 0 = random matrix, else constant (norms 1, biases 0)
    bool constant;
  };
  void Add(Kind kind, int64_t count, const void** target, const std::vector<float>* host,
           bool constant = false, float fill = 0.f) {
    const size_t bytes = count * (kind == kBf16 ? 2 : 4);
    entries_.push_back({kind, count, total_, target, host, fill, constant});
    total_ += (bytes + 255) / 256 * 256;
  }
  size_t total() const { return total_; }
  std::vector<Entry>& entries() { return entries_; }

 private:
  size_t total_ = 0;
  std::vector<Entry> entries_;
};

template <typename T>
const void** Slot(const T** p) { return reinterpret_cast<const void**>(p); }

// Lists every tensor; `src` gives the host vector of a CPU weight (or null).
void Describe(const model::ModelDims& d, DeviceWeights& w, const cpu::CpuWeights* src, Layout& l) {
  const int64_t H = d.hidden_size, hd = d.head_dim, I = d.intermediate_size;
  const int64_t qkv = (d.num_heads + 2LL * d.num_kv_heads) * hd, q = int64_t{d.num_heads} * hd;
  const int64_t E = d.image_embed_dim, HE = d.head_embed_dim, V = d.image_vocab;
  w.layers.resize(d.num_layers);
  for (int32_t i = 0; i < d.num_layers; ++i) {
    DeviceLayer& L = w.layers[i];
    const cpu::LayerWeights* s = src ? &src->layers[i] : nullptr;
    l.Add(Layout::kF32, H, Slot(&L.input_norm), s ? &s->input_norm : nullptr, true, 1.f);
    l.Add(Layout::kBf16, qkv * H, Slot(&L.qkv), s ? &s->qkv : nullptr);
    l.Add(Layout::kBf16, H * q, Slot(&L.o), s ? &s->o : nullptr);
    l.Add(Layout::kF32, H, Slot(&L.post_norm), s ? &s->post_norm : nullptr, true, 1.f);
    l.Add(Layout::kBf16, 2 * I * H, Slot(&L.gate_up), s ? &s->gate_up : nullptr);
    l.Add(Layout::kBf16, H * I, Slot(&L.down), s ? &s->down : nullptr);
  }
  l.Add(Layout::kF32, H, Slot(&w.final_norm), src ? &src->final_norm : nullptr, true, 1.f);
  l.Add(Layout::kBf16, V * E, Slot(&w.gen_embed), src ? &src->gen_embed : nullptr);
  l.Add(Layout::kBf16, H * E, Slot(&w.fc1_w), src ? &src->aligner_fc1_w : nullptr);
  l.Add(Layout::kF32, H, Slot(&w.fc1_b), src ? &src->aligner_fc1_b : nullptr, true, 0.f);
  l.Add(Layout::kBf16, H * H, Slot(&w.fc2_w), src ? &src->aligner_fc2_w : nullptr);
  l.Add(Layout::kF32, H, Slot(&w.fc2_b), src ? &src->aligner_fc2_b : nullptr, true, 0.f);
  l.Add(Layout::kBf16, HE * H, Slot(&w.head_proj_w), src ? &src->head_proj_w : nullptr);
  l.Add(Layout::kF32, HE, Slot(&w.head_proj_b), src ? &src->head_proj_b : nullptr, true, 0.f);
  l.Add(Layout::kBf16, V * HE, Slot(&w.head_out_w), src ? &src->head_out_w : nullptr);
  l.Add(Layout::kF32, V, Slot(&w.head_out_b), src ? &src->head_out_b : nullptr, true, 0.f);
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

absl::StatusOr<DeviceWeights> UploadWeights(const cpu::CpuWeights& src, const model::ModelDims& dims) {
  DeviceWeights w;
  Layout layout;
  Describe(dims, w, &src, layout);
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  char* base = w.storage.as<char>();
  std::vector<uint16_t> staging;
  for (const Layout::Entry& e : layout.entries()) {
    *e.target = base + e.offset;
    if (e.host == nullptr || static_cast<int64_t>(e.host->size()) != e.count)
      return absl::InternalError(absl::StrCat("device weights: host tensor of ", e.count,
                                              " elements missing or mis-sized"));
    if (e.kind == Layout::kF32) {
      ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset, e.host->data(), e.count * 4, cudaMemcpyHostToDevice),
                        "upload f32 weight");
    } else {
      staging.resize(e.count);
      for (int64_t i = 0; i < e.count; ++i) staging[i] = ToBf16((*e.host)[i]);
      ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset, staging.data(), e.count * 2, cudaMemcpyHostToDevice),
                        "upload bf16 weight");
    }
  }
  return w;
}

absl::StatusOr<DeviceWeights> RandomDeviceWeights(const model::ModelDims& dims, uint64_t seed, float scale) {
  DeviceWeights w;
  Layout layout;
  Describe(dims, w, nullptr, layout);
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  char* base = w.storage.as<char>();
  uint64_t stream_id = 0;
  for (const Layout::Entry& e : layout.entries()) {
    *e.target = base + e.offset;
    if (e.kind == Layout::kF32) {
      ARGEN_CUDA_RETURN(kernels::FillF32(reinterpret_cast<float*>(base + e.offset), e.count, e.fill), "fill f32 weight");
    } else {
      ARGEN_CUDA_RETURN(kernels::FillRandomBf16(reinterpret_cast<bf16*>(base + e.offset), e.count, seed, ++stream_id, scale),
                        "fill random bf16 weight");
    }
  }
  ARGEN_CUDA_RETURN(cudaDeviceSynchronize(), "random weights");
  return w;
}

}  // namespace argen::cuda
