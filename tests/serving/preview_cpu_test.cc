// Previews through the real CPU engine on the tiny checkpoint, on both APIs:
// the k previews of each image arrive in order before the final images, and
// each is, byte for byte, the PNG this test builds itself from a prefix of
// that image's final tokens (the rule of scheduler/preview.h: the first r
// token rows, then row r-1 repeated, decoded, pixel rows below r painted
// gray), with a fixed seed; LlamaGen c2i and Anole the same. NextStep-1
// (continuous tokens) likewise, its
// later tokens neutral (all zeros) instead of a repeated row, and its final
// images unchanged by asking for previews.
#include <gtest/gtest.h>

#include <map>

#include "absl/synchronization/mutex.h"
#include "client/generate_call.h"
#include "engine/image/png.h"
#include "engine/image/png_text.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using nlohmann::json;

// Records every token grid sent to the VQ decoder and slows steps a little,
// so no preview is dropped for lack of time on this shared machine.
class RecordingEngine : public engine::Engine {
 public:
  RecordingEngine(std::unique_ptr<engine::Engine> inner, absl::Duration step_delay)
      : inner_(std::move(inner)), step_delay_(step_delay) {}
  const engine::ModelInfo& info() const override { return inner_->info(); }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& r) const override {
    return inner_->Prepare(r);
  }
  bool CanAdd(const engine::PreparedRequest& r) const override { return inner_->CanAdd(r); }
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr r) override { return inner_->Add(std::move(r)); }
  absl::StatusOr<engine::StepReport> Step() override {
    absl::SleepFor(step_delay_);
    return inner_->Step();
  }
  void Remove(engine::GroupId id) override { inner_->Remove(id); }
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override { return inner_->State(id); }
  int64_t KvBytesInUse() const override { return inner_->KvBytesInUse(); }
  int64_t SharedKvBytes() const override { return inner_->SharedKvBytes(); }
  int32_t RunningRows() const override { return inner_->RunningRows(); }
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& grids) override {
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back(grids);
    }
    return inner_->DecodeImages(grids);
  }
  std::vector<std::vector<std::vector<int32_t>>> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  engine::Engine& inner() { return *inner_; }

 private:
  std::unique_ptr<engine::Engine> inner_;
  const absl::Duration step_delay_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<std::vector<int32_t>>> calls_;
};

// tiny_model: a folder of tests/goldens/tiny.
std::unique_ptr<RecordingEngine> TinyRecording(const std::string& tiny_model = "tiny-mha",
                                               absl::Duration step_delay = absl::Milliseconds(4)) {
  engine::EngineOptions o;
  o.model_dir = SourceDir() + "/tests/goldens/tiny/" + tiny_model;
  o.threads = 1;
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::make_unique<RecordingEngine>(*std::move(e), step_delay) : nullptr;
}

std::string Png(const engine::RgbImage& rgb) { return image::EncodePng(rgb.rgb, rgb.width, rgb.height).value(); }

// Paints the pixel rows below `rows` of the `g` token rows mid-gray, as previews do.
void PaintGrayBelow(engine::RgbImage& rgb, int32_t rows, int32_t g) {
  for (int32_t y = rows * rgb.height / g; y < rgb.height; ++y) {
    std::fill_n(rgb.rgb.begin() + static_cast<std::ptrdiff_t>(y) * rgb.width * 3, rgb.width * 3, 128);
  }
}

// The preview of `final_tokens` after `rows` token rows, built here.
std::string ExpectedPreview(engine::Engine& engine, const std::vector<int32_t>& final_tokens, int32_t rows) {
  const int32_t g = engine.info().token_grid;
  std::vector<int32_t> grid;
  for (int32_t r = 0; r < g; ++r) {
    const int32_t from = std::min(r, rows - 1);
    grid.insert(grid.end(), final_tokens.begin() + from * g, final_tokens.begin() + (from + 1) * g);
  }
  engine::RgbImage rgb = engine.DecodeImages({grid}).value()[0];
  PaintGrayBelow(rgb, rows, g);
  return Png(rgb);
}

// A continuous-token model's preview of `final_tokens` (token_dim words a
// token) after `rows` token rows, built here: those rows' token vectors, every
// later float 0 (the neutral token), decoded, pixel rows below painted gray.
std::string ExpectedVectorPreview(engine::Engine& engine, const std::vector<int32_t>& final_tokens, int32_t rows) {
  const engine::ModelInfo& info = engine.info();
  const int32_t g = info.token_grid;
  std::vector<int32_t> tokens(final_tokens.begin(),
                              final_tokens.begin() + static_cast<std::ptrdiff_t>(rows) * g * info.token_dim);
  tokens.resize(final_tokens.size(), 0);  // 0.0f's bits
  engine::RgbImage rgb = engine.DecodeImages({tokens}).value()[0];
  PaintGrayBelow(rgb, rows, g);
  return Png(rgb);
}

