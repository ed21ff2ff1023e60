// The generation loop end to end on the CPU with the shipped small model
// (models/argen-lumina-scenes-v1; its weights at 128 x 64, 4 rows of 8 codes,
// through a config copy, so the test runs in a second): the
// registry picks the family, the new line is recorded at every row end and
// nowhere else, every other token is an image token, L_dec = 24 * 25 - 1, the
// pair's rows differ in length (the guidance row is the header), KV is exact,
// the same seed gives the same tokens alone or batched, the image decodes to
// 384 x 384, and a broken vocabulary or a missing VQGAN is a clear load error.
// Sizes per request: the config copy allows 128 x 64 (the default) and 64 x
// 128, and a request of either size runs on its own layout (row breaks, KV,
// L_dec, diagonal N_r, image size), alone or batched with the other size.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "engine/families/lumina/lumina_family.h"
#include "engine/families/lumina/tests/test_util.h"
#include "engine/families/registry.h"
#include "engine/model/create_engine.h"
#include "engine/request_rules.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "scheduler/tests/scheduler_test_util.h"
#include "tests/support/lumina_sizes.h"

namespace argen::lumina {
namespace {

namespace fs = std::filesystem;
using testing::SourceDir;

constexpr int32_t kNewLine = 1035;  // <reserved08799> in the small model's vocabulary
constexpr int32_t kFirstImage = 4, kImageTokens = 1024;

std::string ModelDir() { return SourceDir() + "/models/argen-lumina-scenes-v1"; }

constexpr int32_t kW = 8, kH = 4;          // codes per row, rows (the default size, 128 x 64)
constexpr int32_t kTallW = 4, kTallH = 8;  // the other size, 64 x 128

// The small model's files, its config asking for 128 x 64 (the default) and 64 x 128.
std::string SmallSizeDir() {
  static test_support::RemovedDir temp{fs::temp_directory_path() / ("lumina_small_" + std::to_string(::getpid()))};
  static const std::string dir =
      test_support::LuminaModelWithSizes(temp.path, {{kW * 16, kH * 16}, {kTallW * 16, kTallH * 16}}).string();
  return dir;
}

std::unique_ptr<model::GenericEngine> MakeEngine(bool share_across_requests = false) {
  engine::EngineOptions options;
  options.model_dir = SmallSizeDir();
  options.threads = 2;
  options.share_prompt_kv_across_requests = share_across_requests;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

engine::GenerationRequest Request(const std::string& prompt, uint64_t seed, int32_t images) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.num_images = images;
  r.sampling.cfg_weight = kDefaultCfgWeight;
  r.sampling.top_k = 0;
  r.sampling.seed = seed;
  return r;
}

// Runs the groups to the end and returns their tokens.
std::vector<std::vector<std::vector<int32_t>>> RunToEnd(model::GenericEngine& e,
                                                        const std::vector<engine::GenerationRequest>& requests) {
  std::vector<engine::GroupId> ids;
  for (const auto& r : requests) {
    absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    EXPECT_TRUE(e.CanAdd(*p));
    absl::StatusOr<engine::GroupId> id = e.Add(*p);
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  for (int32_t step = 0; step < engine::MaxImageTokens(e.info()) + 1; ++step) {
    absl::StatusOr<engine::StepReport> rep = e.Step();
    EXPECT_TRUE(rep.ok()) << rep.status();
  }
  std::vector<std::vector<std::vector<int32_t>>> out;
  for (engine::GroupId id : ids) {
    absl::StatusOr<engine::GroupState> s = e.State(id);
    EXPECT_TRUE(s.ok() && s->finished);
    out.push_back(s->tokens);
    e.Remove(id);
  }
  return out;
}

TEST(LuminaEngineTest, InfoDescribesTheSequence) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine();
  ASSERT_NE(e, nullptr);
  const engine::ModelInfo& info = e->info();
  EXPECT_EQ(info.family, "lumina");
  EXPECT_EQ(info.image_size, 128);
  EXPECT_EQ(info.token_grid, 8);
  EXPECT_EQ(info.image_tokens, kH * (kW + 1) - 1);
  EXPECT_EQ(info.image_vocab, kImageTokens);
  EXPECT_EQ(info.grid.width, kW);
  EXPECT_EQ(info.grid.row_break_tokens, 1);
  EXPECT_EQ(info.grid.l_dec, info.image_tokens);
  // Both sizes, each with its own decode sequence; the default first.
  ASSERT_EQ(info.image_layouts.size(), 2u);
  EXPECT_EQ(info.default_width, 128);
  EXPECT_EQ(info.default_height, 64);
  const engine::ImageLayout& tall = info.image_layouts[1];
  EXPECT_EQ(tall.width, 64);
  EXPECT_EQ(tall.height, 128);
  EXPECT_EQ(tall.grid_w, kTallW);
  EXPECT_EQ(tall.grid_h, kTallH);
  EXPECT_EQ(tall.image_tokens, kTallH * (kTallW + 1) - 1);
  EXPECT_EQ(tall.grid.width, kTallW);
  EXPECT_EQ(tall.grid.l_dec, tall.image_tokens);
  EXPECT_EQ(engine::MaxImageTokens(info), tall.image_tokens);
}

engine::GenerationRequest Sized(engine::GenerationRequest r, int32_t width, int32_t height) {
  r.width = width;
  r.height = height;
  return r;
}

// Row breaks at every row end of `w` codes, image tokens everywhere else.
void ExpectRows(const std::vector<int32_t>& tokens, int32_t w, int32_t h) {
  ASSERT_EQ(static_cast<int32_t>(tokens.size()), h * (w + 1) - 1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (static_cast<int32_t>(t) % (w + 1) == w) {
      EXPECT_EQ(tokens[t], kNewLine) << t;
    } else {
      EXPECT_GE(tokens[t], kFirstImage) << t;
      EXPECT_LT(tokens[t], kFirstImage + kImageTokens) << t;
    }
  }
}

TEST(LuminaEngineTest, EachRequestRunsOnItsSizesLayoutAloneOrBatchedWithAnother) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine();
  ASSERT_NE(e, nullptr);
  const engine::GenerationRequest wide = Request("a blue square", 3, 1);  // the default, 128 x 64
  const engine::GenerationRequest tall = Sized(Request("a red circle", 7, 1), 64, 128);
  const int32_t wide_l_dec = kH * (kW + 1) - 1, tall_l_dec = kTallH * (kTallW + 1) - 1;
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(tall);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->layout.width, 64);
  EXPECT_EQ(p->layout.height, 128);
  EXPECT_EQ(p->policy.l_dec, tall_l_dec);
  // The header names the size: height 128 / 32 = 4 units first, then width 2.
  ASSERT_EQ(p->uncond_ids.size(), 3u);
  EXPECT_EQ(p->uncond_ids[1], 1039);  // <reserved08804>
  EXPECT_EQ(p->uncond_ids[2], 1037);  // <reserved08802>
  // KV: its own L_dec in each row.
  const int64_t per_token = e->info().kv_bytes_per_token_row;
  EXPECT_EQ(p->kv_bytes, per_token * (static_cast<int64_t>(p->cond_ids.size()) + tall_l_dec) +
                             per_token * (static_cast<int64_t>(p->uncond_ids.size()) + tall_l_dec));
  // The diagonal policy's default N_r is 2 2/3 of the request's own rows (row ends included).
  engine::GenerationRequest diagonal = tall;
  diagonal.policy.kind = sparse::PolicyKind::kDiagonal;
  diagonal.policy.sparsity = 0.9;
  absl::StatusOr<engine::PreparedRequest> pd = e->Prepare(diagonal);
  ASSERT_TRUE(pd.ok()) << pd.status();
  EXPECT_EQ(pd->policy.n_recent, 14);  // ceil(8/3 x 5): rows of 4 codes + 1 row end
  absl::StatusOr<engine::PreparedRequest> pw = e->Prepare(Sized(diagonal, 0, 0));
  ASSERT_TRUE(pw.ok()) << pw.status();
  EXPECT_EQ(pw->policy.l_dec, wide_l_dec);
  EXPECT_EQ(pw->policy.n_recent, 24);  // ceil(8/3 x 9): rows of 8 codes + 1 row end

