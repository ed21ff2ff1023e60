#include "engine/vq_cuda/vq_program.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/vq/group_norm.h"

// Early return on a non-OK status (this file is CUDA-free: no engine/cuda macros).
#define ARGEN_RETURN_IF(expr)                          \
  do {                                                 \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

namespace argen::vq {

std::vector<int32_t> VqLadder(int32_t chunk) {
  std::vector<int32_t> ladder;
  for (int32_t s = 1; s < chunk; s *= 2) ladder.push_back(s);
  ladder.push_back(std::max(chunk, 1));
  return ladder;
}

std::vector<std::pair<int32_t, int32_t>> VqPieces(int32_t n, const std::vector<int32_t>& ladder) {
  std::vector<std::pair<int32_t, int32_t>> pieces;
  int32_t first = 0;
  while (n > 0) {
    int32_t size = 1;
    for (int32_t s : ladder)
      if (s <= n) size = std::max(size, s);
    pieces.emplace_back(first, size);
    first += size;
    n -= size;
  }
  return pieces;
}

// Walks the decoder as vq::VqDecoder::Run does, emitting ops and tracking the
// residual stream's buffer and pending bias.
class VqProgramBuilder {
 public:
  VqProgramBuilder(const vq::Vq16Config& config, VqProgram* p, bool keep_exact)
      : config_(config), p_(*p), keep_exact_(keep_exact) {}

  absl::Status Build(const VqDecoderWeights& w) {
    const int32_t g = config_.token_grid();
    p_.cells_ = g * g;
    p_.image_size_ = config_.image_size;
    p_.pixels_ = int64_t{config_.image_size} * config_.image_size;
    p_.num_groups_ = config_.num_groups;

    // The codebook through post_quant_conv (1x1, per position linear): one table row per id.
    const Conv2dWeights& pq = w.post_quant_conv;
    if (pq.kernel != 1 || pq.cin != w.embed_dim)
      return Unsupported("post_quant_conv", "is not a 1x1 conv of the codebook");
    ARGEN_RETURN_IF(Channels(pq.cout, "post_quant_conv output"));
    std::vector<float> table(static_cast<size_t>(w.codebook_size) * pq.cout);
    for (int32_t id = 0; id < w.codebook_size; ++id) {
      const float* row = w.codebook.data() + static_cast<size_t>(id) * w.embed_dim;
      for (int32_t o = 0; o < pq.cout; ++o) {
        double acc = pq.bias[o];
        for (int32_t e = 0; e < pq.cin; ++e) acc += double{pq.weight[static_cast<size_t>(o) * pq.cin + e]} * row[e];
        table[static_cast<size_t>(id) * pq.cout + o] = static_cast<float>(acc);
      }
    }
    p_.table_ = AddHalf(table);
    p_.codebook_rows_ = w.codebook_size;
    p_.table_dim_ = pq.cout;
    VqOp lookup;
    lookup.kind = VqOpKind::kLookup;
    lookup.what = "codebook lookup";
    lookup.out = a_;
    lookup.cout = pq.cout;
    lookup.h = lookup.w = g;
    Track(pq.cout, g);
    p_.ops_.push_back(lookup);

    ARGEN_RETURN_IF(Conv3(w.conv_in, a_, x_, g, 0.0f, "conv_in"));
    pb_.assign(w.conv_in.bias.begin(), w.conv_in.bias.end());
    ARGEN_RETURN_IF(Res(w.mid_res0, g, "mid.0"));
    ARGEN_RETURN_IF(Attn(w.mid_attn, g, "mid.1"));
    ARGEN_RETURN_IF(Res(w.mid_res1, g, "mid.2"));
    int32_t side = g;
    for (const UpBlockWeights& block : w.blocks) {
      for (size_t j = 0; j < block.res.size(); ++j) {
        ARGEN_RETURN_IF(Res(block.res[j], side, "conv_blocks res"));
        if (!block.attn.empty()) ARGEN_RETURN_IF(Attn(block.attn[j], side, "conv_blocks attn"));
      }
      if (block.upsample) {
        VqOp up;
        up.kind = VqOpKind::kUpsample;
        up.what = "upsample";
        up.in = x_;
        up.out = a_;
        up.cin = up.cout = static_cast<int32_t>(pb_.size());
        up.h = up.w = side;
        up.bias = AddFloat(pb_);
        p_.ops_.push_back(up);
        side *= 2;
        Track(up.cin, side);
        ARGEN_RETURN_IF(Conv3(*block.upsample, a_, x_, side, 0.0f, "upsample conv"));
        pb_.assign(block.upsample->bias.begin(), block.upsample->bias.end());
      }
    }
    if (side != config_.image_size) return Unsupported("decoder", "does not end at image_size");
    ARGEN_RETURN_IF(GroupNorm(w.norm_out, x_, a_, side, /*swish=*/true, &pb_, "norm_out"));

    const Conv2dWeights& co = w.conv_out;
    if (co.kernel != 3 || co.cout != 3) return Unsupported("conv_out", "is not a 3x3 conv to 3 channels");
    ARGEN_RETURN_IF(Channels(co.cin, "conv_out input"));
    if (co.cin > kVqNhwcMaxConvOutChannels) {
      return Unsupported("conv_out", absl::StrCat("has ", co.cin, " input channels, the kernel takes at most ",
                                                  kVqNhwcMaxConvOutChannels));
    }
    std::vector<float> wt(static_cast<size_t>(27) * co.cin);
    for (int32_t o = 0; o < 3; ++o)
      for (int32_t i = 0; i < co.cin; ++i)
        for (int32_t tap = 0; tap < 9; ++tap)
          wt[(static_cast<size_t>(tap) * 3 + o) * co.cin + i] =
              co.weight[(static_cast<size_t>(o) * co.cin + i) * 9 + tap];
    VqOp out;
    out.kind = VqOpKind::kConvOut;
    out.what = "conv_out";
    out.in = a_;
    out.cin = co.cin;
    out.cout = 3;
    out.h = out.w = side;
    out.weight = AddFloat(wt);
    out.bias = AddFloat(co.bias);
    p_.ops_.push_back(out);
    return absl::OkStatus();
  }

 private:
  static absl::Status Unsupported(const std::string& layer, const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("bf16 VQ path: ", layer, " ", why));
  }
  static absl::Status Channels(int32_t c, const std::string& layer) {
    if (c > 0 && c % 8 == 0) return absl::OkStatus();
    return Unsupported(layer, absl::StrCat("has ", c, " channels, not a multiple of 8 (16-byte bf16 vectors)"));
  }

  void Track(int32_t channels, int32_t side) {
    p_.act_elems_ = std::max(p_.act_elems_, int64_t{channels} * side * side);
  }

  int64_t AddHalf(const std::vector<float>& v) {
    const int64_t off = static_cast<int64_t>(p_.half_.size());
    for (float x : v) p_.half_.push_back(FloatToBf16Bits(x));
    p_.half_.resize((p_.half_.size() + 127) / 128 * 128, 0);  // 256-byte aligned tensors
    if (keep_exact_) {
      p_.half_exact_.insert(p_.half_exact_.end(), v.begin(), v.end());
      p_.half_exact_.resize(p_.half_.size(), 0.0f);
    }
    return off;
  }
  template <typename T>
  int64_t AddFloat(const std::vector<T>& v) {
    const int64_t off = static_cast<int64_t>(p_.float_.size());
    for (T x : v) p_.float_.push_back(static_cast<float>(x));
    p_.float_.resize((p_.float_.size() + 63) / 64 * 64, 0.0f);
    return off;
  }

  // PyTorch [cout][cin][3][3] -> KRSC [cout][3][3][cin].
  static std::vector<float> Krsc(const Conv2dWeights& c) {
    std::vector<float> out(c.weight.size());
    for (int32_t o = 0; o < c.cout; ++o)
      for (int32_t i = 0; i < c.cin; ++i)
        for (int32_t tap = 0; tap < 9; ++tap)
          out[(static_cast<size_t>(o) * 9 + tap) * c.cin + i] =
              c.weight[(static_cast<size_t>(o) * c.cin + i) * 9 + tap];
    return out;
  }

  absl::Status Conv3(const Conv2dWeights& c, int in, int out, int32_t side, float beta, const std::string& what) {
    if (c.kernel != 3) return Unsupported(what, "is not a 3x3 conv");
    ARGEN_RETURN_IF(Channels(c.cin, what + " input"));
    ARGEN_RETURN_IF(Channels(c.cout, what + " output"));
    VqOp op;
    op.kind = VqOpKind::kConv3x3;
    op.what = what;
    op.in = in;
    op.out = out;
    op.cin = c.cin;
    op.cout = c.cout;
    op.h = op.w = side;
    op.weight = AddHalf(Krsc(c));
    op.accumulate = beta;
    const VqConvShape shape{c.cin, c.cout, side, side, op.weight};
    auto it = std::find(p_.shapes_.begin(), p_.shapes_.end(), shape);
    op.shape = static_cast<int32_t>(it - p_.shapes_.begin());
    if (it == p_.shapes_.end()) p_.shapes_.push_back(shape);
    Track(c.cin, side);
    Track(c.cout, side);
    p_.ops_.push_back(op);
    return absl::OkStatus();
  }

  absl::Status Linear(const Conv2dWeights& c, int in, int out, int32_t side, float beta, const std::string& what) {
    if (c.kernel != 1) return Unsupported(what, "is not a 1x1 conv");
    ARGEN_RETURN_IF(Channels(c.cin, what + " input"));
    ARGEN_RETURN_IF(Channels(c.cout, what + " output"));
    VqOp op;
    op.kind = VqOpKind::kLinear;
    op.what = what;
    op.in = in;
    op.out = out;
    op.cin = c.cin;
    op.cout = c.cout;
    op.h = op.w = side;
    op.weight = AddHalf(c.weight);  // [cout][cin][1][1] = [cout][cin]
    op.accumulate = beta;
    Track(c.cin, side);
    Track(c.cout, side);
    p_.ops_.push_back(op);
    return absl::OkStatus();
  }

  absl::Status GroupNorm(const GroupNormWeights& n, int in, int out, int32_t side, bool swish,
                         const std::vector<double>* in_bias, const std::string& what) {
    ARGEN_RETURN_IF(Channels(n.channels, what));
    if (n.channels > kVqNhwcMaxGroupNormChannels) {
      return Unsupported(what, absl::StrCat("has ", n.channels, " channels, the GroupNorm kernel takes at most ",
                                            kVqNhwcMaxGroupNormChannels));
    }
    if (config_.num_groups <= 0 || n.channels % config_.num_groups != 0)
      return Unsupported(what, "channels are not a multiple of num_groups");
    VqOp op;
    op.kind = VqOpKind::kGroupNorm;
    op.what = what;
    op.in = in;
    op.out = out;
    op.cin = op.cout = n.channels;
    op.h = op.w = side;
    op.gamma = AddFloat(n.gamma);
    op.beta = AddFloat(n.beta);
    op.swish = swish;
    if (in_bias != nullptr) op.bias = AddFloat(*in_bias);
    Track(n.channels, side);
    p_.ops_.push_back(op);
    return absl::OkStatus();
  }

  absl::Status Res(const ResnetBlockWeights& r, int32_t side, const std::string& what) {
    if (static_cast<int32_t>(pb_.size()) != r.conv1.cin) return Unsupported(what, "input width mismatch");
    ARGEN_RETURN_IF(GroupNorm(r.norm1, x_, a_, side, true, &pb_, what + " norm1"));
    ARGEN_RETURN_IF(Conv3(r.conv1, a_, b_, side, 0.0f, what + " conv1"));
    const std::vector<double> pb1(r.conv1.bias.begin(), r.conv1.bias.end());
    ARGEN_RETURN_IF(GroupNorm(r.norm2, b_, a_, side, true, &pb1, what + " norm2"));
    if (!r.nin_shortcut) {
      ARGEN_RETURN_IF(Conv3(r.conv2, a_, x_, side, 1.0f, what + " conv2"));
      for (int32_t o = 0; o < r.conv2.cout; ++o) pb_[o] += r.conv2.bias[o];
      return absl::OkStatus();
    }
    const Conv2dWeights& nin = *r.nin_shortcut;
    ARGEN_RETURN_IF(Conv3(r.conv2, a_, b_, side, 0.0f, what + " conv2"));
    ARGEN_RETURN_IF(Linear(nin, x_, b_, side, 1.0f, what + " nin_shortcut"));
    // nin(x + pb) = nin(x) + W pb: the 1x1 shortcut carries the pending bias exactly.
    std::vector<double> next(nin.cout);
    for (int32_t o = 0; o < nin.cout; ++o) {
      double acc = double{r.conv2.bias[o]} + nin.bias[o];
      for (int32_t i = 0; i < nin.cin; ++i) acc += double{nin.weight[static_cast<size_t>(o) * nin.cin + i]} * pb_[i];
      next[o] = acc;
    }
    pb_ = std::move(next);
    std::swap(x_, b_);
    return absl::OkStatus();
  }

  absl::Status Attn(const AttnBlockWeights& at, int32_t side, const std::string& what) {
    const int32_t c = at.q.cout;
    for (const Conv2dWeights* w : {&at.q, &at.k, &at.v, &at.proj_out}) {
      if (w->kernel != 1 || w->cin != c || w->cout != c)
        return Unsupported(what, "q/k/v/proj_out are not c x c 1x1 convs");
    }
    if (static_cast<int32_t>(pb_.size()) != c) return Unsupported(what, "input width mismatch");
    ARGEN_RETURN_IF(GroupNorm(at.norm, x_, a_, side, false, &pb_, what + " norm"));
    std::vector<float> wqkv, bqkv;
    for (const Conv2dWeights* w : {&at.q, &at.k, &at.v}) {
      wqkv.insert(wqkv.end(), w->weight.begin(), w->weight.end());
      bqkv.insert(bqkv.end(), w->bias.begin(), w->bias.end());
    }
    VqOp op;
    op.kind = VqOpKind::kAttention;
    op.what = what;
    op.in = a_;
    op.tmp = b_;
    op.out = x_;
    op.cin = op.cout = c;
    op.h = op.w = side;
    op.weight = AddHalf(wqkv);
    op.weight2 = AddHalf(at.proj_out.weight);
    op.bias = AddFloat(bqkv);
    op.accumulate = 1.0f;
    const int64_t cells = int64_t{side} * side;
    p_.qkv_elems_ = std::max(p_.qkv_elems_, 3 * c * cells);
    p_.score_elems_ = std::max(p_.score_elems_, cells * cells);
    Track(c, side);
    p_.ops_.push_back(op);
    for (int32_t o = 0; o < c; ++o) pb_[o] += at.proj_out.bias[o];
    return absl::OkStatus();
  }
  const vq::Vq16Config& config_;
  VqProgram& p_;
  bool keep_exact_;
  int x_ = 0, a_ = 1, b_ = 2;  // buffer of the residual stream and the two temporaries
  std::vector<double> pb_;     // pending bias of x_
};

absl::StatusOr<VqProgram> VqProgram::Build(const VqDecoderWeights& weights, const vq::Vq16Config& config,
                                           bool keep_exact_weights) {
  if (absl::Status s = ValidateVqConfig(config); !s.ok()) return s;
  VqProgram p;
  VqProgramBuilder b(config, &p, keep_exact_weights);
  if (absl::Status s = b.Build(weights); !s.ok()) return s;
  return p;
}

namespace {

absl::Status Named(absl::Status s, const std::string& what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::Status VqProgram::Run(VqPrimitives& prims, int32_t n, int64_t token_offset, int64_t out_image,
                            int64_t plane_stride, const std::function<void(size_t)>& on_op) const {
  auto half = [](int64_t off) { return VqPtr{VqSpace::kHalfWeights, off}; };
  auto flt = [](int64_t off) { return off < 0 ? VqPtr{} : VqPtr{VqSpace::kFloatWeights, off}; };
  for (size_t index = 0; index < ops_.size(); ++index) {
    const VqOp& op = ops_[index];
    if (on_op) on_op(index);
    const int64_t hw = int64_t{op.h} * op.w;
    const int64_t rows = hw * n;
    absl::Status s;
    switch (op.kind) {
      case VqOpKind::kLookup:
        s = prims.Lookup(half(table_), codebook_rows_, table_dim_, token_offset, int64_t{n} * cells_, ActPtr(op.out));
        break;
      case VqOpKind::kConv3x3:
        s = prims.Conv3x3(op.shape, shapes_[op.shape], n, ActPtr(op.in), half(op.weight), ActPtr(op.out),
                          op.accumulate);
        break;
      case VqOpKind::kLinear: {
        // Row-major out[rows][cout] = in[rows][cin] W^T; column-major: out^T = W^T-view^T * in^T.
        VqGemm g;
        g.trans_a = true;
        g.m = op.cout;
        g.n = static_cast<int32_t>(rows);
        g.k = op.cin;
        g.a = half(op.weight);
        g.lda = op.cin;
        g.b = ActPtr(op.in);
        g.ldb = op.cin;
        g.c = ActPtr(op.out);
        g.ldc = op.cout;
        g.beta = op.accumulate;
        g.what = op.what.c_str();
        s = prims.Gemm(g);
        break;
      }
      case VqOpKind::kGroupNorm: {
        VqGroupNormArgs a;
        a.in = ActPtr(op.in);
        a.in_bias = flt(op.bias);
        a.gamma = flt(op.gamma);
        a.beta = flt(op.beta);
        a.out = ActPtr(op.out);
        a.images = n;
        a.channels = op.cin;
        a.groups = num_groups_;
        a.hw = hw;
        a.eps = kGroupNormEps;
        a.swish = op.swish;
        s = prims.GroupNorm(a);
        break;
      }
      case VqOpKind::kUpsample:
        s = prims.Upsample2x(ActPtr(op.in), flt(op.bias), n, op.h, op.w, op.cin, ActPtr(op.out));
        break;
      case VqOpKind::kAttention: {
        const int32_t c = op.cin;
        const int32_t cells = static_cast<int32_t>(hw);
        const VqPtr qkv{VqSpace::kQkv, 0};
        // q|k|v[rows][3c] = in[rows][c] Wqkv^T, then + bias.
        VqGemm g;
        g.trans_a = true;
        g.m = 3 * c;
        g.n = static_cast<int32_t>(rows);
        g.k = c;
        g.a = half(op.weight);
        g.lda = c;
        g.b = ActPtr(op.in);
        g.ldb = c;
        g.c = qkv;
        g.ldc = 3 * c;
        g.what = "attention q|k|v";
        s = prims.Gemm(g);
        if (s.ok()) s = prims.AddBias(qkv, flt(op.bias), rows, 3 * c);
        // Per image, row-major scores[i][j] = scale * q_i . k_j; column-major S' = K * Q^T.
        VqGemm sc;
        sc.trans_a = true;
        sc.m = cells;
        sc.n = cells;
        sc.k = c;
        sc.alpha = 1.0f / std::sqrt(static_cast<float>(c));
        sc.a = {VqSpace::kQkv, c};
        sc.lda = 3 * c;
        sc.stride_a = int64_t{cells} * 3 * c;
        sc.b = qkv;
        sc.ldb = 3 * c;
        sc.stride_b = int64_t{cells} * 3 * c;
        sc.c = {VqSpace::kScores, 0};
        sc.ldc = cells;
        sc.stride_c = int64_t{cells} * cells;
        sc.batch = n;
        sc.what = "attention scores";
        if (s.ok()) s = prims.Gemm(sc);
        if (s.ok()) s = prims.SoftmaxToBf16({VqSpace::kScores, 0}, rows, cells, {VqSpace::kProbs, 0});
        // out[i][c] = sum_j p[i][j] v_j[c]: column-major O' [c x cells] = V' [c x cells] * P' [cells x cells].
        VqGemm va;
        va.m = c;
        va.n = cells;
        va.k = cells;
        va.a = {VqSpace::kQkv, 2 * c};
        va.lda = 3 * c;
        va.stride_a = int64_t{cells} * 3 * c;
        va.b = {VqSpace::kProbs, 0};
        va.ldb = cells;
        va.stride_b = int64_t{cells} * cells;
        va.c = ActPtr(op.tmp);
        va.ldc = c;
        va.stride_c = int64_t{cells} * c;
        va.batch = n;
        va.what = "attention values";
        if (s.ok()) s = prims.Gemm(va);
        // x += out W_proj^T (the residual; proj_out's bias goes to the pending bias).
        VqGemm pr = g;
        pr.m = c;
        pr.a = half(op.weight2);
        pr.b = ActPtr(op.tmp);
        pr.c = ActPtr(op.out);
        pr.ldc = c;
        pr.beta = op.accumulate;
        pr.what = "attention proj_out";
        if (s.ok()) s = prims.Gemm(pr);
        break;
      }
      case VqOpKind::kConvOut:
        s = prims.ConvOut(ActPtr(op.in), flt(op.weight), flt(op.bias), n, op.h, op.w, op.cin,
                          {VqSpace::kOutput, out_image * pixels_}, plane_stride);
        break;
    }
    if (!s.ok()) return Named(std::move(s), op.what);
  }
  if (on_op) on_op(ops_.size());
  return absl::OkStatus();
}

}  // namespace argen::vq
