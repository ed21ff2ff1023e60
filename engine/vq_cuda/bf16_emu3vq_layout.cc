#include "engine/vq_cuda/bf16_emu3vq_layout.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/vq_cuda/vq_program.h"

// lhs = the value of a StatusOr, or return its status.
#define ARGEN_ASSIGN(lhs, expr)                   \
  do {                                            \
    auto argen_v_ = (expr);                       \
    if (!argen_v_.ok()) return argen_v_.status(); \
    lhs = *std::move(argen_v_);                   \
  } while (0)

namespace argen::vq {
namespace {

absl::Status Unsupported(const std::string& layer, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("bf16 Emu3 path: ", layer, " ", why));
}

// Host blobs with 256-byte aligned tensors (as VqProgram's).
struct HostBlobs {
  std::vector<uint16_t> half;
  std::vector<float> flt;
  int64_t Half(const std::vector<float>& v) {
    const int64_t off = static_cast<int64_t>(half.size());
    for (float x : v) half.push_back(FloatToBf16Bits(x));
    half.resize((half.size() + 127) / 128 * 128, 0);
    return off;
  }
  int64_t Float(const std::vector<float>& v) {
    const int64_t off = static_cast<int64_t>(flt.size());
    flt.insert(flt.end(), v.begin(), v.end());
    flt.resize((flt.size() + 63) / 64 * 64, 0.0f);
    return off;
  }
};

// A channel count the NHWC kernels take.
absl::Status Channels(int32_t c, const std::string& layer) {
  if (c > 0 && c % 8 == 0) return absl::OkStatus();
  return Unsupported(layer, absl::StrCat("has ", c, " channels, not a multiple of 8 (16-byte bf16 vectors)"));
}

// A conv's weights padded with zeros to cin_p inputs and cout_p outputs.
absl::StatusOr<Bf16Emu3Conv> LayOutConv(HostBlobs& blobs, const Conv2dWeights& c, int32_t cin_p, int32_t cout_p,
                                        const std::string& what) {
  if (c.kernel != 1 && c.kernel != 3) return Unsupported(what, "is neither a 1x1 nor a 3x3 conv");
  if (cin_p < c.cin || cout_p < c.cout) return absl::InternalError(absl::StrCat(what, ": padding below the size"));
  if (absl::Status s = Channels(cin_p, what + " input"); !s.ok()) return s;
  if (absl::Status s = Channels(cout_p, what + " output"); !s.ok()) return s;
  const int32_t taps = c.kernel * c.kernel;
  std::vector<float> w(static_cast<size_t>(cout_p) * taps * cin_p, 0.0f);
  for (int32_t o = 0; o < c.cout; ++o)
    for (int32_t i = 0; i < c.cin; ++i)
      for (int32_t tap = 0; tap < taps; ++tap)
        w[(static_cast<size_t>(o) * taps + tap) * cin_p + i] =
            c.weight[(static_cast<size_t>(o) * c.cin + i) * taps + tap];
  std::vector<float> b(cout_p, 0.0f);
  std::copy(c.bias.begin(), c.bias.end(), b.begin());
  Bf16Emu3Conv h;
  h.cin = cin_p;
  h.cout = cout_p;
  h.kernel = c.kernel;
  h.w = blobs.Half(w);
  h.b = blobs.Float(b);
  return h;
}

std::vector<float> Padded(const std::vector<float>& v, int32_t n) {
  std::vector<float> out(n, 0.0f);
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

// Lays every weight of the network out into `m` (the checks name the layer).
class LayoutBuilder {
 public:
  LayoutBuilder(const emu3vq::Emu3VqConfig& config, Bf16Emu3VqLayout& m, HostBlobs& blobs)
      : config_(config), m_(m), b_(blobs) {}

  absl::StatusOr<Bf16Emu3SpatialNorm> Norm(const emu3vq::SpatialNormWeights& n, const std::string& what) {
    const int32_t c = n.norm.channels;
    if (absl::Status s = Channels(c, what); !s.ok()) return s;
    if (c > kVqNhwcMaxGroupNormChannels) {
      return Unsupported(
          what, absl::StrCat("has ", c, " channels, the GroupNorm kernel takes at most ", kVqNhwcMaxGroupNormChannels));
    }
    if (c % emu3vq::kGroupNormGroups != 0) return Unsupported(what, "channels are not a multiple of 32 groups");
    for (const Conv2dWeights* cw : {&n.conv_y, &n.conv_b}) {
      if (cw->kernel != 1 || cw->cout != c || cw->cin != config_.embed_dim)
        return Unsupported(what, "conv_y / conv_b are not 1x1 embed_dim -> channels convs");
    }
    Bf16Emu3SpatialNorm h;
    h.channels = c;
    h.gamma = b_.Float(n.norm.gamma);
    h.beta = b_.Float(n.norm.beta);
    std::vector<float> w(static_cast<size_t>(2) * c * m_.zp, 0.0f), bias(2 * c);
    for (int32_t half = 0; half < 2; ++half) {
      const Conv2dWeights& cw = half == 0 ? n.conv_y : n.conv_b;
      for (int32_t o = 0; o < c; ++o) {
        for (int32_t i = 0; i < cw.cin; ++i)
          w[(static_cast<size_t>(half) * c + o) * m_.zp + i] = cw.weight[static_cast<size_t>(o) * cw.cin + i];
        bias[half * c + o] = cw.bias[o];
      }
    }
    h.cond_w = b_.Half(w);
    h.cond_b = b_.Float(bias);
    return h;
  }

  absl::StatusOr<Bf16Emu3Res> Res(const emu3vq::SpatialResnetWeights& r, const std::string& what) {
    Bf16Emu3Res h;
    ARGEN_ASSIGN(h.norm1, Norm(r.norm1, what + " norm1"));
    ARGEN_ASSIGN(h.conv1, LayOutConv(b_, r.conv1, r.conv1.cin, r.conv1.cout, what + " conv1"));
    ARGEN_ASSIGN(h.norm2, Norm(r.norm2, what + " norm2"));
    ARGEN_ASSIGN(h.conv2, LayOutConv(b_, r.conv2, r.conv2.cin, r.conv2.cout, what + " conv2"));
    if (r.conv1.kernel != 3 || r.conv2.kernel != 3) return Unsupported(what, "convs are not 3x3");
    std::vector<float> out_bias(r.conv2.bias);
    if (r.nin_shortcut) {
      h.has_nin = true;
      ARGEN_ASSIGN(h.nin,
                   LayOutConv(b_, *r.nin_shortcut, r.nin_shortcut->cin, r.nin_shortcut->cout, what + " nin_shortcut"));
      if (r.nin_shortcut->kernel != 1) return Unsupported(what, "nin_shortcut is not a 1x1 conv");
      for (size_t o = 0; o < out_bias.size(); ++o) out_bias[o] += r.nin_shortcut->bias[o];
    }
    h.out_bias = b_.Float(out_bias);
    return h;
  }

  absl::StatusOr<Bf16Emu3Attn> Attn(const emu3vq::SpatialAttnWeights& a, const std::string& what) {
    Bf16Emu3Attn h;
    const int32_t c = a.q.cout;
    for (const Conv2dWeights* w : {&a.q, &a.k, &a.v, &a.proj_out}) {
      if (w->kernel != 1 || w->cin != c || w->cout != c)
        return Unsupported(what, "q/k/v/proj_out are not c x c 1x1 convs");
    }
    if (absl::Status s = Channels(c, what); !s.ok()) return s;
    ARGEN_ASSIGN(h.norm, Norm(a.norm, what + " norm"));
    h.channels = c;
    std::vector<float> wqkv, bqkv;
    for (const Conv2dWeights* w : {&a.q, &a.k, &a.v}) {
      wqkv.insert(wqkv.end(), w->weight.begin(), w->weight.end());
      bqkv.insert(bqkv.end(), w->bias.begin(), w->bias.end());
    }
    h.wqkv = b_.Half(wqkv);
    h.bqkv = b_.Float(bqkv);
    h.wproj = b_.Half(a.proj_out.weight);
    h.bproj = b_.Float(a.proj_out.bias);
    return h;
  }

  absl::Status All(const emu3vq::Emu3VqWeights& w) {
    const emu3vq::Emu3VqConfig& cfg = config_;
    const int32_t zp = m_.zp;
    // The condition's table (the codebook) and the latents' (post_quant_conv of it, in double), padded to zp.
    const Conv2dWeights& pq = w.post_quant_conv;
    if (pq.kernel != 1 || pq.cin != cfg.embed_dim || pq.cout != cfg.z_channels)
      return Unsupported("post_quant_conv", "is not a 1x1 embed_dim -> z_channels conv");
    std::vector<float> cond(static_cast<size_t>(cfg.codebook_size) * zp, 0.0f), latent(cond.size(), 0.0f);
    for (int32_t id = 0; id < cfg.codebook_size; ++id) {
      const float* row = w.codebook.data() + static_cast<size_t>(id) * cfg.embed_dim;
      for (int32_t e = 0; e < cfg.embed_dim; ++e) cond[static_cast<size_t>(id) * zp + e] = row[e];
      for (int32_t o = 0; o < pq.cout; ++o) {
        double acc = pq.bias[o];
        for (int32_t e = 0; e < pq.cin; ++e) acc += double{pq.weight[static_cast<size_t>(o) * pq.cin + e]} * row[e];
        latent[static_cast<size_t>(id) * zp + o] = static_cast<float>(acc);
      }
    }
    m_.cond_table = b_.Half(cond);
    m_.latent_table = b_.Half(latent);
    for (const emu3vq::TemporalResnetWeights& t : w.time_res_stack) {
      Bf16Emu3TemporalRes h;
      h.norm1 = {b_.Float(Padded(t.norm1.scale, zp)), b_.Float(Padded(t.norm1.shift, zp))};
      ARGEN_ASSIGN(h.conv1, LayOutConv(b_, t.conv1, zp, zp, "temporal conv1"));
      // norm2(conv1 + b1) = scale * conv1 + (shift + scale * b1): conv1's bias folded.
      std::vector<float> shift2 = Padded(t.norm2.shift, zp);
      for (size_t c = 0; c < t.norm2.shift.size() && c < t.conv1.bias.size(); ++c)
        shift2[c] = static_cast<float>(double{t.norm2.shift[c]} + double{t.norm2.scale[c]} * t.conv1.bias[c]);
      h.norm2 = {b_.Float(Padded(t.norm2.scale, zp)), b_.Float(shift2)};
      ARGEN_ASSIGN(h.conv2, LayOutConv(b_, t.conv2, zp, zp, "temporal conv2"));
      if (t.conv1.kernel != 3 || t.conv2.kernel != 3) return Unsupported("temporal stack", "convs are not 3x3");
      m_.time_res.push_back(h);
    }
    for (const Conv2dWeights& c : w.time_conv) {
      Bf16Emu3Conv h;
      ARGEN_ASSIGN(h, LayOutConv(b_, c, zp, zp, "temporal upsample conv"));
      if (c.kernel != 3) return Unsupported("temporal upsample conv", "is not 3x3");
      m_.time_conv.push_back(h);
    }
    ARGEN_ASSIGN(m_.conv_in, LayOutConv(b_, w.conv_in, zp, w.conv_in.cout, "conv_in"));
    if (w.conv_in.kernel != 3) return Unsupported("conv_in", "is not 3x3");
    ARGEN_ASSIGN(m_.mid_block_1, Res(w.mid_block_1, "mid.block_1"));
    ARGEN_ASSIGN(m_.mid_attn, Attn(w.mid_attn_1, "mid.attn_1"));
    ARGEN_ASSIGN(m_.mid_block_2, Res(w.mid_block_2, "mid.block_2"));
    for (size_t level = 0; level < w.up.size(); ++level) {
      const emu3vq::UpLevelWeights& l = w.up[level];
      const std::string where = absl::StrCat("up.", level);
      Bf16Emu3Level h;
      for (const emu3vq::SpatialResnetWeights& r : l.block) {
        Bf16Emu3Res res;
        ARGEN_ASSIGN(res, Res(r, where + " block"));
        h.block.push_back(res);
      }
      for (const emu3vq::SpatialAttnWeights& a : l.attn) {
        Bf16Emu3Attn at;
        ARGEN_ASSIGN(at, Attn(a, where + " attn"));
        h.attn.push_back(at);
      }
      if (l.upsample) {
        h.has_upsample = true;
        ARGEN_ASSIGN(h.upsample, LayOutConv(b_, *l.upsample, l.upsample->cin, l.upsample->cout, where + " upsample"));
        if (l.upsample->kernel != 3 || l.upsample->cin != l.upsample->cout)
          return Unsupported(where + " upsample", "is not a c -> c 3x3 conv");
      }
      m_.up.push_back(std::move(h));
    }
    ARGEN_ASSIGN(m_.norm_out, Norm(w.norm_out, "norm_out"));
    const Conv2dWeights& co = w.conv_out;
    if (co.kernel != 3 || co.cout != 3) return Unsupported("conv_out", "is not a 3x3 conv to 3 channels");
    if (absl::Status s = Channels(co.cin, "conv_out input"); !s.ok()) return s;
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
    m_.conv_out_cin = co.cin;
    m_.conv_out_w = b_.Float(wt);
    m_.conv_out_b = b_.Float(co.bias);
    return absl::OkStatus();
  }

 private:
  const emu3vq::Emu3VqConfig& config_;
  Bf16Emu3VqLayout& m_;
  HostBlobs& b_;
};

}  // namespace

absl::StatusOr<Bf16Emu3VqLayout> LayOutBf16Emu3Vq(const emu3vq::Emu3VqWeights& weights,
                                                  const emu3vq::Emu3VqConfig& config) {
  if (absl::Status s = emu3vq::ValidateEmu3VqConfig(config, "Emu3 vision tokenizer config"); !s.ok()) return s;
  Bf16Emu3VqLayout layout;
  layout.zp = (config.z_channels + 7) / 8 * 8;
  HostBlobs blobs;
  if (absl::Status s = LayoutBuilder(config, layout, blobs).All(weights); !s.ok()) return s;
  layout.half_blob = std::move(blobs.half);
  layout.float_blob = std::move(blobs.flt);
  return layout;
}

}  // namespace argen::vq
