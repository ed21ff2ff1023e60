// Malformed tokenizer.json files give errors naming the file and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/tokenizer/tests/golden_paths.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::tokenizer {
namespace {

class TokenizerErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("argen_tok_err_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // Loads text as a file; expects an error mentioning the path and every needle.
  void ExpectError(const std::string& text, std::initializer_list<std::string> needles) {
    const std::string path = Write("tokenizer.json", text);
    auto tok = Tokenizer::LoadFromFile(path);
    ASSERT_FALSE(tok.ok());
    const std::string msg(tok.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing \"" << n << "\" in: " << msg;
  }

  std::filesystem::path dir_;
};

TEST_F(TokenizerErrorsTest, MissingFile) {
  auto tok = Tokenizer::LoadFromFile((dir_ / "nope.json").string());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tok.status().message().find("nope.json"), std::string::npos);
}

TEST_F(TokenizerErrorsTest, BadJson) { ExpectError("{\"model\": {\"type\": \"BPE\",", {"JSON"}); }

TEST_F(TokenizerErrorsTest, UnknownModelType) {
  ExpectError(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})", {"model.type", "Unigram"});
}

TEST_F(TokenizerErrorsTest, MissingModel) { ExpectError(R"({"added_tokens": []})", {"model"}); }

TEST_F(TokenizerErrorsTest, MissingVocab) {
  ExpectError(R"({"model": {"type": "BPE", "merges": []}})", {"model.vocab", "missing"});
  ExpectError(R"({"model": {"type": "WordLevel", "unk_token": "[UNK]"}})", {"model.vocab", "missing"});
}

TEST_F(TokenizerErrorsTest, BadVocabId) {
  ExpectError(R"({"model": {"type": "WordLevel", "vocab": {"a": "zero"}}})", {"model.vocab", "\"a\""});
}

TEST_F(TokenizerErrorsTest, MergeOutsideVocab) {
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})",
              {"model.merges[0]", "\"ab\""});
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "c"]]}})", {"merges[0]", "\"c\""});
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a  b c"]}})", {"merges[0]"});
}

TEST_F(TokenizerErrorsTest, UnsupportedPieces) {
  const std::string model = R"("model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"})";
  ExpectError("{" + model + R"(, "pre_tokenizer": {"type": "Metaspace"}})", {"pre_tokenizer.type", "Metaspace"});
  ExpectError("{" + model + R"(, "normalizer": {"type": "Lowercase"}})", {"normalizer", "Lowercase"});
  ExpectError("{" + model + R"(, "decoder": {"type": "CTC"}})", {"decoder.type", "CTC"});
  ExpectError(
      "{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"}})",
      {"pre_tokenizer.pattern.Regex", "unmatched parenthesis"});
  ExpectError(
      "{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}})",
      {"pre_tokenizer.behavior", "Sideways"});
  ExpectError("{" + model + R"(, "added_tokens": [{"id": 5}]})", {"added_tokens[0].content"});
}

TEST_F(TokenizerErrorsTest, LlamaTokenizerConfigSetsBos) {
  // transformers' LlamaTokenizerFast puts bos (and eos when asked) around the text.
  const std::string json =
      R"({"model": {"type": "WordLevel", "vocab": {"<s>": 0, "</s>": 1, "hi": 2, "[UNK]": 3}, "unk_token": "[UNK]"},
          "pre_tokenizer": {"type": "WhitespaceSplit"}})";
  const std::string path = Write("tokenizer.json", json);
  Write(
      "tokenizer_config.json",
      R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": {"content": "<s>"}, "eos_token": "</s>", "add_eos_token": true})");
  auto tok = Tokenizer::LoadFromFile(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = tok->Encode("hi there");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 2, 3, 1}));
  Write("tokenizer_config.json", R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<missing>"})");
  auto bad = Tokenizer::LoadFromFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer_config.json"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("bos_token"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace argen::tokenizer
