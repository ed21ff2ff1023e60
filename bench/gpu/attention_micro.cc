#include "bench/gpu/attention_micro.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace argen::bench {
namespace {

constexpr int kLayers = 4;  // rotate over layers so repeated calls do not hit in L2
constexpr int kIters = 60;

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

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

bool RunAttentionMicro(int rows, int heads, int head_dim, int prompt_len, int l_dec, int n_att, int n_slots,
                       AttentionMicroResult* out, std::string* error) {
  Freer f;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  // Copy bandwidth: 2 GiB device to device.
  const size_t copy_bytes = size_t{1} << 31;
  char* a = f.Alloc<char>(copy_bytes);
  char* b = f.Alloc<char>(copy_bytes);
  if (!a || !b) {
    *error = "copy buffers";
    return false;
  }
  cudaMemset(a, 1, copy_bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> times;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 2) times.push_back(ms);
  }
  out->copy_gbs = 2.0 * copy_bytes / (Median(times) * 1e-3) / 1e9;

  // One KV region per row: dense rows hold L_p + L_dec positions, sparse rows L_p + n_slots.
  auto run = [&](bool sparse, kernels::AttentionVariant variant, double* us, double* gbs) -> bool {
    const int cap = prompt_len + (sparse ? n_slots : l_dec);
    const int64_t region = 2LL * kLayers * heads * cap * head_dim;
    __nv_bfloat16* pool = f.Alloc<__nv_bfloat16>(region * rows);
    float* q = f.Alloc<float>(static_cast<size_t>(rows) * heads * head_dim);
    __nv_bfloat16* o = f.Alloc<__nv_bfloat16>(static_cast<size_t>(rows) * heads * head_dim);
    kernels::TokenMeta* meta = f.Alloc<kernels::TokenMeta>(rows);
    const int stride = std::max(n_att, 1);
    int32_t* idx = f.Alloc<int32_t>(static_cast<size_t>(kLayers) * rows * heads * stride);
    int32_t* counts = f.Alloc<int32_t>(static_cast<size_t>(rows) * heads);
    float* probs = f.Alloc<float>(static_cast<size_t>(rows) * heads * stride);
    if (!pool || !q || !o || !meta || !idx || !counts || !probs) {
      *error = "attention buffers";
      return false;
    }
    // Random contents (never zeros): a byte pattern giving finite bf16 values.
    cudaMemset(pool, 0x3c, region * rows * 2);
    cudaMemset(q, 0x3c, static_cast<size_t>(rows) * heads * head_dim * 4);
    std::vector<kernels::TokenMeta> m(rows);
    for (int r = 0; r < rows; ++r) {
      m[r].kv_offset = r * region;
      m[r].capacity = cap;
      m[r].prefix_len = prompt_len;
      m[r].decode_base = prompt_len;
      m[r].decode_count = sparse ? n_att : l_dec;
      m[r].flags = sparse ? kernels::kTokenSparse : 0;
    }
    cudaMemcpy(meta, m.data(), rows * sizeof(kernels::TokenMeta), cudaMemcpyHostToDevice);
    std::mt19937 rng(3);
    std::vector<int32_t> slots(n_slots), lists(static_cast<size_t>(kLayers) * rows * heads * stride);
    std::iota(slots.begin(), slots.end(), 0);
    for (size_t h = 0; h < lists.size() / stride; ++h) {
      std::shuffle(slots.begin(), slots.end(), rng);
      std::sort(slots.begin(), slots.begin() + n_att);
      std::copy(slots.begin(), slots.begin() + n_att, lists.begin() + h * stride);
    }
    cudaMemcpy(idx, lists.data(), lists.size() * 4, cudaMemcpyHostToDevice);
    std::vector<int32_t> c(static_cast<size_t>(rows) * heads, n_att);
    cudaMemcpy(counts, c.data(), c.size() * 4, cudaMemcpyHostToDevice);
    const int keys = prompt_len + (sparse ? n_att : l_dec);
    int splits = 1, chunk = 0;
    kernels::ChooseAttentionSplits(rows, heads, keys, sms, &splits, &chunk);
    void* ws =
        f.Alloc<char>(std::max<size_t>(1, kernels::AttentionWorkspaceBytes(rows, heads, head_dim, splits, stride)));
    kernels::AttentionArgs args;
    args.q = q;
    args.kv_pool = pool;
    args.meta = meta;
    args.tokens = rows;
    args.heads = heads;
    args.kv_heads = heads;
    args.head_dim = head_dim;
    args.num_layers = kLayers;
    args.scale = 0.088f;
    args.idx_stride = stride;
    args.counts = counts;
    if (sparse) {
      args.probs = probs;
      args.probs_stride = stride;
    }
    args.out = o;
    args.splits = splits;
    args.chunk = chunk;
    args.workspace = ws;
    args.max_keys = keys;
    args.variant = variant;
    if (sparse && variant == kernels::AttentionVariant::kStaged) {
      out->staged_ran = kernels::ChosenAttentionVariant(args) == kernels::AttentionVariant::kStaged;
      if (!out->staged_ran) return true;
    }
    if (sparse && variant == kernels::AttentionVariant::kTwoPass) {
      kernels::AttentionArgs probe = args;
      probe.variant = kernels::AttentionVariant::kAuto;
      out->auto_staged = kernels::ChosenAttentionVariant(probe) == kernels::AttentionVariant::kStaged;
    }
    std::vector<float> t;
    for (int i = 0; i < kIters + 5; ++i) {
      args.layer = i % kLayers;
      args.decode_idx = idx + static_cast<size_t>(args.layer) * rows * heads * stride;
      cudaEventRecord(e0);
      if (kernels::DecodeAttention(args, nullptr) != cudaSuccess) {
        *error = "attention launch";
        return false;
      }
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (i >= 5) t.push_back(ms);
    }
    if (cudaGetLastError() != cudaSuccess) {
      *error = "attention";
      return false;
    }
    *us = Median(t) * 1e3;
    const double bytes = static_cast<double>(rows) * heads * keys * head_dim * 2 * 2 +
                         (sparse ? static_cast<double>(rows) * heads * n_att * 4 * 2 : 0.0);
    *gbs = bytes / (*us * 1e-6) / 1e9;
    return true;
  };
  using kernels::AttentionVariant;
  if (!run(false, AttentionVariant::kTwoPass, &out->dense_us, &out->dense_gbs)) return false;
  if (!run(true, AttentionVariant::kTwoPass, &out->sparse_us, &out->sparse_gbs)) return false;
  if (!run(true, AttentionVariant::kStaged, &out->staged_us, &out->staged_gbs)) return false;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return true;
}

}  // namespace argen::bench
