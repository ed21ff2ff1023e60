// The Emu3 family's pieces on the tiny checkpoints (tests/goldens/tiny/
// tiny-emu3-gen in BAAI's layout, tiny-emu3-gen-hf in transformers'): both
// tokenizers give the references' ids on tools/sweep/benchmark_prompts.jsonl
// (tiktoken with Qwen's pattern; HF tokenizers on tokenizer.json); the prompt
// recipe gives the pair the goldens were made from; the size rule (the
// published 720 px numbers included); loading through the registry; a
// corrupt or mismatched checkpoint refused naming the file or tensor.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/families/emu3/emu3_family.h"
#include "engine/families/emu3/emu3_prompt.h"
#include "engine/families/emu3/emu3_schedule.h"
#include "engine/families/emu3/emu3_shapes.h"
#include "engine/families/emu3/emu3_tokenizer.h"
#include "engine/families/registry.h"
#include "engine/model/create_engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::emu3 {
namespace {

namespace fs = std::filesystem;
using test_support::ReadJson;
using test_support::SourceDir;

std::string Tiny(const std::string& name) { return SourceDir() + "/tests/goldens/tiny/" + name; }

nlohmann::json Golden() { return ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json"); }

std::shared_ptr<const tokenizer::Tokenizer> TokenizerOf(const std::string& name, Emu3Layout layout) {
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> t = LoadEmu3Tokenizer(Tiny(name), layout);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : nullptr;
}

TEST(Emu3TokenizerTest, BothLayoutsGiveTheirReferencesIdsOnTheBenchmarkPrompts) {
  const nlohmann::json tokens = ReadJson("tests/goldens/tiny/emu3-goldens/tokens.json");
  auto baai = TokenizerOf("tiny-emu3-gen", Emu3Layout::kBaai);
  auto hf = TokenizerOf("tiny-emu3-gen-hf", Emu3Layout::kTransformers);
  ASSERT_NE(baai, nullptr);
  ASSERT_NE(hf, nullptr);
  const auto& texts = tokens["texts"];
  ASSERT_GT(texts.size(), 500u);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    absl::StatusOr<std::vector<int32_t>> a = baai->Encode(text, false);
    absl::StatusOr<std::vector<int32_t>> b = hf->Encode(text, false);
    ASSERT_TRUE(a.ok() && b.ok()) << text;
    EXPECT_EQ(*a, tokens["baai"][i].get<std::vector<int32_t>>()) << "tiktoken: " << text;
    EXPECT_EQ(*b, tokens["hf"][i].get<std::vector<int32_t>>()) << "tokenizers: " << text;
  }
  // The special tokens and the visual range, by content, agree across layouts and with the goldens.
  const nlohmann::json g = Golden();
  for (const auto& tok : {baai, hf}) {
    absl::StatusOr<Emu3TokenIds> ids = FindEmu3Tokens(*tok, g["codebook_size"].get<int32_t>());
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->first_visual, g["first_visual_id"].get<int32_t>());
    EXPECT_EQ(ids->row_end, g["ids"][kRowEndToken].get<int32_t>());
    EXPECT_EQ(ids->end_of_frame, g["ids"][kEndOfFrameToken].get<int32_t>());
    EXPECT_EQ(ids->bos, g["ids"][kBosToken].get<int32_t>());
    EXPECT_EQ(ids->image, g["ids"][kImageToken].get<int32_t>());
    EXPECT_EQ(ids->begin_image, g["ids"][kBeginImageToken].get<int32_t>());
  }
}

TEST(Emu3TokenizerTest, ATiktokenFileThatIsNotBpeIsRefusedNamingTheLine) {
  const fs::path dir = fs::temp_directory_path() / ("emu3_tok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "bad.tiktoken") << "IQ== 0\nIg== 5\n";  // ranks must run 0, 1, ...
    std::ofstream(dir / "vision.txt") << "<|image token|>\n";
  }
  absl::StatusOr<std::string> j =
      TiktokenToTokenizerJson((dir / "bad.tiktoken").string(), (dir / "vision.txt").string());
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("bad.tiktoken:2"), std::string::npos) << j.status();
  {
    std::ofstream(dir / "bad.tiktoken") << "IQ== 0\nIg== 1\nISIi 2\n";  // "!\"\"" is no merge of two lower ranks
  }
  j = TiktokenToTokenizerJson((dir / "bad.tiktoken").string(), (dir / "vision.txt").string());
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("rank 2"), std::string::npos) << j.status();
  fs::remove_all(dir);
}

