#include "engine/vq_cuda/vq_program_host.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace argen::vq {

HostVqExecutor::HostVqExecutor(const VqProgram& program, int32_t max_images, bool round_to_bf16)
    : program_(program), max_images_(std::max(1, max_images)), round_(round_to_bf16) {
  for (auto& a : act_) a.assign(static_cast<size_t>(program.act_elems() * max_images_), 0.0f);
  qkv_.assign(static_cast<size_t>(program.qkv_elems() * max_images_), 0.0f);
  scores_.assign(static_cast<size_t>(program.score_elems() * max_images_), 0.0f);
  probs_.assign(scores_.size(), 0.0f);
  out_.assign(static_cast<size_t>(3 * program.pixels() * max_images_), 0.0f);
  const bool exact = !round_ && !program.half_weights_exact().empty();
  if (exact) {
    half_ = program.half_weights_exact();
  } else {
    half_.resize(program.half_weights().size());
    for (size_t i = 0; i < half_.size(); ++i) half_[i] = Bf16BitsToFloat(program.half_weights()[i]);
  }
  float_ = program.float_weights();
}

bool HostVqExecutor::IsHalf(VqSpace s) const {
  return s == VqSpace::kAct0 || s == VqSpace::kAct1 || s == VqSpace::kAct2 || s == VqSpace::kQkv ||
         s == VqSpace::kProbs;
}

float HostVqExecutor::Store(VqSpace s, float v) const {
  return round_ && IsHalf(s) ? Bf16BitsToFloat(FloatToBf16Bits(v)) : v;
}

float* HostVqExecutor::At(VqPtr p) {
  switch (p.space) {
    case VqSpace::kNone:
      return nullptr;
    case VqSpace::kAct0:
      return act_[0].data() + p.offset;
    case VqSpace::kAct1:
      return act_[1].data() + p.offset;
    case VqSpace::kAct2:
      return act_[2].data() + p.offset;
    case VqSpace::kQkv:
      return qkv_.data() + p.offset;
    case VqSpace::kScores:
      return scores_.data() + p.offset;
    case VqSpace::kProbs:
      return probs_.data() + p.offset;
    case VqSpace::kHalfWeights:
      return half_.data() + p.offset;
    case VqSpace::kFloatWeights:
      return float_.data() + p.offset;
    case VqSpace::kOutput:
      return out_.data() + p.offset;
  }
  return nullptr;
}

absl::Status HostVqExecutor::Decode(const std::vector<std::vector<int32_t>>& grids,
                                    std::vector<std::vector<float>>* chw) {
  const int32_t n = static_cast<int32_t>(grids.size());
  if (n > max_images_) return absl::InvalidArgumentError(absl::StrCat("host VQ: ", n, " grids > ", max_images_));
  tokens_.clear();
  for (const auto& g : grids) {
    if (static_cast<int32_t>(g.size()) != program_.cells())
      return absl::InvalidArgumentError("host VQ: grid of the wrong size");
    tokens_.insert(tokens_.end(), g.begin(), g.end());
  }
  const int64_t px = program_.pixels();
  if (absl::Status s = program_.Run(*this, n, 0, 0, n * px); !s.ok()) return s;
  chw->assign(n, std::vector<float>(static_cast<size_t>(3 * px)));
  for (int32_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < 3; ++c) std::copy_n(out_.data() + c * n * px + i * px, px, (*chw)[i].data() + c * px);
  return absl::OkStatus();
}

