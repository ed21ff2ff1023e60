#include "engine/cuda/device_weights.h"

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/cuda/device_memory.h"
#include "kernels/fill_kernels.h"
#include "kernels/fp8_linear.h"

namespace argen::cuda {
namespace {

using model::LinearRef;
using model::NormRef;
using model::TensorFill;
using model::TensorRef;

// Where each tensor goes inside the one allocation, decided before allocating.
class Layout {
 public:
  // kFp8: e4m3 codes [rows x cols], then one f32 scale per row.
  enum Kind { kBf16, kF32, kFp8 };
  struct Entry {
    Kind kind;
    int64_t count;
    size_t offset;
    const void** target;
    std::vector<const TensorRef*> parts;  // concatenated along rows (fused q|k|v, gate|up)
    float fill;                           // random weights: the constant of f32 entries
    const void** scales = nullptr;        // kFp8: where the scales' address goes
    int64_t cols = 0;                     // kFp8: the row width
    size_t scales_offset = 0;
  };
  void Add(Kind kind, const void** target, std::vector<const TensorRef*> parts, const void** scales = nullptr) {
    int64_t count = 0;
    for (const TensorRef* t : parts) count += t->used_elements();
    const float fill = parts.front()->fill == TensorFill::kOne ? 1.f : 0.f;
    Entry e{kind, count, total_, target, parts, fill};
    size_t bytes = count * (kind == kBf16 ? 2 : kind == kF32 ? 4 : 1);
    if (kind == kFp8) {
      e.scales = scales;
      e.cols = parts.front()->row_elements();
      e.scales_offset = total_ + Align(bytes);
      bytes = Align(bytes) + (count / e.cols) * 4;
      largest_bf16_ = std::max(largest_bf16_, count * 2);
    }
    entries_.push_back(std::move(e));
    total_ += Align(bytes);
  }
  size_t total() const { return total_; }
  // The largest fp8 matrix in bf16: the staging its quantization reads from.
  int64_t largest_bf16() const { return largest_bf16_; }
  std::vector<Entry>& entries() { return entries_; }

