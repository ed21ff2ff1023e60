// Elementwise kernels against float64 host references on random inputs.
#include "kernels/elementwise.h"
#include "kernels/kv_fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::Bf16Bits;
using testing::DeviceArray;
using testing::FromBf16Bits;
using testing::RandomFloats;
using testing::RelativeError;
using testing::RoundBf16;
using testing::ToBf16;
using testing::ToBf16Bits;

bf16* AsBf16(DeviceArray<Bf16Bits>& a) { return reinterpret_cast<bf16*>(a.get()); }

std::vector<double> Bf16ToDouble(const std::vector<Bf16Bits>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromBf16Bits(v[i]);
  return out;
}

class ElementwiseTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::RequireDevice()); }
  std::mt19937 rng_{1234};
};

TEST_F(ElementwiseTest, EmbeddingGatherCopiesRowsAndZeroesInvalidIds) {
  const int vocab = 300, dim = 72;
  const auto table_h = ToBf16(RandomFloats(rng_, vocab * dim));
  const std::vector<int32_t> ids = {5, 299, 0, -1, 300, 17};
  DeviceArray<Bf16Bits> table(table_h);
  DeviceArray<int32_t> ids_d(ids);
  DeviceArray<float> out_f(ids.size() * dim);
  DeviceArray<Bf16Bits> out_b(ids.size() * dim);
  out_f.Poison();
  out_b.Poison();
  ARGEN_CUDA_OK(EmbeddingGatherF32(AsBf16(table), vocab, dim, ids_d.get(), ids.size(), out_f.get(), 0));
  ARGEN_CUDA_OK(EmbeddingGatherBf16(AsBf16(table), vocab, dim, ids_d.get(), ids.size(), AsBf16(out_b), 0));
  const auto f = out_f.Download();
  const auto b = out_b.Download();
  for (size_t r = 0; r < ids.size(); ++r) {
    const bool valid = ids[r] >= 0 && ids[r] < vocab;
    for (int i = 0; i < dim; ++i) {
      const float want = valid ? FromBf16Bits(table_h[ids[r] * dim + i]) : 0.f;
      ASSERT_EQ(f[r * dim + i], want) << "row " << r << " dim " << i;
      ASSERT_EQ(FromBf16Bits(b[r * dim + i]), want) << "row " << r << " dim " << i;
    }
  }
}