  const auto alone = RunToEnd(*e, {tall});
  ASSERT_EQ(alone.size(), 1u);
  ExpectRows(alone[0][0], kTallW, kTallH);
  const auto wide_alone = RunToEnd(*e, {wide});
  ASSERT_EQ(wide_alone.size(), 1u);
  ExpectRows(wide_alone[0][0], kW, kH);

  // Both sizes in one batch (and the tall one as image 0 of a two-image
  // request): every image the same tokens as alone; KV exactly the sum of
  // the requests' own needs, the wide one's freed when it finishes first.
  absl::StatusOr<engine::PreparedRequest> pa = e->Prepare(wide);
  absl::StatusOr<engine::PreparedRequest> pb = e->Prepare(tall);
  engine::GenerationRequest tall2 = tall;
  tall2.num_images = 2;
  absl::StatusOr<engine::PreparedRequest> pc = e->Prepare(tall2);
  ASSERT_TRUE(pa.ok() && pb.ok() && pc.ok());
  absl::StatusOr<engine::GroupId> a = e->Add(*pa);
  absl::StatusOr<engine::GroupId> b = e->Add(*pb);
  absl::StatusOr<engine::GroupId> c = e->Add(*pc);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(e->KvBytesInUse(), pa->kv_bytes + pb->kv_bytes + pc->kv_bytes);
  for (int32_t step = 0; step < wide_l_dec; ++step) {
    absl::StatusOr<engine::StepReport> rep = e->Step();
    ASSERT_TRUE(rep.ok()) << rep.status();
    EXPECT_EQ(rep->rows_decoded, step == 0 ? 0 : 2 + 2 + 4) << step;  // the sizes share each decode batch
  }
  absl::StatusOr<engine::GroupState> sa = e->State(*a);
  absl::StatusOr<engine::GroupState> sb = e->State(*b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_TRUE(sa->finished);
  EXPECT_EQ(sa->tokens_total, wide_l_dec);
  EXPECT_FALSE(sb->finished);
  EXPECT_EQ(sb->tokens_total, tall_l_dec);
  EXPECT_EQ(sb->tokens_done, wide_l_dec);
  EXPECT_EQ(e->KvBytesInUse(), pb->kv_bytes + pc->kv_bytes);
  for (int32_t step = wide_l_dec; step < tall_l_dec; ++step) ASSERT_TRUE(e->Step().ok());
  sb = e->State(*b);
  absl::StatusOr<engine::GroupState> sc = e->State(*c);
  ASSERT_TRUE(sb.ok() && sc.ok());
  EXPECT_TRUE(sb->finished && sc->finished);
  EXPECT_EQ(e->KvBytesInUse(), 0);
  EXPECT_EQ(sa->tokens[0], wide_alone[0][0]);
  EXPECT_EQ(sb->tokens[0], alone[0][0]);
  EXPECT_EQ(sc->tokens[0], alone[0][0]);
  EXPECT_NE(sc->tokens[1], alone[0][0]);

  // Images of both sizes in one decode call: each its own size, the same
  // pixels as decoded alone.
  absl::StatusOr<std::vector<engine::RgbImage>> mixed = e->DecodeImages({sb->tokens[0], sa->tokens[0]});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->size(), 2u);
  EXPECT_EQ((*mixed)[0].width, 64);
  EXPECT_EQ((*mixed)[0].height, 128);
  EXPECT_EQ((*mixed)[1].width, 128);
  EXPECT_EQ((*mixed)[1].height, 64);
  absl::StatusOr<std::vector<engine::RgbImage>> tall_image = e->DecodeImages({alone[0][0]});
  ASSERT_TRUE(tall_image.ok()) << tall_image.status();
  EXPECT_EQ((*mixed)[0].rgb, (*tall_image)[0].rgb);
  for (engine::GroupId id : {*a, *b, *c}) e->Remove(id);
}

