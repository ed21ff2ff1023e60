#include "bench/gpu/attention_micro.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace argen::bench {
namespace {

using kernels::AttentionVariant;

constexpr int kIters = 60;
// Launches timed back to back between one pair of events: a single launch's
// time would include the host's enqueue (a few us: a tenth of a sparse launch).
constexpr int kBackToBack = 8;

struct Freer {
  std::vector<void*> ptrs;
  ~Freer() {
    for (void* p : ptrs) cudaFree(p);
  }
  template <typename T>
  T* Alloc(size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One mode's (dense or sparse) buffers and launch arguments, as the CUDA
// backend's RunLayers fills them; decode_idx and counts are set per layer.
struct Launch {
  AttentionMicroLayout layout;
  kernels::AttentionArgs args;
  const int32_t* lists = nullptr;   // [layers][rows][kv_heads][stride] (sparse)
  const int32_t* counts = nullptr;  // [layers][rows][kv_heads] (sparse)
  // `a` (this launch's arguments) set to read layer `layer`'s KV, slot lists and counts.
  void AtLayer(int layer, kernels::AttentionArgs* a) const {
    a->layer = layer;
    if (lists == nullptr) return;
    a->decode_idx = lists + static_cast<int64_t>(layer) * layout.lists_per_layer * layout.stride;
    a->counts = counts + static_cast<int64_t>(layer) * layout.lists_per_layer;
  }
};

bool Prepare(const AttentionMicroShape& s, bool sparse, int sms, Freer& f, Launch* launch, std::string* error) {
  absl::StatusOr<AttentionMicroLayout> laid_out = LayOutAttentionMicro(s, sparse);
  if (!laid_out.ok()) {
    *error = std::string(laid_out.status().message());
    return false;
  }
  const AttentionMicroLayout& l = *laid_out;
  const size_t rows = s.rows, q_elems = rows * s.heads * s.head_dim;
  const size_t lists = static_cast<size_t>(s.layers) * l.lists_per_layer;  // every layer's (row, kv head) lists
  __nv_bfloat16* pool = f.Alloc<__nv_bfloat16>(l.region * rows);
  float* q = f.Alloc<float>(q_elems);
  __nv_bfloat16* o = f.Alloc<__nv_bfloat16>(q_elems);
  kernels::TokenMeta* meta = f.Alloc<kernels::TokenMeta>(rows);
  int32_t* idx = sparse ? f.Alloc<int32_t>(lists * l.stride) : nullptr;
  int32_t* counts = sparse ? f.Alloc<int32_t>(lists) : nullptr;
  float* probs = sparse ? f.Alloc<float>(static_cast<size_t>(l.lists_per_layer) * l.stride) : nullptr;
  if (!pool || !q || !o || !meta || (sparse && (!idx || !counts || !probs))) {
    *error = "attention buffers";
    return false;
  }
  // Never zeros: a byte pattern giving finite bf16 values.
  cudaMemset(pool, 0x3c, l.region * rows * 2);
  cudaMemset(q, 0x3c, q_elems * 4);
  std::vector<kernels::TokenMeta> m(rows);
  for (size_t r = 0; r < rows; ++r) {
    m[r].kv_offset = static_cast<int64_t>(r) * l.region;
    m[r].capacity = l.capacity;
    m[r].prefix_len = s.prompt_len;
    m[r].decode_base = s.prompt_len;
    m[r].decode_count = sparse ? s.n_att : s.l_dec;
    m[r].flags = sparse ? kernels::kTokenSparse : 0;
  }
  cudaMemcpy(meta, m.data(), rows * sizeof(kernels::TokenMeta), cudaMemcpyHostToDevice);
  if (sparse) {
    // Each (layer, row, kv head) attends its own n_att of the n_slots resident slots, ascending.
    std::mt19937 rng(3);
    std::vector<int32_t> slots(s.n_slots), host_lists(lists * l.stride);
    std::iota(slots.begin(), slots.end(), 0);
    for (size_t h = 0; h < lists; ++h) {
      std::shuffle(slots.begin(), slots.end(), rng);
      std::sort(slots.begin(), slots.begin() + s.n_att);
      std::copy(slots.begin(), slots.begin() + s.n_att, host_lists.begin() + h * l.stride);
    }
    cudaMemcpy(idx, host_lists.data(), host_lists.size() * 4, cudaMemcpyHostToDevice);
    std::vector<int32_t> c(lists, s.n_att);
    cudaMemcpy(counts, c.data(), c.size() * 4, cudaMemcpyHostToDevice);
  }
  // The engine's choices: splits over (token, kv head) pairs, the workspace
  // for the query heads' partials (and their logits when probs are asked for).
  int splits = 1, chunk = 0;
  kernels::ChooseAttentionSplits(s.rows, s.kv_heads, s.heads / s.kv_heads, l.keys, sms, &splits, &chunk);
  const int probs_stride = sparse ? l.stride : 0;
  void* ws = f.Alloc<char>(
      std::max<size_t>(1, kernels::AttentionWorkspaceBytes(s.rows, s.heads, s.head_dim, splits, probs_stride)));
  // Zeroed split counters, as the engine passes them (the last chunk combines).
  int32_t* counters = f.Alloc<int32_t>(static_cast<size_t>(s.rows) * s.kv_heads);
  if (!ws || !counters || cudaMemset(counters, 0, static_cast<size_t>(s.rows) * s.kv_heads * 4) != cudaSuccess) {
    *error = "attention workspace";
    return false;
  }
  kernels::AttentionArgs& a = launch->args;
  a.q = q;
  a.kv_pool = pool;
  a.meta = meta;
  a.tokens = s.rows;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  a.num_layers = s.layers;
  a.scale = 0.088f;
  if (sparse) {
    a.idx_stride = l.stride;
    a.probs = probs;
    a.probs_stride = probs_stride;
  }
  a.out = o;
  a.splits = splits;
  a.chunk = chunk;
  a.workspace = ws;
  a.split_counters = counters;
  a.max_keys = l.keys;
  a.sm_count = sms;
  launch->layout = l;
  launch->lists = idx;
  launch->counts = counts;
  return true;
}

// kAuto's kernel for these arguments.
AttentionVariant AutoPick(kernels::AttentionArgs a) {
  a.variant = AttentionVariant::kAuto;
  return kernels::ChosenAttentionVariant(a);
}

// The median of kIters samples with `variant` forced, each kBackToBack launches
// rotating over the layers; *ran is false (nothing timed) where the kernel would run another.
bool Time(Launch& launch, AttentionVariant variant, const Events& e, bool* ran, double* us, double* gbs,
          std::string* error) {
  kernels::AttentionArgs a = launch.args;
  a.variant = variant;
  *ran = variant == AttentionVariant::kTwoPass || kernels::ChosenAttentionVariant(a) == variant;
  if (!*ran) return true;
  const AttentionMicroLayout& l = launch.layout;
  std::vector<float> t;
  for (int i = 0; i < kIters + 5; ++i) {
    cudaEventRecord(e.start);
    for (int r = 0; r < kBackToBack; ++r) {
      launch.AtLayer((i * kBackToBack + r) % a.num_layers, &a);
      if (kernels::DecodeAttention(a, nullptr) != cudaSuccess) {
        *error = "attention launch";
        return false;
      }
    }
    cudaEventRecord(e.stop);
    cudaEventSynchronize(e.stop);
    float ms;
    cudaEventElapsedTime(&ms, e.start, e.stop);
    if (i >= 5) t.push_back(ms / kBackToBack);
  }
  if (cudaGetLastError() != cudaSuccess) {
    *error = "attention";
    return false;
  }
  *us = Median(t) * 1e3;
  *gbs = l.bytes / (*us * 1e-6) / 1e9;
  return true;
}

// The two-pass `launch` alone, kPhaseRuns times (after kWarmRuns more), with
// phase stamps: AttentionMicroResult::Phases.
bool TimePhases(const Launch& launch, Freer& f, AttentionMicroResult::Phases* out, std::string* error) {
  constexpr int kWarmRuns = 3, kPhaseRuns = 20, kPhases = kernels::kAttentionPhaseCount;
  kernels::AttentionArgs a = launch.args;
  a.variant = AttentionVariant::kTwoPass;
  const int64_t blocks = static_cast<int64_t>(a.tokens) * a.kv_heads * a.splits;
  const size_t words = static_cast<size_t>(blocks) * kPhases * 2;
  uint64_t* stamps = f.Alloc<uint64_t>(words);
  if (stamps == nullptr) {
    *error = "phase stamps";
    return false;
  }
  a.phase_clocks = stamps;
  std::vector<uint64_t> host(words);
  std::vector<std::vector<double>> cycles(kPhases);
  std::vector<double> spans, spreads;
  double ns_sum = 0, cycle_sum = 0;
  for (int i = 0; i < kWarmRuns + kPhaseRuns; ++i) {
    launch.AtLayer(i % a.num_layers, &a);
    if (cudaMemset(stamps, 0, words * sizeof(uint64_t)) != cudaSuccess ||
        kernels::DecodeAttention(a, nullptr) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(host.data(), stamps, words * sizeof(uint64_t), cudaMemcpyDeviceToHost) != cudaSuccess) {
      *error = "attention with phase stamps";
      return false;
    }
    if (i < kWarmRuns) continue;
    uint64_t first_start = UINT64_MAX, last_start = 0, last_end = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint64_t* s = host.data() + b * kPhases * 2;  // (cycles, ns) per phase
      if (s[2 * kernels::kPhaseEnd + 1] == 0) continue;   // a block that wrote nothing
      for (int p = 1; p < kPhases; ++p) cycles[p].push_back(static_cast<double>(s[2 * p] - s[2 * (p - 1)]));
      cycle_sum += static_cast<double>(s[2 * kernels::kPhaseEnd] - s[0]);
      ns_sum += static_cast<double>(s[2 * kernels::kPhaseEnd + 1] - s[1]);
      first_start = std::min(first_start, s[1]);
      last_start = std::max(last_start, s[1]);
      last_end = std::max(last_end, s[2 * kernels::kPhaseEnd + 1]);
    }
    if (last_end == 0) continue;
    spans.push_back(static_cast<double>(last_end - first_start) * 1e-3);
    spreads.push_back(static_cast<double>(last_start - first_start) * 1e-3);
  }
  if (spans.empty() || cycle_sum <= 0) {
    *error = "no block wrote its phase stamps";
    return false;
  }
  out->blocks = static_cast<int>(blocks);
  out->threads = kernels::TwoPassBlockThreads(a);
  out->ns_per_cycle = ns_sum / cycle_sum;
  for (int p = 1; p < kPhases; ++p) {
    std::vector<double>& c = cycles[p];
    std::sort(c.begin(), c.end());
    out->median_us[p] = c[c.size() / 2] * out->ns_per_cycle * 1e-3;
    out->max_us[p] = c.back() * out->ns_per_cycle * 1e-3;
  }
  std::sort(spans.begin(), spans.end());
  std::sort(spreads.begin(), spreads.end());
  out->span_us = spans[spans.size() / 2];
  out->start_spread_us = spreads[spreads.size() / 2];
  return true;
}

// The two-pass `launch` again with the splits ChooseAttentionSplits picks for
// `per_sm` blocks an SM, appended to *times; nothing when those are the launch's.
bool TimeSplitTarget(const Launch& launch, const AttentionMicroShape& shape, int sms, int per_sm, Freer& f,
                     const Events& e, std::vector<AttentionMicroResult::SplitTarget>* times, std::string* error) {
  int splits = 1, chunk = 0;
  kernels::ChooseAttentionSplits(shape.rows, shape.kv_heads, shape.heads / shape.kv_heads, launch.layout.keys, sms,
                                 &splits, &chunk, per_sm);
  if (splits == launch.args.splits) return true;
  Launch other = launch;
  void* ws = f.Alloc<char>(std::max<size_t>(
      1, kernels::AttentionWorkspaceBytes(shape.rows, shape.heads, shape.head_dim, splits, launch.args.probs_stride)));
  if (!ws) {
    *error = "attention workspace";
    return false;
  }
  other.args.splits = splits;
  other.args.chunk = chunk;
  other.args.workspace = ws;
  AttentionMicroResult::SplitTarget t{per_sm, splits};
  bool ran = false;
  if (!Time(other, AttentionVariant::kTwoPass, e, &ran, &t.us, &t.gbs, error)) return false;
  times->push_back(t);
  return true;
}

}  // namespace

const char* AttentionVariantName(AttentionVariant variant) {
  switch (variant) {
    case AttentionVariant::kAuto:
      return "auto";
    case AttentionVariant::kTwoPass:
      return "two-pass";
    case AttentionVariant::kStaged:
      return "staged";
    case AttentionVariant::kWarp:
      return "warp";
    case AttentionVariant::kOnePass:
      return "one-pass";
  }
  return "?";
}

bool RunAttentionMicro(const AttentionMicroShape& shape, AttentionMicroResult* out, std::string* error) {
  if (!kernels::AttentionShapeSupported(shape.heads, shape.kv_heads, shape.head_dim)) {
    *error = "the kernel does not support " + std::to_string(shape.heads) + " heads over " +
             std::to_string(shape.kv_heads) + " kv heads of " + std::to_string(shape.head_dim);
    return false;
  }
  Freer f;
  Events e;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  {
    // Copy bandwidth: 2 GiB device to device (freed before the attention buffers).
    Freer copy;
    const size_t copy_bytes = size_t{1} << 31;
    char* a = copy.Alloc<char>(copy_bytes);
    char* b = copy.Alloc<char>(copy_bytes);
    if (!a || !b) {
      *error = "copy buffers";
      return false;
    }
    cudaMemset(a, 1, copy_bytes);
    std::vector<float> times;
    for (int i = 0; i < 12; ++i) {
      cudaEventRecord(e.start);
      cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e.stop);
      cudaEventSynchronize(e.stop);
      float ms;
      cudaEventElapsedTime(&ms, e.start, e.stop);
      if (i >= 2) times.push_back(ms);
    }
    out->copy_gbs = 2.0 * copy_bytes / (Median(times) * 1e-3) / 1e9;
  }