TEST_F(ElementwiseTest, BiasGeluAddBiasAddInPlace) {
  const int rows = 7, n = 333;
  const auto x = RandomFloats(rng_, rows * n, 2.f);
  const auto bias = RandomFloats(rng_, n);
  const auto y0 = RandomFloats(rng_, rows * n);
  DeviceArray<float> x_d(x), bias_d(bias), y_d(y0);
  DeviceArray<Bf16Bits> gelu(rows * n);
  gelu.Poison();
  ARGEN_CUDA_OK(BiasGelu(x_d.get(), bias_d.get(), rows, n, AsBf16(gelu), 0));
  ARGEN_CUDA_OK(AddInPlace(y_d.get(), x_d.get(), rows * n, 0));
  ARGEN_CUDA_OK(AddBias(x_d.get(), bias_d.get(), rows, n, 0));
  std::vector<double> want_gelu(rows * n), want_bias(rows * n), want_sum(rows * n);
  for (int i = 0; i < rows * n; ++i) {
    const double v = static_cast<double>(x[i]) + bias[i % n];
    want_gelu[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    want_bias[i] = v;
    want_sum[i] = static_cast<double>(y0[i]) + x[i];
  }
  EXPECT_LT(RelativeError(Bf16ToDouble(gelu.Download()), want_gelu), 5e-3);
  const auto xb = x_d.Download();
  const auto ys = y_d.Download();
  EXPECT_LT(RelativeError(std::vector<double>(xb.begin(), xb.end()), want_bias), 1e-6);
  EXPECT_LT(RelativeError(std::vector<double>(ys.begin(), ys.end()), want_sum), 1e-6);
}

TEST_F(ElementwiseTest, GatherRowsCopiesSelectedRows) {
  const int dim = 300;
  const auto src = RandomFloats(rng_, 5 * dim);
  const std::vector<int32_t> rows = {0, 0, 4, 2, 2, 1};
  DeviceArray<float> src_d(src), dst(rows.size() * dim);
  DeviceArray<int32_t> rows_d(rows);
  dst.Poison();
  ARGEN_CUDA_OK(GatherRowsF32(src_d.get(), rows_d.get(), rows.size(), dim, dst.get(), 0));
  const auto got = dst.Download();
  for (size_t i = 0; i < rows.size(); ++i)
    for (int d = 0; d < dim; ++d) ASSERT_EQ(got[i * dim + d], src[rows[i] * dim + d]);
}

TEST_F(ElementwiseTest, RmsNormMatchesFloat64) {
  for (int dim : {64, 2048, 1000}) {
    const int rows = 5;
    const float eps = 1e-6f;
    const auto x = RandomFloats(rng_, rows * dim, 3.f);
    const auto w = RandomFloats(rng_, dim);
    DeviceArray<float> x_d(x), w_d(w);
    DeviceArray<Bf16Bits> out(rows * dim);
    out.Poison();
    ARGEN_CUDA_OK(RmsNorm(x_d.get(), w_d.get(), rows, dim, eps, AsBf16(out), 0));
    std::vector<double> want(rows * dim);
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) want[r * dim + i] = x[r * dim + i] * inv * w[i];
    }
    EXPECT_LT(RelativeError(Bf16ToDouble(out.Download()), want), 5e-3) << "dim " << dim;
  }
}

// The decoder-stack switches' kernels (engine/model/model_spec.h).
std::vector<double> LayerNormRef(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                                 int rows, int dim, double eps) {
  std::vector<double> out(static_cast<size_t>(rows) * dim);
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= dim;
    for (int i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    const double inv = 1.0 / std::sqrt(var / dim + eps);
    for (int i = 0; i < dim; ++i) out[r * dim + i] = (x[r * dim + i] - mean) * inv * w[i] + b[i];
  }
  return out;
}

TEST_F(ElementwiseTest, LayerNormMatchesFloat64) {
  for (int dim : {64, 4096, 1000}) {
    const int rows = 5;
    auto x = RandomFloats(rng_, rows * dim, 3.f);
    for (float& v : x) v += 1.5f;  // a mean far from 0
    const auto w = RandomFloats(rng_, dim), b = RandomFloats(rng_, dim);
    DeviceArray<float> x_d(x), w_d(w), b_d(b);
    DeviceArray<Bf16Bits> out(rows * dim);
    out.Poison();
    ARGEN_CUDA_OK(LayerNorm(x_d.get(), w_d.get(), b_d.get(), rows, dim, 1e-5f, AsBf16(out), 0));
    EXPECT_LT(RelativeError(Bf16ToDouble(out.Download()), LayerNormRef(x, w, b, rows, dim, 1e-5)), 5e-3)
        << "dim " << dim;
  }
}

