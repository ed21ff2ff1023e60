#include "engine/families/emu3/emu3_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace argen::emu3 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ByteLevelText(const std::string& bytes) {
  std::u32string chars;
  chars.reserve(bytes.size());
  for (unsigned char b : bytes) chars.push_back(tokenizer::ByteToChar(b));
  return tokenizer::EncodeUtf8(chars);
}

// The two parts BPE reaches for `token` using merges ranked below `rank`.
std::vector<std::string> SplitBelow(const absl::flat_hash_map<std::string, int32_t>& ranks, const std::string& token,
                                    int32_t rank) {
  std::vector<std::string> parts;
  for (char c : token) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    int32_t best = -1, best_rank = rank;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && it->second < best_rank) {
        best_rank = it->second;
        best = static_cast<int32_t>(i);
      }
    }
    if (best < 0) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  return parts;
}

}  // namespace

absl::StatusOr<std::string> TiktokenToTokenizerJson(const std::string& tiktoken_path,
                                                    const std::string& vision_tokens_path) {
  std::ifstream in(tiktoken_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(tiktoken_path, ": cannot open"));
  std::vector<std::string> by_rank;
  absl::flat_hash_map<std::string, int32_t> ranks;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    std::string bytes;
    int32_t rank = -1;
    if (f.size() != 2 || !absl::Base64Unescape(f[0], &bytes) || bytes.empty() || !absl::SimpleAtoi(f[1], &rank) ||
        rank != static_cast<int32_t>(by_rank.size()) || !ranks.emplace(bytes, rank).second) {
      return absl::InvalidArgumentError(absl::StrCat(tiktoken_path, ":", line_no,
                                                     ": expected '<base64 token> <rank>' with ranks 0, 1, ... in "
                                                     "order and every token once"));
    }
    by_rank.push_back(std::move(bytes));
  }
  if (by_rank.empty()) return absl::InvalidArgumentError(absl::StrCat(tiktoken_path, ": no tokens"));

  json vocab = json::object();
  json merges = json::array();
  for (int32_t r = 0; r < static_cast<int32_t>(by_rank.size()); ++r) {
    const std::string& t = by_rank[r];
    vocab[ByteLevelText(t)] = r;
    if (t.size() == 1) continue;
    std::vector<std::string> parts = SplitBelow(ranks, t, r);
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(tiktoken_path, ": the token of rank ", r, " is not a merge of two tokens of lower rank"));
    }
    merges.push_back(absl::StrCat(ByteLevelText(parts[0]), " ", ByteLevelText(parts[1])));
  }

  std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 205; ++i) specials.push_back(absl::StrCat("<|extra_", i, "|>"));
  std::ifstream vt(vision_tokens_path, std::ios::binary);
  if (!vt) return absl::NotFoundError(absl::StrCat(vision_tokens_path, ": cannot open"));
  while (std::getline(vt, line)) {
    std::string t(absl::StripAsciiWhitespace(line));
    if (!t.empty()) specials.push_back(std::move(t));
  }
  json added = json::array();
  for (size_t i = 0; i < specials.size(); ++i) {
    const int32_t id = static_cast<int32_t>(by_rank.size() + i);
    added.push_back({{"id", id},
                     {"content", specials[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json root = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", kQwenSplitPattern}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges}}}};
  return root.dump();
}

absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadEmu3Tokenizer(const std::string& model_dir,
                                                                              Emu3Layout layout) {
  absl::StatusOr<tokenizer::Tokenizer> tok;
  if (layout == Emu3Layout::kTransformers) {
    tok = tokenizer::Tokenizer::LoadFromFile((fs::path(model_dir) / "tokenizer.json").string());
  } else {
    const std::string ranks = (fs::path(model_dir) / kTiktokenFile).string();
    absl::StatusOr<std::string> text =
        TiktokenToTokenizerJson(ranks, (fs::path(model_dir) / kVisionTokensFile).string());
    if (!text.ok()) return text.status();
    tok = tokenizer::Tokenizer::LoadFromJson(*text, ranks);
  }
  if (!tok.ok()) return tok.status();
  return std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
}

}  // namespace argen::emu3