  Launch dense, sparse;
  if (!Prepare(shape, false, sms, f, &dense, error) || !Prepare(shape, true, sms, f, &sparse, error)) return false;
  out->auto_dense = AutoPick(dense.args);
  out->auto_sparse = AutoPick(sparse.args);
  out->auto_staged = out->auto_sparse == AttentionVariant::kStaged;
  bool ran = false;
  if (!Time(dense, AttentionVariant::kTwoPass, e, &ran, &out->dense_us, &out->dense_gbs, error)) return false;
  if (!Time(dense, AttentionVariant::kWarp, e, &out->dense_warp_ran, &out->dense_warp_us, &out->dense_warp_gbs, error))
    return false;
  if (!Time(sparse, AttentionVariant::kTwoPass, e, &ran, &out->sparse_us, &out->sparse_gbs, error)) return false;
  if (!Time(sparse, AttentionVariant::kStaged, e, &out->staged_ran, &out->staged_us, &out->staged_gbs, error))
    return false;
  if (!Time(dense, AttentionVariant::kOnePass, e, &ran, &out->dense_one_pass_us, &out->dense_one_pass_gbs, error) ||
      !Time(sparse, AttentionVariant::kOnePass, e, &ran, &out->sparse_one_pass_us, &out->sparse_one_pass_gbs, error))
    return false;
  if (kernels::AttentionPhaseStampsBuilt() &&
      (!TimePhases(dense, f, &out->dense_phases, error) || !TimePhases(sparse, f, &out->sparse_phases, error)))
    return false;
  out->sparse_splits = sparse.args.splits;
  out->dense_splits = dense.args.splits;
  // The split launches again with a combine launch of their own (no counters).
  for (Launch* launch : {&dense, &sparse}) {
    if (launch->args.splits <= 1) continue;
    Launch separate = *launch;
    separate.args.split_counters = nullptr;
    double* us = launch == &dense ? &out->dense_combine_us : &out->sparse_combine_us;
    double gbs = 0;
    if (!Time(separate, AttentionVariant::kTwoPass, e, &ran, us, &gbs, error)) return false;
  }
  const auto time_targets = [&](const Launch& launch, std::initializer_list<int> targets,
                                std::vector<AttentionMicroResult::SplitTarget>* times) -> bool {
    for (int per_sm : targets) {
      if (!TimeSplitTarget(launch, shape, sms, per_sm, f, e, times, error)) return false;
    }
    return true;
  };
  if (!time_targets(sparse, {1, 2, 4, 8}, &out->sparse_targets) || !time_targets(dense, {1, 2}, &out->dense_targets))
    return false;
  return Time(sparse, AttentionVariant::kWarp, e, &out->sparse_warp_ran, &out->sparse_warp_us, &out->sparse_warp_gbs,
              error);
}

}  // namespace argen::bench