TEST_F(ElementwiseTest, AddNormAddsTheNormedSublayerAndWritesItsBf16Copy) {
  const int rows = 4, dim = 320;
  for (bool layer : {false, true}) {
    const auto x0 = RandomFloats(rng_, rows * dim), y = RandomFloats(rng_, rows * dim, 4.f);
    const auto w = RandomFloats(rng_, dim), b = RandomFloats(rng_, dim);
    DeviceArray<float> x_d(x0), y_d(y), w_d(w), b_d(b);
    DeviceArray<Bf16Bits> xb(rows * dim);
    xb.Poison();
    ARGEN_CUDA_OK(
        AddNorm(y_d.get(), w_d.get(), layer ? b_d.get() : nullptr, rows, dim, 1e-5f, x_d.get(), AsBf16(xb), 0));
    std::vector<double> normed(rows * dim);
    if (layer) {
      normed = LayerNormRef(y, w, b, rows, dim, 1e-5);
    } else {
      for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < dim; ++i) ss += static_cast<double>(y[r * dim + i]) * y[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int i = 0; i < dim; ++i) normed[r * dim + i] = y[r * dim + i] * inv * w[i];
      }
    }
    std::vector<double> want(rows * dim);
    for (int i = 0; i < rows * dim; ++i) want[i] = x0[i] + normed[i];
    const auto x = x_d.Download();
    EXPECT_LT(RelativeError(std::vector<double>(x.begin(), x.end()), want), 1e-5) << (layer ? "layer" : "rms");
    const auto copy = xb.Download();
    for (int i = 0; i < rows * dim; ++i) ASSERT_EQ(FromBf16Bits(copy[i]), RoundBf16(x[i])) << i;
  }
}

TEST_F(ElementwiseTest, ConvertToBf16RoundsToNearestEven) {
  const auto x = RandomFloats(rng_, 1000, 10.f);
  DeviceArray<float> x_d(x);
  DeviceArray<Bf16Bits> out(x.size());
  out.Poison();
  ARGEN_CUDA_OK(ConvertToBf16(x_d.get(), x.size(), AsBf16(out), 0));
  const auto got = out.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], ToBf16Bits(x[i])) << i;
}

TEST_F(ElementwiseTest, HeadLayerNormNormsEachQAndKHeadAndLeavesV) {
  for (auto [heads, kv_heads, hd] : {std::tuple{4, 2, 16}, {32, 32, 128}, {8, 1, 64}}) {
    const int tokens = 7, width = (heads + 2 * kv_heads) * hd;
    auto qkv = RandomFloats(rng_, tokens * width, 2.f);
    for (float& v : qkv) v += 0.7f;
    const auto qw = RandomFloats(rng_, heads * hd), qb = RandomFloats(rng_, heads * hd);
    const auto kw = RandomFloats(rng_, kv_heads * hd), kb = RandomFloats(rng_, kv_heads * hd);
    DeviceArray<float> qkv_d(qkv), qw_d(qw), qb_d(qb), kw_d(kw), kb_d(kb);
    HeadLayerNormArgs a;
    a.qkv = qkv_d.get();
    a.tokens = tokens;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = hd;
    a.q_weight = qw_d.get();
    a.q_bias = qb_d.get();
    a.k_weight = kw_d.get();
    a.k_bias = kb_d.get();
    a.eps = 1e-5f;
    ARGEN_CUDA_OK(HeadLayerNorm(a, 0));
    const auto got = qkv_d.Download();
    std::vector<double> want(qkv.begin(), qkv.end());
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < heads + kv_heads; ++h) {
        const bool q = h < heads;
        const int own = q ? h : h - heads;
        std::vector<float> v(qkv.begin() + t * width + h * hd, qkv.begin() + t * width + (h + 1) * hd);
        std::vector<float> w((q ? qw : kw).begin() + own * hd, (q ? qw : kw).begin() + (own + 1) * hd);
        std::vector<float> b((q ? qb : kb).begin() + own * hd, (q ? qb : kb).begin() + (own + 1) * hd);
        const std::vector<double> n = LayerNormRef(v, w, b, 1, hd, 1e-5);
        for (int i = 0; i < hd; ++i) want[t * width + h * hd + i] = n[i];
      }
    }
    EXPECT_LT(RelativeError(std::vector<double>(got.begin(), got.end()), want), 1e-5) << heads << "/" << kv_heads;
    for (int t = 0; t < tokens; ++t)  // v untouched
      for (int i = (heads + kv_heads) * hd; i < width; ++i) ASSERT_EQ(got[t * width + i], qkv[t * width + i]);
  }
}