// Lumina-mGPT's guidance row is its size's image header: requests of one
// size share it across requests, each keeps its size's layout and tokens.
TEST(LuminaEngineTest, SharingAcrossRequestsKeepsEverySizesTokens) {
  std::unique_ptr<model::GenericEngine> plain = MakeEngine(false);
  std::unique_ptr<model::GenericEngine> across = MakeEngine(true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(across, nullptr);
  engine::GenerationRequest tall2 = Sized(Request("a blue square", 9, 2), 64, 128);
  const std::vector<engine::GenerationRequest> requests = {Request("a blue square", 3, 1),
                                                           Request("a red circle", 4, 1),
                                                           Sized(Request("a red circle", 7, 1), 64, 128), tall2};
  int64_t kv[2] = {0, 0};
  std::vector<std::vector<std::vector<int32_t>>> tokens[2];
  for (int k = 0; k < 2; ++k) {
    model::GenericEngine& e = k == 0 ? *plain : *across;
    std::vector<engine::GroupId> ids;
    for (const auto& r : requests) {
      absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_TRUE(e.CanAdd(*p));
      absl::StatusOr<engine::GroupId> id = e.Add(*p);
      ASSERT_TRUE(id.ok()) << id.status();
      ids.push_back(*id);
    }
    kv[k] = e.KvBytesInUse();
    for (int32_t step = 0; step < engine::MaxImageTokens(e.info()) + 1; ++step) ASSERT_TRUE(e.Step().ok());
    for (engine::GroupId id : ids) {
      absl::StatusOr<engine::GroupState> st = e.State(id);
      ASSERT_TRUE(st.ok() && st->finished);
      tokens[k].push_back(st->tokens);
      e.Remove(id);
    }
    EXPECT_EQ(e.KvBytesInUse(), 0);
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  ExpectRows(tokens[1][2][0], kTallW, kTallH);
  ExpectRows(tokens[1][0][0], kW, kH);
  EXPECT_LT(kv[1], kv[0]) << "two headers and one caption shared";
  EXPECT_EQ(across->SharedKvBytes(), 0);
}

TEST(LuminaEngineTest, UnsupportedOrHalfGivenSizesAreRefusedListingTheSizes) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine();
  ASSERT_NE(e, nullptr);
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(Sized(Request("a red circle", 1, 1), 96, 96));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("width: image size 96x96 (width x height)"), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("128x64, 64x128"), std::string::npos) << p.status();
  p = e->Prepare(Sized(Request("a red circle", 1, 1), 64, 0));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message().rfind("height: ", 0), 0u) << p.status();
  // A prepared request whose policy was resolved for another size is refused by Add.
  absl::StatusOr<engine::PreparedRequest> ok = e->Prepare(Request("a red circle", 1, 1));
  ASSERT_TRUE(ok.ok());
  engine::PreparedRequest other = *ok;
  other.request.width = 64;
  other.request.height = 128;
  absl::StatusOr<engine::GroupId> id = e->Add(other);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("policy.l_dec"), std::string::npos) << id.status();
  EXPECT_EQ(e->KvBytesInUse(), 0);
}