TEST(Emu3PromptTest, TheRecipeGivesTheGoldenPairAndTakesANegativePrompt) {
  const nlohmann::json g = Golden();
  for (const auto& [name, layout] :
       {std::pair{"tiny-emu3-gen", Emu3Layout::kBaai}, std::pair{"tiny-emu3-gen-hf", Emu3Layout::kTransformers}}) {
    auto tok = TokenizerOf(name, layout);
    ASSERT_NE(tok, nullptr);
    absl::StatusOr<Emu3TokenIds> ids = FindEmu3Tokens(*tok, g["codebook_size"].get<int32_t>());
    ASSERT_TRUE(ids.ok());
    absl::StatusOr<Emu3PromptIds> p =
        BuildEmu3Prompt(*tok, *ids, g["prompts"]["caption"].get<std::string>(), "", 4, 4, 0);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->cond, g["prompts"]["cond"].get<std::vector<int32_t>>()) << name;
    EXPECT_EQ(p->uncond, g["prompts"]["uncond"].get<std::vector<int32_t>>()) << name;
    EXPECT_EQ(p->cond.back(), ids->image);
    // Another negative prompt replaces the default text, in the same frame.
    absl::StatusOr<Emu3PromptIds> n = BuildEmu3Prompt(*tok, *ids, "a cat", "blurry", 5, 3, 0);
    ASSERT_TRUE(n.ok());
    EXPECT_LT(n->uncond.size(), p->uncond.size());
    EXPECT_EQ(n->uncond.front(), ids->bos);
    EXPECT_EQ(n->uncond.back(), ids->image);
    absl::StatusOr<Emu3PromptIds> empty = BuildEmu3Prompt(*tok, *ids, "", "", 4, 4, 0);
    ASSERT_FALSE(empty.ok());
    EXPECT_NE(empty.status().message().find("prompt"), std::string::npos);
    absl::StatusOr<Emu3PromptIds> longer = BuildEmu3Prompt(*tok, *ids, "a cat", "", 4, 4, 5);
    ASSERT_FALSE(longer.ok());
    EXPECT_NE(longer.status().message().find("over the limit of 5"), std::string::npos) << longer.status();
  }
}

TEST(Emu3SizesTest, TheRatioRuleAtThePublishedArea) {
  const std::vector<std::pair<int32_t, int32_t>> sizes = Emu3Sizes(720 * 720, 8);
  auto has = [&](int32_t w, int32_t h) {
    return std::find(sizes.begin(), sizes.end(), std::pair{w, h}) != sizes.end();
  };
  EXPECT_TRUE(has(720, 720));  // 1:1 -> 90 x 90 codes
  EXPECT_TRUE(has(960, 544));  // 16:9 -> round(120) x round(67.5) = 120 x 68 (Python rounds half to even)
  EXPECT_TRUE(has(544, 960));
  EXPECT_TRUE(has(1440, 360));  // 4:1
  EXPECT_FALSE(has(1024, 1024));
  EXPECT_TRUE(has(728, 720));   // 91 x 90: the hyperbola w h = 8100 grazes its rounding box
  EXPECT_FALSE(has(736, 720));  // 92 x 90: (91.5)(89.5) > 8100
  EXPECT_EQ(Emu3DefaultSize(720 * 720, 8), (std::pair{720, 720}));
  absl::StatusOr<Emu3Schedule> s = MakeEmu3Schedule(sizes, 720, 720, 8, 151846, Emu3SizeRule(720 * 720, 8));
  ASSERT_TRUE(s.ok());
  // 90 rows of 90 codes and a row end; the reference's 8,193 decode tokens add the last
  // row end, end of frame, end of image and EOS, which need no forward pass.
  EXPECT_EQ(s->l_dec, 90 * 91 - 1);
  EXPECT_EQ(s->l_dec + 4, 8193);
  EXPECT_EQ(s->forced[90], 151846);
  EXPECT_EQ(s->forced[89], -1);
  EXPECT_EQ(s->grid.width, 90);
  EXPECT_EQ(s->grid.row_break_tokens, 1);
  absl::StatusOr<Emu3Schedule> bad = MakeEmu3Schedule(sizes, 1024, 1024, 8, 151846, Emu3SizeRule(720 * 720, 8));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* part : {"1024x1024", "multiples of 8", "8100", "aspect ratio at most 4"}) {
    EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status();
  }
}

TEST(Emu3SizesTest, ThePublishedShapesForBenchmarks) {
  absl::StatusOr<PublishedEmu3> p = PublishedEmu3Gen();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.stack.num_kv_heads, 8);
  EXPECT_EQ(p->spec.logits(), 32768);
  EXPECT_EQ(p->spec.input.sampled_offset, 151854);
  EXPECT_EQ(p->schedule.l_dec, 8189);
  absl::StatusOr<PublishedEmu3> wide = PublishedEmu3Gen(960, 544);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->schedule.l_dec, 68 * 121 - 1);
  EXPECT_FALSE(PublishedEmu3Gen(1024, 1024).ok());
  // config.json's image_area sets the sizes: 512^2 makes 64 rows of 64 codes and a row end each.
  absl::StatusOr<PublishedEmu3> small = PublishedEmu3Gen(0, 0, 512 * 512);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->schedule.l_dec, 64 * 65 - 1);
  EXPECT_FALSE(PublishedEmu3Gen(720, 720, 512 * 512).ok());
}