// The final token grid of image i: the decoder's last call holds the request's
// `images` grids, image 0 first (one request ran; the scheduler decodes a
// finished request's images together); checked against the final PNG.
std::vector<int32_t> FinalTokens(RecordingEngine& engine, int images, int index, const std::string& final_png) {
  const auto calls = engine.calls();
  EXPECT_GE(calls.size(), 1u);
  const auto& call = calls.back();
  EXPECT_EQ(call.size(), static_cast<size_t>(images));
  const std::vector<int32_t>& tokens = call[index];
  // The server's PNG carries the generation metadata as text chunks; the pixels are these tokens'.
  EXPECT_EQ(Png(engine.inner().DecodeImages({tokens}).value()[0]), image::RemovePngText(final_png).value())
      << "not image " << index << "'s tokens";
  return tokens;
}

// The stream's previews in order; none may come after an image.
std::vector<v1::Preview> PreviewsBeforeImages(const std::vector<v1::GenerateEvent>& events) {
  std::vector<v1::Preview> previews;
  bool image_seen = false;
  for (const v1::GenerateEvent& e : events) {
    if (e.has_image()) image_seen = true;
    if (e.has_preview()) {
      EXPECT_FALSE(image_seen) << "a preview after an image";
      previews.push_back(e.preview());
    }
  }
  return previews;
}

// A code model's previews of one request of `images` images, k of each:
// image-minor order, after (index + 1) g / (k + 1) token rows, each the
// preview this test builds from its image's final tokens.
void ExpectCodePreviewsArePrefixes(RecordingEngine& engine, const client::GenerateResult& result,
                                   const std::vector<v1::Preview>& previews, int images, int k) {
  ASSERT_EQ(previews.size(), static_cast<size_t>(k * images));
  const int32_t g = engine.info().token_grid;
  for (size_t i = 0; i < previews.size(); ++i) {
    const v1::Preview& p = previews[i];
    EXPECT_EQ(p.index(), static_cast<int>(i) / images);
    EXPECT_EQ(p.image(), static_cast<int>(i) % images);
    EXPECT_EQ(p.rows_done(), (p.index() + 1) * g / (k + 1));
    EXPECT_EQ(p.tokens_done(), p.rows_done() * g);
    EXPECT_EQ(PngSize(p.png()), std::make_pair(p.width(), p.height()));
    const std::vector<int32_t> final_tokens = FinalTokens(engine, images, p.image(), result.images[p.image()].png());
    EXPECT_EQ(p.png(), ExpectedPreview(engine.inner(), final_tokens, p.rows_done())) << "preview " << i;
  }
}

TEST(PreviewCpuTest, GrpcPreviewsArePrefixesOfTheFinalTokens) {
  server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/tiny-mha");
  auto recording = TinyRecording();
  ASSERT_NE(recording, nullptr);
  RecordingEngine* engine = recording.get();
  ASSERT_STARTED(t, StartServer(c, std::move(recording)));
  v1::GenerateRequest r;
  r.set_prompt("a red circle");
  r.set_num_images(2);
  r.set_seed(1234);
  r.set_previews(2);
  std::vector<v1::GenerateEvent> events;
  client::GenerateResult result =
      client::CallGenerate(*t.stub, r, 120, [&](const v1::GenerateEvent& e) { events.push_back(e); });
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.images.size(), 2u);
  // 2 per image; the 8-row grid: previews after 2 and 5 rows.
  ExpectCodePreviewsArePrefixes(*engine, result, PreviewsBeforeImages(events), 2, 2);
}

// The wave-3 code models (LlamaGen c2i, 5 x 5 codes behind a class id;
// Anole in Meta's layout, 32 x 32 codes, no row breaks) preview by the same
// rule over gRPC: k previews an image, in order, before the image, each the
// decode of its made rows with the last one repeated and gray below.
TEST(PreviewCpuTest, LlamaGenAndAnolePreviewsArePrefixesOfTheFinalTokens) {
  struct Case {
    std::string tiny_model;
    bool class_conditional;
  };
  for (const Case& m : {Case{"tiny-llamagen-c2i", true}, Case{"tiny-anole-meta", false}}) {
    SCOPED_TRACE(m.tiny_model);
    server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/" + m.tiny_model);
    auto recording = TinyRecording(m.tiny_model, absl::Milliseconds(m.class_conditional ? 25 : 2));
    ASSERT_NE(recording, nullptr);
    RecordingEngine* engine = recording.get();
    ASSERT_STARTED(t, StartServer(c, std::move(recording)));
    v1::GenerateRequest r;
    if (m.class_conditional) {
      r.set_class_id(3);
    } else {
      r.set_prompt("a red cube");
    }
    r.set_seed(99);
    r.set_previews(2);
    std::vector<v1::GenerateEvent> events;
    client::GenerateResult result =
        client::CallGenerate(*t.stub, r, 300, [&](const v1::GenerateEvent& e) { events.push_back(e); });
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    ASSERT_EQ(result.images.size(), 1u);
    ExpectCodePreviewsArePrefixes(*engine, result, PreviewsBeforeImages(events), 1, 2);
  }
}