 private:
  static size_t Align(size_t n) { return (n + 255) / 256 * 256; }
  size_t total_ = 0;
  int64_t largest_bf16_ = 0;
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

// A layer projection: bf16, or e4m3 codes and scales with weight_dtype fp8.
void Projection(Layout& l, model::WeightFormat format, LinearWeight& target, std::vector<const TensorRef*> parts) {
  if (format == model::WeightFormat::kFp8) {
    l.Add(Layout::kFp8, Slot(&target.fp8), std::move(parts), Slot(&target.fp8_scales));
  } else {
    l.Add(Layout::kBf16, Slot(&target.bf16), std::move(parts));
  }
}

void Bias(Layout& l, const float** target, const TensorRef& bias) {
  if (bias.present()) l.Add(Layout::kF32, Slot(target), {&bias});
}

// Lists every tensor of the spec (layer order as the first CUDA backend's, so
// random weights of a Janus shape are the same as before).
void Describe(const model::ModelSpec& spec, model::WeightFormat format, DeviceWeights& w, Layout& l) {
  w.format = format;
  w.layers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const model::LayerRefs& r = spec.layers[i];
    DeviceLayer& L = w.layers[i];
    Norm(l, r.input_norm, L.input_norm);
    Projection(l, format, L.qkv, {&r.q.weight, &r.k.weight, &r.v.weight});
    // f32 and after the GEMM in either weight format (no random draw: the
    // bf16 matrices' random streams stay those of a spec without biases).
    if (spec.stack.qkv_bias) l.Add(Layout::kF32, Slot(&L.qkv_bias), {&r.q.bias, &r.k.bias, &r.v.bias});
    Projection(l, format, L.o, {&r.o.weight});
    if (spec.stack.qk_norm) {
      Norm(l, r.q_norm, L.q_norm);
      Norm(l, r.k_norm, L.k_norm);
    }
    Norm(l, r.post_norm, L.post_norm);
    Projection(l, format, L.gate_up, {&r.gate.weight, &r.up.weight});
    Projection(l, format, L.down, {&r.down.weight});
  }
  Norm(l, spec.output.final_norm, w.final_norm);
  if (spec.input.table.present()) Matrix(l, &w.input_table, {&spec.input.table});
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
  if (spec.output.head.present()) {
    Matrix(l, &w.head_w, {&spec.output.head.weight});
    Bias(l, &w.head_b, spec.output.head.bias);
  }
  // After every code model's tensors: their random streams stay as they were.
  if (spec.input.vector_in.present()) {
    Matrix(l, &w.vector_in_w, {&spec.input.vector_in.weight});
    Bias(l, &w.vector_in_b, spec.input.vector_in.bias);
  }
  if (spec.output.vector_out.present()) {
    Matrix(l, &w.vector_out_w, {&spec.output.vector_out.weight});
    Bias(l, &w.vector_out_b, spec.output.vector_out.bias);
  }
}

// Where fp8 entries are quantized from: one bf16 matrix at a time.
absl::StatusOr<DeviceBuffer> Fp8Staging(const Layout& layout) {
  return DeviceBuffer::Allocate(static_cast<size_t>(layout.largest_bf16()), "fp8 weight staging (bf16)");
}

// Codes and scales of an fp8 entry from its bf16 values at `staging`.
absl::Status QuantizeEntry(char* base, const Layout::Entry& e, const bf16* staging) {
  *e.scales = base + e.scales_offset;
  ARGEN_CUDA_RETURN(kernels::QuantizeRowsE4m3(staging, e.count / e.cols, static_cast<int32_t>(e.cols),
                                              reinterpret_cast<uint8_t*>(base + e.offset),
                                              reinterpret_cast<float*>(base + e.scales_offset), nullptr),
                    "quantize fp8 weight");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(nullptr), "quantize fp8 weight");  // the staging is reused next
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFp8Shapes(const model::ModelSpec& spec) {
  for (const model::LayerRefs& r : spec.layers) {
    for (const TensorRef* t : {&r.q.weight, &r.o.weight, &r.gate.weight, &r.down.weight}) {
      if (t->row_elements() % 16 != 0) {
        return absl::InvalidArgumentError(absl::StrCat("weight_dtype fp8: '", t->name, "' has rows of ",
                                                       t->row_elements(),
                                                       " values; the fp8 GEMM needs a multiple of 16"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceWeights> UploadWeights(const model::ModelSpec& spec, const model::WeightSource& source,
                                            model::WeightFormat format) {
  if (format == model::WeightFormat::kFp8) ARGEN_STATUS_RETURN(CheckFp8Shapes(spec));
  DeviceWeights w;
  Layout layout;
  Describe(spec, format, w, layout);
  if (absl::Status fits = CheckDeviceMemoryFits(
          static_cast<int64_t>(layout.total() + layout.largest_bf16()),
          format == model::WeightFormat::kFp8 ? "the model's weights (fp8 layers)" : "the model's weights (bf16)",
          "the model does not fit this device");
      !fits.ok()) {
    return fits;
  }
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  absl::StatusOr<DeviceBuffer> staging = Fp8Staging(layout);
  if (!staging.ok()) return staging.status();
  char* base = w.storage.as<char>();
  std::vector<float> host;
  std::vector<uint16_t> converted;
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
      continue;
    }
    converted.resize(e.count);
    for (int64_t i = 0; i < e.count; ++i) converted[i] = FloatToBf16Bits(host[i]);
    void* to = e.kind == Layout::kBf16 ? static_cast<void*>(base + e.offset) : staging->as();
    ARGEN_CUDA_RETURN(cudaMemcpy(to, converted.data(), e.count * 2, cudaMemcpyHostToDevice), "upload bf16 weight");
    if (e.kind == Layout::kFp8) ARGEN_STATUS_RETURN(QuantizeEntry(base, e, staging->as<bf16>()));
  }
  return w;
}

absl::StatusOr<DeviceWeights> RandomDeviceWeights(const model::ModelSpec& spec, uint64_t seed, float scale,
                                                  model::WeightFormat format) {
  if (format == model::WeightFormat::kFp8) ARGEN_STATUS_RETURN(CheckFp8Shapes(spec));
  DeviceWeights w;
  Layout layout;
  Describe(spec, format, w, layout);
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(layout.total(), "device weights");
  if (!buf.ok()) return buf.status();
  w.storage = *std::move(buf);
  w.bytes = layout.total();
  absl::StatusOr<DeviceBuffer> staging = Fp8Staging(layout);
  if (!staging.ok()) return staging.status();
  char* base = w.storage.as<char>();
  uint64_t stream_id = 0;
  for (const Layout::Entry& e : layout.entries()) {
    *e.target = base + e.offset;
    if (e.kind == Layout::kF32) {
      ARGEN_CUDA_RETURN(kernels::FillF32(reinterpret_cast<float*>(base + e.offset), e.count, e.fill),
                        "fill f32 weight");
      continue;
    }
    // The same values as bf16 weights of this seed (fp8 quantizes them).
    bf16* to = e.kind == Layout::kBf16 ? reinterpret_cast<bf16*>(base + e.offset) : staging->as<bf16>();
    ARGEN_CUDA_RETURN(kernels::FillRandomBf16(to, e.count, seed, ++stream_id, scale), "fill random bf16 weight");
    if (e.kind == Layout::kFp8) ARGEN_STATUS_RETURN(QuantizeEntry(base, e, staging->as<bf16>()));
  }
  ARGEN_CUDA_RETURN(cudaDeviceSynchronize(), "random weights");
  return w;
}

}  // namespace argen::cuda
