// Lumina-mGPT's size list and decode schedule (docs/lumina-mgpt.md): counts
// and ends of generate_crop_size_list per target, the exact token counts of
// each size, forced new lines at the row ends, unsupported sizes refused with
// the list, and the published 7B shapes.
#include <string>

#include "engine/families/lumina/lumina_schedule.h"
#include "engine/families/lumina/lumina_shapes.h"
#include "gtest/gtest.h"

namespace argen::lumina {
namespace {

using Size = std::pair<int32_t, int32_t>;

TEST(LuminaSizesTest, CropSizeListsMatchLuminaMgpt) {
  for (auto [target, count, first, last] : {std::tuple{512, 49, Size{1024, 256}, Size{256, 1024}},
                                            {768, 73, Size{1536, 384}, Size{384, 1536}},
                                            {1024, 97, Size{2048, 512}, Size{512, 2048}}}) {
    const std::vector<Size> sizes = CropSizeList(target);
    ASSERT_EQ(static_cast<int32_t>(sizes.size()), count) << target;
    EXPECT_EQ(sizes.front(), first);
    EXPECT_EQ(sizes.back(), last);
    int squares = 0;
    for (const Size& s : sizes) {
      EXPECT_EQ(s.first % 32, 0);
      EXPECT_LE((s.first / 32) * (s.second / 32), (target / 32) * (target / 32));
      EXPECT_LE(std::max(s.first, s.second), 4 * std::min(s.first, s.second));
      if (s.first == s.second) {
        ++squares;
        EXPECT_EQ(s.first, target);
      }
    }
    EXPECT_EQ(squares, 1);
  }
}

TEST(LuminaScheduleTest, TokenCountsOfThePapersSizes) {
  // (W, H) -> image tokens + new lines (the paper's count) and L_gen, docs/lumina-mgpt.md.
  for (auto [w, h, target, with_lines, l_gen] : {std::tuple{512, 512, 512, 1056, 1060},
                                                 {768, 768, 768, 2352, 2356},
                                                 {1024, 1024, 1024, 4160, 4164},
                                                 {1024, 512, 0, 2080, 2084}}) {
    // target 0: a size given as the checkpoint's own list (argen_image_sizes).
    const std::vector<Size> sizes = target > 0 ? CropSizeList(target) : std::vector<Size>{{w, h}};
    absl::StatusOr<LuminaSchedule> s = MakeSchedule(sizes, w, h, 8803);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->grid_h * (s->grid_w + 1), with_lines) << w << "x" << h;
    EXPECT_EQ(s->l_gen, l_gen);
    EXPECT_EQ(s->l_dec, with_lines - 1);  // the last new line is never fed
    EXPECT_EQ(s->grid.width, s->grid_w);
    EXPECT_EQ(s->grid.row_break_tokens, 1);
    EXPECT_EQ(s->grid.l_dec, s->l_dec);
  }
}

TEST(LuminaScheduleTest, NewLinesAreForcedAtEveryRowEndButTheLast) {
  absl::StatusOr<LuminaSchedule> s = MakeSchedule({{64, 32}}, 64, 32, 77);  // 2 rows of 4 codes
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->grid_w, 4);
  EXPECT_EQ(s->grid_h, 2);
  EXPECT_EQ(s->l_dec, 9);
  EXPECT_EQ(s->forced, (std::vector<int32_t>{-1, -1, -1, -1, 77, -1, -1, -1, -1}));
}

TEST(LuminaScheduleTest, UnsupportedSizeIsRefusedWithTheList) {
  absl::StatusOr<LuminaSchedule> s = MakeSchedule({{384, 384}, {512, 256}}, 400, 400, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("400x400"), std::string::npos);
  EXPECT_NE(s.status().message().find("384x384, 512x256"), std::string::npos) << s.status();
}

TEST(LuminaShapesTest, Published7BShapes) {
  for (auto [target, l_dec] : {std::pair{512, 32 * 33 - 1}, {768, 48 * 49 - 1}}) {
    absl::StatusOr<PublishedLumina> p = PublishedLumina7B(target);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->spec.stack.hidden_size, 4096);
    EXPECT_EQ(p->spec.stack.num_layers, 32);
    EXPECT_EQ(p->spec.text_vocab(), 65536);
    EXPECT_EQ(p->spec.logits(), 8192);
    EXPECT_EQ(p->spec.input.sampled_offset, 4);
    EXPECT_TRUE(p->spec.stack.qk_norm);
    EXPECT_EQ(p->spec.layers[0].q_norm.weight.shape, (std::vector<int64_t>{1, 128}));
    EXPECT_EQ(p->spec.layers[0].q_norm.weight.used_rows(), 32);
    EXPECT_EQ(p->schedule.l_dec, l_dec);
  }
  EXPECT_FALSE(PublishedLumina7B(640).ok());
}

}  // namespace
}  // namespace argen::lumina