// A recorded sequence tells its size by its length and its first row.
TEST(LuminaEngineTest, ScheduleOfTokensFindsTheSize) {
  const std::vector<std::pair<int32_t, int32_t>> sizes = {{128, 64}, {64, 128}, {32, 32}};
  std::vector<int32_t> tall(kTallH * (kTallW + 1) - 1, 5);
  for (size_t t = kTallW; t < tall.size(); t += kTallW + 1) tall[t] = kNewLine;
  absl::StatusOr<LuminaSchedule> s = ScheduleOfTokens(tall, sizes, kNewLine, 0);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->width, 64);
  EXPECT_EQ(s->height, 128);
  absl::StatusOr<LuminaSchedule> none = ScheduleOfTokens(std::vector<int32_t>(7, 5), sizes, kNewLine, 3);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("token_grids[3]"), std::string::npos) << none.status();
}

TEST(LuminaEngineTest, RowBreaksCodesKvAndSeedsAloneOrBatched) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine();
  ASSERT_NE(e, nullptr);
  const engine::GenerationRequest alone = Request("a red circle", 7, 1);
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(alone);
  ASSERT_TRUE(p.ok()) << p.status();
  // cond = <s> ... <reserved08706> + header; uncond = the header alone.
  ASSERT_EQ(p->uncond_ids.size(), 3u);
  EXPECT_EQ(p->uncond_ids[0], 1029);  // <racm3:break>
  EXPECT_EQ(p->uncond_ids[1], 1037);  // <reserved08802>: height 64 / 32 = 2 units, height first
  EXPECT_EQ(p->uncond_ids[2], 1039);  // <reserved08804>: width 128 / 32 = 4 units
  EXPECT_TRUE(std::equal(p->uncond_ids.begin(), p->uncond_ids.end(), p->cond_ids.end() - 3));
  EXPECT_EQ(p->cond_ids.front(), 0);                     // <s>
  EXPECT_EQ(p->cond_ids[p->cond_ids.size() - 4], 1030);  // <reserved08706>
  // KV: each row its own length, dense keeps L_dec slots.
  const int64_t per_token = e->info().kv_bytes_per_token_row;
  const int64_t l_dec = e->info().image_tokens;
  EXPECT_EQ(p->kv_bytes, per_token * (static_cast<int64_t>(p->cond_ids.size()) + l_dec) +
                             per_token * (static_cast<int64_t>(p->uncond_ids.size()) + l_dec));

  const auto one = RunToEnd(*e, {alone});
  ASSERT_EQ(one.size(), 1u);
  const std::vector<int32_t>& tokens = one[0][0];
  ASSERT_EQ(static_cast<int32_t>(tokens.size()), l_dec);
  for (int32_t t = 0; t < l_dec; ++t) {
    if (t % (kW + 1) == kW) {
      EXPECT_EQ(tokens[t], kNewLine) << t;
    } else {
      EXPECT_GE(tokens[t], kFirstImage) << t;
      EXPECT_LT(tokens[t], kFirstImage + kImageTokens) << t;
    }
  }
  EXPECT_EQ(e->KvBytesInUse(), 0);

  // Batched with another request (and as image 0 of a two-image request): same tokens.
  const auto batched = RunToEnd(*e, {Request("a blue square", 3, 1), alone, Request("a red circle", 7, 2)});
  ASSERT_EQ(batched.size(), 3u);
  EXPECT_EQ(batched[1][0], tokens);
  EXPECT_EQ(batched[2][0], tokens);
  EXPECT_NE(batched[2][1], tokens);  // image 1 draws its own stream
  EXPECT_NE(batched[0][0], tokens);

  absl::StatusOr<std::vector<engine::RgbImage>> images = e->DecodeImages({tokens});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)[0].width, 128);
  EXPECT_EQ((*images)[0].height, 64);
  std::vector<int32_t> broken = tokens;
  broken[kW] = kFirstImage;  // a row end without its new line
  absl::StatusOr<std::vector<engine::RgbImage>> bad = e->DecodeImages({broken});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[8]"), std::string::npos) << bad.status();
}