TEST_F(ElementwiseTest, SwiGluMatchesFloat64) {
  const int rows = 6, inter = 517;
  const auto gu = RandomFloats(rng_, rows * 2 * inter, 2.f);
  DeviceArray<float> gu_d(gu);
  DeviceArray<Bf16Bits> out(rows * inter);
  out.Poison();
  ARGEN_CUDA_OK(SwiGlu(gu_d.get(), rows, inter, AsBf16(out), 0));
  std::vector<double> want(rows * inter);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < inter; ++c) {
      const double g = gu[r * 2 * inter + c], u = gu[r * 2 * inter + inter + c];
      want[r * inter + c] = g / (1.0 + std::exp(-g)) * u;
    }
  EXPECT_LT(RelativeError(Bf16ToDouble(out.Download()), want), 5e-3);
}

// Rotary tables as the backend builds them: angle = pos * theta^(-2i/d).
std::vector<float> RopeTable(int max_pos, int head_dim, double theta) {
  std::vector<float> t(static_cast<size_t>(max_pos) * head_dim);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < head_dim / 2; ++i) {
      const double a = p * std::pow(theta, -2.0 * i / head_dim);
      t[(p * head_dim / 2 + i) * 2] = std::cos(a);
      t[(p * head_dim / 2 + i) * 2 + 1] = std::sin(a);
    }
  return t;
}

TEST_F(ElementwiseTest, RopeAppendRotatesAndWritesOnlyItsSlot) {
  const int heads = 4, kv_heads = 2, hd = 64, layers = 3, layer = 1, max_pos = 64;
  const int cap = 20;  // per (layer, kv_head)
  const int64_t region = 2LL * layers * kv_heads * cap * hd;
  // Two rows' regions in one pool; three tokens: two prefill tokens of row 0, one decode of row 1.
  std::vector<TokenMeta> meta(3);
  meta[0] = {0, cap, 0, 0, 1, 8, 0, 0, 0};
  meta[1] = {0, cap, 7, 7, 8, 8, 0, 0, 0};
  meta[2] = {region, cap, 30, -1, 8, 8, 6, kTokenSparse, 0};
  // Token 2 is a sparse decode token: each kv head writes its own policy slot.
  const std::vector<int32_t> write_slots = {0, 0, 0, 0, 5, 11};
  auto kv_index_of = [&](size_t t, int h) {
    return meta[t].flags & kTokenSparse ? meta[t].decode_base + write_slots[t * kv_heads + h] : meta[t].kv_index;
  };
  const int width = (heads + 2 * kv_heads) * hd;
  const auto qkv = RandomFloats(rng_, meta.size() * width);
  const auto rope = RopeTable(max_pos, hd, 10000.0);
  DeviceArray<float> qkv_d(qkv), rope_d(rope), q_out(meta.size() * heads * hd);
  DeviceArray<TokenMeta> meta_d(meta);
  DeviceArray<int32_t> slots_d(write_slots);
  DeviceArray<Bf16Bits> pool(2 * region);
  pool.Poison(0xff);  // bf16 0xffff is a NaN: any stray write shows
  q_out.Poison();
  RopeAppendArgs a;
  a.qkv = qkv_d.get();
  a.rope = rope_d.get();
  a.max_pos = max_pos;
  a.meta = meta_d.get();
  a.tokens = meta.size();
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = hd;
  a.num_layers = layers;
  a.layer = layer;
  a.write_slots = slots_d.get();
  a.q_out = q_out.get();
  a.kv_pool = AsBf16(pool);
  ARGEN_CUDA_OK(RopeAppend(a, 0));
  const auto q = q_out.Download();
  const auto kv = pool.Download();
  std::vector<bool> written(kv.size(), false);
  for (size_t t = 0; t < meta.size(); ++t) {
    auto rotate = [&](const float* x, int i, double theta_pos) {
      const double angle = theta_pos * std::pow(10000.0, -2.0 * (i % (hd / 2)) / hd);
      const double c = std::cos(angle), s = std::sin(angle);
      return i < hd / 2 ? x[i] * c - x[i + hd / 2] * s : x[i] * c + x[i - hd / 2] * s;
    };
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd; ++i) {
        const double want = rotate(&qkv[t * width + h * hd], i, meta[t].rope_pos);
        ASSERT_NEAR(q[(t * heads + h) * hd + i], want, 1e-5) << "token " << t << " q head " << h;
      }
    for (int h = 0; h < kv_heads; ++h)
      for (int i = 0; i < hd; ++i) {
        const int64_t layer_stride = static_cast<int64_t>(kv_heads) * cap * hd;
        const int64_t k_at = meta[t].kv_offset + layer * layer_stride + (h * cap + kv_index_of(t, h)) * hd + i;
        const int64_t v_at = k_at + layers * layer_stride;
        const double want_k = rotate(&qkv[t * width + (heads + h) * hd], i, meta[t].rope_pos);
        const double want_v = qkv[t * width + (heads + kv_heads + h) * hd + i];
        ASSERT_NEAR(FromBf16Bits(kv[k_at]), want_k, 1e-2 * std::max(1.0, std::abs(want_k)));
        ASSERT_EQ(FromBf16Bits(kv[v_at]), testing::RoundBf16(want_v));
        written[k_at] = written[v_at] = true;
      }
  }
  for (size_t i = 0; i < kv.size(); ++i) {
    if (!written[i]) {
      ASSERT_EQ(kv[i], 0xffff) << "stray write at " << i;
    }
  }
}

