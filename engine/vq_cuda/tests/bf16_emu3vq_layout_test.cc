// Emu3's bf16 weight layout (bf16_emu3vq_layout.h) on the host, no GPU (runs
// in CI): on the tiny random tokenizer in both namings, the latent channels
// padded with zeros, the codebook and post_quant_conv folded into the two
// tables, KRSC filters, the temporal norm2 fold, the fused SpatialNorm and
// attention weights, the output biases; a conv_out wider than the kernel
// takes is FailedPrecondition naming conv_out.
#include "engine/vq_cuda/bf16_emu3vq_layout.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/vq_cuda/tests/emu3vq_test_util.h"
#include "gtest/gtest.h"

namespace argen::vq {
namespace {

using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqNaming;
using emu3vq::Emu3VqWeights;
using testing::LoadTiny;
using testing::RandomSource;
using testing::Tiny;

float Half(const Bf16Emu3VqLayout& l, int64_t offset) { return Bf16BitsToFloat(l.half_blob.at(offset)); }
float Float(const Bf16Emu3VqLayout& l, int64_t offset) { return l.float_blob.at(offset); }
float Bf16(float x) { return Bf16BitsToFloat(FloatToBf16Bits(x)); }

class Bf16Emu3VqLayoutTest : public ::testing::TestWithParam<Emu3VqNaming> {};

TEST_P(Bf16Emu3VqLayoutTest, PadsFoldsAndRelaysTheTinyTokenizer) {
  const Tiny t = LoadTiny(GetParam());
  ASSERT_FALSE(t.weights.codebook.empty());
  const Emu3VqConfig& c = t.config;
  const Emu3VqWeights& w = t.weights;
  absl::StatusOr<Bf16Emu3VqLayout> got = LayOutBf16Emu3Vq(w, c);
  ASSERT_TRUE(got.ok()) << got.status();
  const Bf16Emu3VqLayout& l = *got;
  ASSERT_EQ(c.z_channels, 4);
  ASSERT_EQ(l.zp, 8);

  // The tables: the codebook, and post_quant_conv of it (in double, then bf16); pad channels zero.
  const Conv2dWeights& pq = w.post_quant_conv;
  for (int32_t id = 0; id < c.codebook_size; ++id) {
    for (int32_t ch = 0; ch < l.zp; ++ch) {
      const int64_t at = static_cast<int64_t>(id) * l.zp + ch;
      if (ch >= c.z_channels) {
        ASSERT_EQ(Half(l, l.cond_table + at), 0.0f) << id << " " << ch;
        ASSERT_EQ(Half(l, l.latent_table + at), 0.0f) << id << " " << ch;
        continue;
      }
      ASSERT_EQ(Half(l, l.cond_table + at), Bf16(w.codebook[static_cast<size_t>(id) * c.embed_dim + ch]));
      double acc = pq.bias[ch];
      for (int32_t e = 0; e < pq.cin; ++e)
        acc +=
            double{pq.weight[static_cast<size_t>(ch) * pq.cin + e]} * w.codebook[static_cast<size_t>(id) * pq.cin + e];
      ASSERT_EQ(Half(l, l.latent_table + at), Bf16(static_cast<float>(acc))) << id << " " << ch;
    }
  }

  // The temporal stack: padded 8 -> 8 convs (KRSC), norm2's shift with conv1's bias folded in.
  ASSERT_EQ(l.time_res.size(), w.time_res_stack.size());
  ASSERT_FALSE(l.time_res.empty());
  const Bf16Emu3TemporalRes& tr = l.time_res[0];
  const emu3vq::TemporalResnetWeights& tw = w.time_res_stack[0];
  EXPECT_EQ(tr.conv1.cin, 8);
  EXPECT_EQ(tr.conv1.cout, 8);
  for (int32_t o = 0; o < 8; ++o)
    for (int32_t tap = 0; tap < 9; ++tap)
      for (int32_t i = 0; i < 8; ++i) {
        const float want = o < 4 && i < 4 ? Bf16(tw.conv1.weight[(static_cast<size_t>(o) * 4 + i) * 9 + tap]) : 0.0f;
        ASSERT_EQ(Half(l, tr.conv1.w + (static_cast<int64_t>(o) * 9 + tap) * 8 + i), want)
            << o << " " << tap << " " << i;
      }
  for (int32_t ch = 0; ch < 8; ++ch) {
    const float want =
        ch < 4 ? static_cast<float>(double{tw.norm2.shift[ch]} + double{tw.norm2.scale[ch]} * tw.conv1.bias[ch]) : 0.0f;
    EXPECT_EQ(Float(l, tr.norm2.shift + ch), want) << ch;
    EXPECT_EQ(Float(l, tr.norm2.scale + ch), ch < 4 ? tw.norm2.scale[ch] : 0.0f) << ch;
    EXPECT_EQ(Float(l, tr.conv1.b + ch), ch < 4 ? tw.conv1.bias[ch] : 0.0f) << ch;
  }
  EXPECT_EQ(l.time_conv.size(), w.time_conv.size());
  EXPECT_EQ(l.conv_in.cin, 8);
  EXPECT_EQ(l.conv_in.cout, w.conv_in.cout);

  // SpatialNorm: conv_y | conv_b fused [2c][zp] with zero pad inputs, biases [2c].
  const Bf16Emu3SpatialNorm& sn = l.mid_block_1.norm1;
  const emu3vq::SpatialNormWeights& sw = w.mid_block_1.norm1;
  ASSERT_EQ(sn.channels, sw.norm.channels);
  for (int32_t half = 0; half < 2; ++half) {
    const auto& cw = half == 0 ? sw.conv_y : sw.conv_b;
    for (int32_t o = 0; o < sn.channels; ++o) {
      for (int32_t i = 0; i < l.zp; ++i) {
        const float want = i < c.embed_dim ? Bf16(cw.weight[static_cast<size_t>(o) * c.embed_dim + i]) : 0.0f;
        ASSERT_EQ(Half(l, sn.cond_w + (static_cast<int64_t>(half) * sn.channels + o) * l.zp + i), want);
      }
      ASSERT_EQ(Float(l, sn.cond_b + half * sn.channels + o), cw.bias[o]);
    }
  }

  // Attention: q | k | v fused [3c][c]; the ResNets' output biases (conv2 + nin where there is one).
  const int32_t ac = l.mid_attn.channels;
  EXPECT_EQ(Half(l, l.mid_attn.wqkv + static_cast<int64_t>(ac) * ac + 5), Bf16(w.mid_attn_1.k.weight[5]));
  EXPECT_EQ(Float(l, l.mid_attn.bqkv + 2 * ac + 1), w.mid_attn_1.v.bias[1]);
  EXPECT_EQ(Float(l, l.mid_block_2.out_bias + 3), w.mid_block_2.conv2.bias[3]);
  bool saw_nin = false;
  for (size_t level = 0; level < l.up.size(); ++level) {
    for (size_t b = 0; b < l.up[level].block.size(); ++b) {
      const Bf16Emu3Res& r = l.up[level].block[b];
      const emu3vq::SpatialResnetWeights& rw = w.up[level].block[b];
      ASSERT_EQ(r.has_nin, rw.nin_shortcut.has_value());
      if (!r.has_nin) continue;
      saw_nin = true;
      EXPECT_EQ(Float(l, r.out_bias), rw.conv2.bias[0] + rw.nin_shortcut->bias[0]);
    }
  }
  EXPECT_TRUE(saw_nin) << "the tiny tokenizer changes channels between levels";
  EXPECT_EQ(l.conv_out_cin, w.conv_out.cin);
  // conv_out [9 taps][3][cin] floats: tap 4 (the centre) of output 2, input 1.
  EXPECT_EQ(Float(l, l.conv_out_w + (4 * 3 + 2) * l.conv_out_cin + 1),
            w.conv_out.weight[(static_cast<size_t>(2) * w.conv_out.cin + 1) * 9 + 4]);
  // Every tensor starts 256-byte aligned.
  EXPECT_EQ(l.latent_table % 128, 0);
  EXPECT_EQ(sn.cond_b % 64, 0);
}

INSTANTIATE_TEST_SUITE_P(Namings, Bf16Emu3VqLayoutTest,
                         ::testing::Values(Emu3VqNaming::kTransformers, Emu3VqNaming::kBaai),
                         [](const ::testing::TestParamInfo<Emu3VqNaming>& p) {
                           return p.param == Emu3VqNaming::kBaai ? std::string("Baai") : std::string("Transformers");
                         });

TEST(Bf16Emu3VqLayoutRefusalTest, ConvOutWiderThanTheKernelIsFailedPrecondition) {
  Emu3VqConfig config;
  config.codebook_size = 16;
  config.ch = 480;  // conv_out 480 -> 3 channels: the NHWC kernel takes 448
  config.ch_mult = {1};
  config.num_res_blocks = 1;
  config.attn_resolutions = {};
  ASSERT_TRUE(emu3vq::ValidateEmu3VqConfig(config, "wide").ok());
  absl::StatusOr<Emu3VqWeights> w = emu3vq::LoadEmu3VqWeights(RandomSource(7), config, Emu3VqNaming::kBaai, "");
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<Bf16Emu3VqLayout> l = LayOutBf16Emu3Vq(*w, config);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition) << l.status();
  EXPECT_NE(l.status().message().find("conv_out has 480 input channels"), std::string::npos) << l.status();
}

}  // namespace
}  // namespace argen::vq
