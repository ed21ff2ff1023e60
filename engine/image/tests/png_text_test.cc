// PNG text chunks added to an encoded image without re-encoding: libpng reads
// them back (an independent reader), the pixels are unchanged, bad input is
// refused; and the generation metadata argen writes.
#include "engine/image/png_text.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstring>

#include "engine/image/generation_metadata.h"
#include "engine/image/png.h"

namespace argen::image {
namespace {

std::string SmallPng() {
  std::vector<uint8_t> rgb(4 * 3 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7);
  return EncodePng(rgb, 4, 3).value();
}

// Text chunks as libpng sees them.
std::map<std::string, std::string> LibpngText(const std::string& bytes) {
  std::map<std::string, std::string> out;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  struct Reader {
    const std::string* data;
    size_t at;
  } reader{&bytes, 0};
  png_set_read_fn(png, &reader, [](png_structp p, png_bytep dst, png_size_t n) {
    auto* r = static_cast<Reader*>(png_get_io_ptr(p));
    if (r->at + n > r->data->size()) png_error(p, "short read");
    std::memcpy(dst, r->data->data() + r->at, n);
    r->at += n;
  });
  if (setjmp(png_jmpbuf(png)) == 0) {
    png_read_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
    png_textp text = nullptr;
    const int n = png_get_text(png, info, &text, nullptr);
    for (int i = 0; i < n; ++i)
      out[text[i].key] = std::string(text[i].text, text[i].text_length ? text[i].text_length : text[i].itxt_length);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return out;
}

TEST(PngTextTest, ChunksReadBackByLibpngAndPixelsUnchanged) {
  const std::string png = SmallPng();
  const absl::StatusOr<std::string> tagged =
      AddPngText(png, {{"prompt", "a red cube"}, {"unicode", "caf\xc3\xa9 \xe2\x9c\x93"}, {"lines", "a\nb"}});
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  const std::map<std::string, std::string> text = LibpngText(*tagged);
  EXPECT_EQ(text.at("prompt"), "a red cube");
  EXPECT_EQ(text.at("unicode"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(text.at("lines"), "a\nb");
  const TextEntries ours = ReadPngText(*tagged).value();
  ASSERT_EQ(ours.size(), 3u);
  EXPECT_EQ(ours[1].second, "caf\xc3\xa9 \xe2\x9c\x93");
  const auto span = [](const std::string& s) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(DecodePng(span(*tagged)).value().rgb, DecodePng(span(png)).value().rgb);
  EXPECT_TRUE(ReadPngText(png).value().empty());
  EXPECT_EQ(RemovePngText(*tagged).value(), png);
  EXPECT_FALSE(RemovePngText("nope").ok());
}

TEST(PngTextTest, RefusesWhatIsNotAPngAndBadKeywords) {
  EXPECT_FALSE(AddPngText("not a png", {{"k", "v"}}).ok());
  EXPECT_FALSE(ReadPngText("\x89PNG\r\n\x1a\n\x00\x00").ok());
  const std::string png = SmallPng();
  EXPECT_FALSE(AddPngText(png, {{"", "v"}}).ok());
  EXPECT_FALSE(AddPngText(png, {{" lead", "v"}}).ok());
  EXPECT_FALSE(AddPngText(png, {{std::string(80, 'k'), "v"}}).ok());
  std::string corrupt = png;
  corrupt[20] ^= 1;  // inside IHDR: its CRC no longer matches
  EXPECT_FALSE(ReadPngText(corrupt).ok());
}

TEST(GenerationMetadataTest, RecordsWhatMadeTheImage) {
  GenerationMetadata m;
  m.prompt = "two cubes";
  m.seed = 9;
  m.sampling.cfg_weight = 4.5f;
  m.sampling.temperature = 0.8f;
  m.policy.kind = sparse::PolicyKind::kDiagonal;
  m.policy.n_att = 26;
  m.policy.n_slots = 26;
  m.policy.n_recent = 64;
  m.policy.l_dec = 256;
  m.sparsity = 0.9;
  m.model = "tiny";
  const std::map<std::string, std::string> text = LibpngText(AddGenerationMetadata(SmallPng(), m, 3).value());
  EXPECT_EQ(text.at("prompt"), "two cubes");
  EXPECT_EQ(text.at("seed"), "9");
  EXPECT_EQ(text.at("image_index"), "3");
  EXPECT_EQ(text.at("policy"), "diagonal sparsity=0.9 n_att=26 n_slots=26 n_recent=64 n_sink=0 l_dec=256");
  EXPECT_EQ(text.at("guidance"), "4.5");
  EXPECT_EQ(text.at("sampling"), "temperature=0.8 top_k=0 top_p=1");
  EXPECT_EQ(text.at("model"), "tiny");
  EXPECT_EQ(text.count("request_id"), 0u);  // the same request, the same bytes
  EXPECT_FALSE(text.at("argen_version").empty());
  EXPECT_EQ(text.at("Software").rfind("argen ", 0), 0u);
}

// An fp8 KV request says so in its policy line; auto adds nothing (above).
TEST(GenerationMetadataTest, RecordsAnFp8KvCache) {
  GenerationMetadata m;
  m.policy.kind = sparse::PolicyKind::kDense;
  m.policy.l_dec = 576;
  m.policy.kv_format = sparse::KvFormat::kFp8E4m3;
  const std::map<std::string, std::string> text = LibpngText(AddGenerationMetadata(SmallPng(), m, 0).value());
  EXPECT_EQ(text.at("policy"), "dense sparsity=0 n_att=0 n_slots=0 n_recent=0 n_sink=0 l_dec=576 kv_cache_dtype=fp8");
}

}  // namespace
}  // namespace argen::image