// The fp8 append: each written key/value vector holds e4m3 codes of its
// elements over one scale (its largest magnitude / 448), placed where
// kernels/kv_fp8.h says; nothing else in the region changes.
TEST_F(ElementwiseTest, RopeAppendFp8WritesCodesAndScalesOfItsSlotOnly) {
  const int heads = 8, kv_heads = 4, hd = 128, layers = 2, layer = 1, max_pos = 64;
  const int cap = 12;
  const Fp8KvRegion r = Fp8Region(layers, kv_heads, cap, hd);
  const int64_t region_elems = (r.total + 255) / 256 * 128;  // bf16 elements, 256-byte aligned
  std::vector<TokenMeta> meta(3);
  meta[0] = {0, cap, 3, 3, 4, 8, 0, kTokenKvFp8, 0};                                // prefill token
  meta[1] = {region_elems, cap, 40, -1, 8, 8, 2, kTokenKvFp8 | kTokenSparse, 0};    // sparse decode
  meta[2] = {2 * region_elems, cap, 9, 9, 10, 8, 0, 0, 0};                          // a bf16 row beside them
  const std::vector<int32_t> write_slots = {0, 0, 0, 0, 1, 3, 0, 2, 0, 0, 0, 0};
  auto kv_index_of = [&](size_t t, int h) {
    return meta[t].flags & kTokenSparse ? meta[t].decode_base + write_slots[t * kv_heads + h] : meta[t].kv_index;
  };
  const int width = (heads + 2 * kv_heads) * hd;
  auto qkv = RandomFloats(rng_, meta.size() * width, 2.f);
  for (int i = 0; i < hd; ++i) qkv[(heads + kv_heads + 1) * hd + i] = 0.f;  // token 0, kv head 1: a zero value
  const auto rope = RopeTable(max_pos, hd, 10000.0);
  DeviceArray<float> qkv_d(qkv), rope_d(rope), q_out(meta.size() * heads * hd);
  DeviceArray<TokenMeta> meta_d(meta);
  DeviceArray<int32_t> slots_d(write_slots);
  DeviceArray<Bf16Bits> pool(2 * region_elems + 2LL * layers * kv_heads * cap * hd);
  pool.Poison(0xff);
  RopeAppendArgs a;
  a.qkv = qkv_d.get();
  a.rope = rope_d.get();
  a.max_pos = max_pos;
  a.meta = meta_d.get();
  a.tokens = meta.size();
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = hd;
  a.num_layers = layers;
  a.layer = layer;
  a.write_slots = slots_d.get();
  a.q_out = q_out.get();
  a.kv_pool = AsBf16(pool);
  ARGEN_CUDA_OK(RopeAppend(a, 0));
  const auto pool_h = pool.Download();
  const auto* bytes = reinterpret_cast<const uint8_t*>(pool_h.data());
  std::vector<bool> written(pool_h.size() * 2, false);
  for (size_t t = 0; t < 2; ++t) {
    const int64_t base = meta[t].kv_offset * 2;
    for (int h = 0; h < kv_heads; ++h) {
      const int64_t vec = (static_cast<int64_t>(layer) * kv_heads + h) * cap + kv_index_of(t, h);
      std::vector<double> k(hd), v(hd);
      double k_amax = 0, v_amax = 0;
      for (int i = 0; i < hd; ++i) {
        const int j = i % (hd / 2);
        const double angle = meta[t].rope_pos * std::pow(10000.0, -2.0 * j / hd);
        const double c = std::cos(angle), s = std::sin(angle);
        const float* x = &qkv[t * width + (heads + h) * hd];
        k[i] = i < hd / 2 ? x[i] * c - x[i + hd / 2] * s : x[i] * c + x[i - hd / 2] * s;
        v[i] = qkv[t * width + (heads + kv_heads + h) * hd + i];
        k_amax = std::max(k_amax, std::abs(k[i]));
        v_amax = std::max(v_amax, std::abs(v[i]));
      }
      float k_scale, v_scale;
      std::memcpy(&k_scale, bytes + base + r.k_scales + vec * 4, 4);
      std::memcpy(&v_scale, bytes + base + r.v_scales + vec * 4, 4);
      ASSERT_NEAR(k_scale, k_amax / 448, 1e-5 * k_amax / 448 + 1e-12) << "token " << t << " head " << h;
      ASSERT_EQ(v_scale, static_cast<float>(v_amax) / 448.f);
      for (int i = 0; i < hd; ++i) {
        const uint8_t kc = bytes[base + vec * hd + i], vc = bytes[base + r.v_codes + vec * hd + i];
        // Value codes are exactly the host's; key codes may differ by one step where
        // the device's rotation rounds across a midpoint.
        ASSERT_EQ(vc, EncodeScaled(static_cast<float>(v[i]), v_scale)) << "token " << t << " head " << h << " " << i;
        ASSERT_NEAR(DecodeE4m3(kc) * k_scale, k[i], std::abs(k[i]) * 0.0626 + k_scale * 0.002)
            << "token " << t << " head " << h << " " << i;
        written[base + vec * hd + i] = written[base + r.v_codes + vec * hd + i] = true;
      }
      for (int b = 0; b < 4; ++b) written[base + r.k_scales + vec * 4 + b] = written[base + r.v_scales + vec * 4 + b] = true;
    }
  }
  // The bf16 row got bf16 K/V as before.
  {
    const int64_t ls = static_cast<int64_t>(kv_heads) * cap * hd;
    for (int h = 0; h < kv_heads; ++h)
      for (int i = 0; i < hd; ++i) {
        const int64_t v_at = meta[2].kv_offset + layers * ls + layer * ls + (h * cap + meta[2].kv_index) * hd + i;
        ASSERT_EQ(FromBf16Bits(pool_h[v_at]), testing::RoundBf16(qkv[2 * width + (heads + kv_heads + h) * hd + i]));
        const int64_t k_at = meta[2].kv_offset + layer * ls + (h * cap + meta[2].kv_index) * hd + i;
        written[2 * k_at] = written[2 * k_at + 1] = written[2 * v_at] = written[2 * v_at + 1] = true;
      }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(written.size()); ++i) {
    if (!written[i]) {
      ASSERT_EQ(bytes[i], 0xff) << "stray write at byte " << i;
    }
  }
}

}  // namespace
}  // namespace argen::kernels