struct PreviewDrops : scheduler::SchedulerObserver {
  void OnPreviewDropped(std::string_view reason) override {
    absl::MutexLock lock(&mu);
    reasons.emplace_back(reason);
  }
  absl::Mutex mu;
  std::vector<std::string> reasons;
};

// Previews decode a sequence with the row breaks where the decoder expects
// them (rows of 8 codes + a new line): the one preview at 2 of 4 rows is
// delivered, or dropped only for timing (the whole image takes milliseconds
// here), never as "failed" (a square grid without breaks would be).
TEST(LuminaEngineTest, PreviewsThroughTheScheduler) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine();
  ASSERT_NE(e, nullptr);
  PreviewDrops drops;
  absl::StatusOr<std::unique_ptr<scheduler::Scheduler>> s =
      scheduler::Scheduler::Create(e.get(), scheduler::SchedulerOptions{}, scheduler::testing::RawEncoder, &drops);
  ASSERT_TRUE(s.ok()) << s.status();
  scheduler::SubmitOptions so;
  so.previews = 1;
  absl::StatusOr<std::shared_ptr<scheduler::RequestHandle>> h = (*s)->Submit(Request("a red circle", 1, 1), so);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<scheduler::RequestEvent> events = scheduler::testing::CollectEvents(**h);
  const scheduler::FinishedEvent* done = scheduler::testing::FindFinished(events);
  ASSERT_NE(done, nullptr);
  ASSERT_TRUE(done->status.ok()) << done->status;
  int previews = 0;
  for (const scheduler::RequestEvent& ev : events) {
    if (const auto* p = std::get_if<scheduler::PreviewEvent>(&ev)) {
      ++previews;
      EXPECT_EQ(p->rows_done, 2);
      EXPECT_EQ(p->tokens_done, 2 * (kW + 1));
      EXPECT_EQ(p->width, 128);
      EXPECT_EQ(p->height, 64);
    }
  }
  s->reset();  // the workers have finished with the preview
  absl::MutexLock lock(&drops.mu);
  EXPECT_EQ(previews + static_cast<int>(drops.reasons.size()), 1);
  for (const std::string& r : drops.reasons) EXPECT_NE(r, "failed");
}