absl::Status HostVqExecutor::Lookup(VqPtr table, int32_t table_rows, int32_t dim, int64_t token_offset, int64_t count,
                                    VqPtr out) {
  const float* t = At(table);
  float* o = At(out);
  for (int64_t i = 0; i < count; ++i) {
    const int32_t id = tokens_[token_offset + i];
    for (int32_t c = 0; c < dim; ++c)
      o[i * dim + c] = (id >= 0 && id < table_rows) ? Store(out.space, t[int64_t{id} * dim + c]) : 0.0f;
  }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::Conv3x3(int32_t, const VqConvShape& shape, int32_t n, VqPtr in, VqPtr weight, VqPtr out,
                                     float beta) {
  const int32_t h = shape.h, w = shape.w, cin = shape.cin, cout = shape.cout;
  const int64_t hw = int64_t{h} * w, kdim = int64_t{9} * cin;
  col_.resize(static_cast<size_t>(hw * kdim + hw * cout));
  float* col = col_.data();
  float* tmp = col + hw * kdim;
  const float* wt = At(weight);
  for (int32_t img = 0; img < n; ++img) {
    const float* x = At(in) + img * hw * cin;
    float* y = At(out) + img * hw * cout;
    // col[p][tap*cin + i] = x[p shifted by tap][i] (zero outside): KRSC's K order.
    for (int32_t yy = 0; yy < h; ++yy) {
      for (int32_t xx = 0; xx < w; ++xx) {
        float* dst = col + (int64_t{yy} * w + xx) * kdim;
        for (int32_t tap = 0; tap < 9; ++tap) {
          const int32_t sy = yy + tap / 3 - 1, sx = xx + tap % 3 - 1;
          if (sy < 0 || sy >= h || sx < 0 || sx >= w) {
            std::fill_n(dst + tap * cin, cin, 0.0f);
          } else {
            std::copy_n(x + (int64_t{sy} * w + sx) * cin, cin, dst + tap * cin);
          }
        }
      }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(hw), cout, static_cast<int>(kdim), 1.0f, col,
                static_cast<int>(kdim), wt, static_cast<int>(kdim), 0.0f, tmp, cout);
    for (int64_t i = 0; i < hw * cout; ++i) y[i] = Store(out.space, tmp[i] + beta * y[i]);
  }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::Gemm(const VqGemm& g) {
  col_.resize(static_cast<size_t>(int64_t{g.m} * g.n));
  float* tmp = col_.data();
  for (int32_t b = 0; b < g.batch; ++b) {
    const float* a = At(g.a) + b * g.stride_a;
    const float* bm = At(g.b) + b * g.stride_b;
    float* c = At(g.c) + b * g.stride_c;
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
                g.k, g.alpha, a, static_cast<int>(g.lda), bm, static_cast<int>(g.ldb), 0.0f, tmp, g.m);
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t r = 0; r < g.m; ++r) {
        float& dst = c[r + j * g.ldc];
        dst = Store(g.c.space, tmp[r + j * g.m] + g.beta * dst);
      }
  }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::GroupNorm(const VqGroupNormArgs& a) {
  const int32_t cpg = a.channels / a.groups;
  const float* bias = At(a.in_bias);
  const float* gamma = At(a.gamma);
  const float* beta = At(a.beta);
  std::vector<float> scale(a.channels), shift(a.channels);
  for (int32_t n = 0; n < a.images; ++n) {
    const float* x = At(a.in) + n * a.hw * a.channels;
    float* y = At(a.out) + n * a.hw * a.channels;
    for (int32_t g = 0; g < a.groups; ++g) {
      double sum = 0, sq = 0;
      for (int64_t p = 0; p < a.hw; ++p)
        for (int32_t cc = 0; cc < cpg; ++cc) {
          const int32_t c = g * cpg + cc;
          const double v = double{x[p * a.channels + c]} + (bias ? double{bias[c]} : 0.0);
          sum += v;
          sq += v * v;
        }
      const double count = static_cast<double>(cpg) * a.hw;
      const double mean = sum / count;
      const double var = std::max(0.0, sq / count - mean * mean);
      const double inv = 1.0 / std::sqrt(var + a.eps);
      for (int32_t cc = 0; cc < cpg; ++cc) {
        const int32_t c = g * cpg + cc;
        const double s = double{gamma[c]} * inv;
        scale[c] = static_cast<float>(s);
        shift[c] = static_cast<float>(double{beta[c]} + ((bias ? double{bias[c]} : 0.0) - mean) * s);
      }
    }
    for (int64_t p = 0; p < a.hw; ++p)
      for (int32_t c = 0; c < a.channels; ++c) {
        float v = x[p * a.channels + c] * scale[c] + shift[c];
        if (a.swish) v = v / (1.0f + std::exp(-v));
        y[p * a.channels + c] = Store(a.out.space, v);
      }
  }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::Upsample2x(VqPtr in, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t channels,
                                        VqPtr out) {
  const float* x = At(in);
  const float* b = At(bias);
  float* y = At(out);
  for (int32_t img = 0; img < n; ++img)
    for (int32_t yy = 0; yy < 2 * h; ++yy)
      for (int32_t xx = 0; xx < 2 * w; ++xx)
        for (int32_t c = 0; c < channels; ++c) {
          const float v = x[((int64_t{img} * h + yy / 2) * w + xx / 2) * channels + c] + (b ? b[c] : 0.0f);
          y[((int64_t{img} * 2 * h + yy) * 2 * w + xx) * channels + c] = Store(out.space, v);
        }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::AddBias(VqPtr x, VqPtr bias, int64_t rows, int32_t channels) {
  float* p = At(x);
  const float* b = At(bias);
  for (int64_t r = 0; r < rows; ++r)
    for (int32_t c = 0; c < channels; ++c) p[r * channels + c] = Store(x.space, p[r * channels + c] + b[c]);
  return absl::OkStatus();
}

absl::Status HostVqExecutor::SoftmaxToBf16(VqPtr scores, int64_t rows, int32_t n, VqPtr probs) {
  const float* s = At(scores);
  float* p = At(probs);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = s + r * n;
    const float mx = *std::max_element(row, row + n);
    double sum = 0;
    for (int32_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
    const float inv = static_cast<float>(1.0 / sum);
    for (int32_t j = 0; j < n; ++j) p[r * n + j] = Store(probs.space, std::exp(row[j] - mx) * inv);
  }
  return absl::OkStatus();
}

absl::Status HostVqExecutor::ConvOut(VqPtr in, VqPtr weight_t, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t cin,
                                     VqPtr out, int64_t plane_stride) {
  const float* x = At(in);
  const float* wt = At(weight_t);  // [9][3][cin]
  const float* b = At(bias);
  float* o = At(out);
  const int64_t hw = int64_t{h} * w;
  for (int32_t img = 0; img < n; ++img)
    for (int32_t yy = 0; yy < h; ++yy)
      for (int32_t xx = 0; xx < w; ++xx) {
        float acc[3] = {0, 0, 0};
        for (int32_t tap = 0; tap < 9; ++tap) {
          const int32_t sy = yy + tap / 3 - 1, sx = xx + tap % 3 - 1;
          if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
          const float* px = x + ((int64_t{img} * h + sy) * w + sx) * cin;
          for (int32_t oc = 0; oc < 3; ++oc) {
            const float* wr = wt + (int64_t{tap} * 3 + oc) * cin;
            for (int32_t i = 0; i < cin; ++i) acc[oc] += px[i] * wr[i];
          }
        }
        const int64_t p = img * hw + int64_t{yy} * w + xx;
        for (int32_t oc = 0; oc < 3; ++oc) o[oc * plane_stride + p] = acc[oc] + b[oc];
      }
  return absl::OkStatus();
}

}  // namespace argen::vq