TEST(Emu3FamilyTest, BothLayoutsLoadThroughTheRegistryAsTheSameModel) {
  std::vector<families::FamilyModel> models;
  for (const char* name : {"tiny-emu3-gen", "tiny-emu3-gen-hf"}) {
    absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(Tiny(name));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->family, "emu3");
    EXPECT_EQ(m->image_width, 32);  // image_area 32^2 at 8 px a code: 4 x 4 codes
    EXPECT_EQ(m->image_height, 32);
    EXPECT_EQ(m->image_tokens, 4 * 5 - 1);
    EXPECT_EQ(m->grid.width, 4);
    EXPECT_EQ(m->grid.row_break_tokens, 1);
    EXPECT_EQ(m->default_sampling.cfg_weight, 3.0f);
    EXPECT_EQ(m->default_sampling.top_k, 64);  // 2048 capped at the tiny codebook
    EXPECT_EQ(m->default_sampling.temperature, 1.0f);
    EXPECT_EQ(m->spec.logits(), 64);
    models.push_back(*std::move(m));
  }
  EXPECT_EQ(models[0].forced_tokens, models[1].forced_tokens);
  ASSERT_EQ(models[0].image_layouts.size(), models[1].image_layouts.size());
  bool has_40x24 = false;
  for (const engine::ImageLayout& l : models[0].image_layouts) has_40x24 |= l.width == 40 && l.height == 24;
  EXPECT_TRUE(has_40x24);
  // The transformers layout validates its vision decoder's tensors with the decoder's.
  EXPECT_TRUE(models[0].spec.decoder_tensors.empty());
  EXPECT_FALSE(models[1].spec.decoder_tensors.empty());
}

// A copy of a tiny checkpoint to break.
fs::path CopyOf(const std::string& name, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("emu3_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(Tiny(name), dir, fs::copy_options::recursive);
  return dir;
}

void EditConfig(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(file);
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(file) << j.dump();
}

std::string LoadError(const fs::path& dir, const families::FamilyOptions& family_options = {}) {
  engine::EngineOptions options;
  options.model_dir = dir.string();
  options.threads = 1;
  options.family_options = family_options;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  return e.ok() ? std::string("loaded") : std::string(e.status().message());
}

TEST(Emu3FamilyTest, CorruptOrMismatchedCheckpointsAreRefusedNamingTheFileOrTensor) {
  {  // A config whose decoder is wider than the weights: the first tensor named.
    const fs::path dir = CopyOf("tiny-emu3-gen", "wide");
    EditConfig(dir / "config.json", [](nlohmann::json& j) { j["hidden_size"] = 128; });
    EXPECT_NE(LoadError(dir).find("model.embed_tokens.weight"), std::string::npos) << LoadError(dir);
    fs::remove_all(dir);
  }
  {  // transformers layout, a vision decoder tensor of the wrong shape: named before anything loads.
    const fs::path dir = CopyOf("tiny-emu3-gen-hf", "vq");
    EditConfig(dir / "config.json", [](nlohmann::json& j) { j["vq_config"]["codebook_size"] = 32; });
    const std::string e = LoadError(dir);
    EXPECT_NE(e.find("vqmodel.quantize.embedding.weight"), std::string::npos) << e;
    fs::remove_all(dir);
  }
  {  // A truncated weights file.
    const fs::path dir = CopyOf("tiny-emu3-gen", "cut");
    fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") / 2);
    const std::string e = LoadError(dir);
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
    fs::remove_all(dir);
  }
  {  // BAAI layout without its vision tokenizer: the missing file named, with the option to fix it.
    const fs::path dir = CopyOf("tiny-emu3-gen", "novq");
    fs::remove_all(dir / "vision_tokenizer");
    const std::string e = LoadError(dir);
    EXPECT_NE(e.find("vision_tokenizer/config.json"), std::string::npos) << e;
    EXPECT_NE(e.find("vision_tokenizer_dir"), std::string::npos) << e;
    // ... found again through the option (relative to model_dir).
    fs::copy(Tiny("tiny-emu3-gen") + "/vision_tokenizer", dir / "vt", fs::copy_options::recursive);
    EXPECT_EQ(LoadError(dir, {{"vision_tokenizer_dir", "vt"}}), "loaded");
    EXPECT_NE(LoadError(dir, {{"vqgan_dir", "vt"}}).find("'vqgan_dir'"), std::string::npos);
    fs::remove_all(dir);
  }
  {  // A vision tokens file whose visual tokens do not follow one another.
    const fs::path dir = CopyOf("tiny-emu3-gen", "vis");
    std::ifstream in(dir / "emu3_vision_tokens.txt");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::swap(lines[5], lines[6]);
    std::ofstream out(dir / "emu3_vision_tokens.txt");
    for (const std::string& l : lines) out << l << "\n";
    out.close();
    const std::string e = LoadError(dir);
    EXPECT_NE(e.find("<|visual token 000002|>"), std::string::npos) << e;
    fs::remove_all(dir);
  }
  {  // config.json's special ids must be the tokenizer's.
    const fs::path dir = CopyOf("tiny-emu3-gen", "ids");
    EditConfig(dir / "config.json", [](nlohmann::json& j) { j["eol_token_id"] = 3; });
    const std::string e = LoadError(dir);
    EXPECT_NE(e.find("eol_token_id 3"), std::string::npos) << e;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace argen::emu3