// NextStep-1 over gRPC: as many previews as a code model of its grid gets
// (k per image at the same rows), each the decode of the made rows' token
// vectors and neutral tokens after them; the same seed without previews makes
// the same tokens and the same image.
TEST(PreviewCpuTest, NextStepPreviewsDecodeTheMadeRowsAndNeutralTokens) {
  server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/tiny-nextstep");
  // 9 tokens (3 rows) an image: a slower step leaves the workers time for each preview.
  auto recording = TinyRecording("tiny-nextstep", absl::Milliseconds(25));
  ASSERT_NE(recording, nullptr);
  RecordingEngine* engine = recording.get();
  ASSERT_STARTED(t, StartServer(c, std::move(recording)));
  const engine::ModelInfo& info = t.server->engine().info();
  ASSERT_EQ(info.family, "nextstep");
  ASSERT_EQ(info.token_dim, 16);
  const int32_t g = info.token_grid;  // 3: previews after rows 1 and 2
  const auto generate = [&](int32_t previews, std::vector<v1::GenerateEvent>* events) {
    v1::GenerateRequest r;
    r.set_prompt("a red circle");
    r.set_num_images(2);
    r.set_seed(77);
    r.set_previews(previews);
    return client::CallGenerate(*t.stub, r, 120, [&](const v1::GenerateEvent& e) { events->push_back(e); });
  };
  std::vector<v1::GenerateEvent> events;
  client::GenerateResult result = generate(2, &events);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.images.size(), 2u);
  const auto final_call = engine->calls().back();
  const std::vector<v1::Preview> previews = PreviewsBeforeImages(events);
  ASSERT_EQ(previews.size(), 4u);  // 2 per image
  for (size_t i = 0; i < previews.size(); ++i) {
    const v1::Preview& p = previews[i];
    EXPECT_EQ(p.index(), static_cast<int>(i / 2));
    EXPECT_EQ(p.image(), static_cast<int>(i % 2));
    EXPECT_EQ(p.rows_done(), (p.index() + 1) * g / 3);
    EXPECT_EQ(p.tokens_done(), p.rows_done() * g);
    EXPECT_EQ(PngSize(p.png()), std::make_pair(12, 12));
    const std::vector<int32_t> final_tokens = FinalTokens(*engine, 2, p.image(), result.images[p.image()].png());
    EXPECT_EQ(final_tokens.size(), static_cast<size_t>(g * g * info.token_dim));
    EXPECT_EQ(p.png(), ExpectedVectorPreview(engine->inner(), final_tokens, p.rows_done())) << "preview " << i;
  }

  std::vector<v1::GenerateEvent> plain_events;
  client::GenerateResult plain = generate(0, &plain_events);
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  ASSERT_EQ(plain.images.size(), 2u);
  EXPECT_EQ(engine->calls().back(), final_call) << "previews changed the tokens";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(plain.images[i].png(), result.images[i].png()) << "image " << i;  // metadata included
  }
  for (const v1::GenerateEvent& e : plain_events) EXPECT_FALSE(e.has_preview());
}

TEST(PreviewCpuTest, HttpPartialImagesArePrefixesOfTheFinalTokens) {
  server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/tiny-mha");
  c.metrics_port = 0;
  c.http_address = "127.0.0.1";
  c.http_port = 0;
  auto recording = TinyRecording();
  ASSERT_NE(recording, nullptr);
  RecordingEngine* engine = recording.get();
  ASSERT_STARTED(t, StartServer(c, std::move(recording)));
  auto client = HttpClient(t.server->http_port());
  httplib::Result r =
      PostImages(*client, {{"prompt", "a blue square"}, {"seed", 7}, {"stream", true}, {"partial_images", 3}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<SseEvent> events = ParseSse(r->body);
  ASSERT_EQ(events.size(), 4u) << r->body.substr(0, 300) << HttpGet(t.server->metrics_port(), "/metrics");
  const std::string final_png = Base64Decode(json::parse(events[3].data)["b64_json"]);
  EXPECT_EQ(events[3].event, "image_generation.completed");
  const std::vector<int32_t> final_tokens = FinalTokens(*engine, 1, 0, final_png);
  const int32_t g = t.server->engine().info().token_grid;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(events[i].event, "image_generation.partial_image");
    const json p = json::parse(events[i].data);
    EXPECT_EQ(p["partial_image_index"], i);
    const int32_t rows = (i + 1) * g / 4;  // 2, 4, 6
    EXPECT_EQ(Base64Decode(p["b64_json"]), ExpectedPreview(engine->inner(), final_tokens, rows)) << i;
  }
}

}  // namespace
}  // namespace argen::serving_test