TEST(LuminaEngineTest, CodesAreMappedThroughTheVocabulary) {
  absl::StatusOr<LuminaSchedule> s = MakeSchedule({{32, 32}}, 32, 32, 9);  // 2 x 2 codes
  ASSERT_TRUE(s.ok());
  ImageTokenRange range;
  range.first_id = 10;
  range.count = 4;
  range.code_of_offset = {3, 2, 1, 0};
  absl::StatusOr<std::vector<int32_t>> codes = TokensToCodes({10, 11, 9, 12, 13}, *s, range, 9, 0);
  ASSERT_TRUE(codes.ok()) << codes.status();
  EXPECT_EQ(*codes, (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_FALSE(TokensToCodes({10, 11, 9, 12, 14}, *s, range, 9, 0).ok());  // id outside the range
  EXPECT_FALSE(TokensToCodes({10, 11, 9, 12}, *s, range, 9, 0).ok());      // short
}

// A copy of the small model's config and vqgan.yaml in a temporary directory.
fs::path CopyConfig(const std::string& name, const std::function<void(nlohmann::json&)>& edit, bool with_yaml) {
  const fs::path dir =
      fs::temp_directory_path() / ("lumina_" + name + "_" + std::to_string(::getpid())) / "argen-lumina-scenes-v1";
  fs::create_directories(dir / "tokenizer");
  std::ifstream in(ModelDir() + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(dir / "config.json") << config.dump();
  if (with_yaml) fs::copy_file(ModelDir() + "/tokenizer/vqgan.yaml", dir / "tokenizer/vqgan.yaml");
  return dir;
}

TEST(LuminaLoadTest, BrokenVocabularyMapIsALoadError) {
  const fs::path dir = CopyConfig(
      "vocab", [](nlohmann::json& c) { c["vocabulary_map"].erase("IMGIMGBAZ"); }, true);
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("vocabulary_map"), std::string::npos) << m.status();
  fs::remove_all(dir.parent_path());
}

TEST(LuminaLoadTest, MissingVqganNamesTheFileAndTheOption) {
  const fs::path dir = CopyConfig(
      "novq", [](nlohmann::json&) {}, false);
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("vqgan.yaml"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("vqgan_dir"), std::string::npos) << m.status();
  // vqgan_dir relative to the model directory: found there.
  absl::StatusOr<families::FamilyModel> elsewhere =
      families::LoadFamilyModel(dir.string(), {{"vqgan_dir", fs::relative(ModelDir() + "/tokenizer", dir).string()}});
  ASSERT_FALSE(elsewhere.ok());  // the copy has no language-model weights: it gets past the VQGAN
  EXPECT_EQ(elsewhere.status().message().find("vqgan.yaml"), std::string::npos) << elsewhere.status();
  fs::remove_all(dir.parent_path());
}

TEST(LuminaLoadTest, FamilyOptionsAreTheFamilysOwn) {
  // Lumina-mGPT takes vqgan_dir only: another key is an error naming it and the family, before any file is read.
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(ModelDir(), {{"vqgan_dri", "tokenizer"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  EXPECT_NE(m.status().message().find("family option 'vqgan_dri': the lumina family takes no such option (it takes "
                                      "vqgan_dir)"),
            std::string::npos)
      << m.status();
  absl::StatusOr<LuminaOptions> parsed = ParseLuminaOptions({{"vqgan_dir", "/vq"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(VqganDir("/m", *parsed), "/vq");
  EXPECT_EQ(VqganDir("/m", {"vq"}), "/m/vq");
  EXPECT_EQ(VqganDir("/m", {}), "/m/tokenizer");
  // Janus-Pro takes none: Lumina's vqgan_dir given to it is an error naming both, through the engine's options.
  engine::EngineOptions janus;
  janus.model_dir = SourceDir() + "/tests/goldens/tiny/tiny-mha";
  janus.family_options = {{"vqgan_dir", "tokenizer"}};
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(janus);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("family option 'vqgan_dir': the janus family takes no such option (it takes "
                                      "none)"),
            std::string::npos)
      << e.status();
  janus.family_options.clear();
  EXPECT_TRUE(model::CreateGenericEngine(janus).ok());
}

TEST(LuminaLoadTest, UnsupportedArgenSizeAndUnnamedTargetAreRefused) {
  const fs::path dir = CopyConfig(
      "sizes", [](nlohmann::json& c) { c.erase("argen_image_sizes"); }, true);
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("argen_image_sizes"), std::string::npos) << m.status();
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace argen::lumina
