#include "engine/families/emu3/emu3_prompt.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace argen::emu3 {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::StatusOr<int32_t> RequireToken(const tokenizer::Tokenizer& tokenizer, std::string_view content) {
  auto id = tokenizer.TokenToId(content);
  if (!id) {
    return absl::FailedPreconditionError(
        absl::StrCat(tokenizer.source(), ": token \"", Sv(content), "\" needed by the Emu3 prompt is missing"));
  }
  return *id;
}

}  // namespace

std::string VisualTokenName(int32_t code) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "<|visual token %06d|>", code);
  return buf;
}

absl::StatusOr<Emu3TokenIds> FindEmu3Tokens(const tokenizer::Tokenizer& tokenizer, int32_t codebook_size) {
  Emu3TokenIds ids;
  for (auto [content, out] :
       {std::pair{kBosToken, &ids.bos}, std::pair{kEosToken, &ids.eos}, std::pair{kPadToken, &ids.pad},
        std::pair{kRowEndToken, &ids.row_end}, std::pair{kEndOfFrameToken, &ids.end_of_frame},
        std::pair{kImageToken, &ids.image}, std::pair{kBeginImageToken, &ids.begin_image},
        std::pair{kEndImageToken, &ids.end_image}}) {
    absl::StatusOr<int32_t> id = RequireToken(tokenizer, content);
    if (!id.ok()) return id.status();
    *out = *id;
  }
  absl::StatusOr<int32_t> first = RequireToken(tokenizer, VisualTokenName(0));
  if (!first.ok()) return first.status();
  ids.first_visual = *first;
  // The sampled range is contiguous: code k must be token first_visual + k.
  for (int32_t k = 1; k < codebook_size; ++k) {
    const std::string name = VisualTokenName(k);
    auto id = tokenizer.TokenToId(name);
    if (!id || *id != ids.first_visual + k) {
      return absl::FailedPreconditionError(absl::StrCat(
          tokenizer.source(), ": token \"", name, "\" is ", id ? absl::StrCat("id ", *id) : std::string("missing"),
          ", expected id ", ids.first_visual + k, " (visual tokens follow one another)"));
    }
  }
  return ids;
}

absl::StatusOr<Emu3PromptIds> BuildEmu3Prompt(const tokenizer::Tokenizer& tokenizer, const Emu3TokenIds& ids,
                                              std::string_view caption, std::string_view negative_prompt,
                                              int32_t grid_w, int32_t grid_h, int32_t max_prompt_tokens) {
  if (caption.empty()) return absl::InvalidArgumentError("prompt: caption is empty");
  if (grid_w <= 0 || grid_h <= 0) return absl::InvalidArgumentError("prompt: the code grid must be positive");
  auto size_ids = tokenizer.Encode(absl::StrCat(grid_h, "*", grid_w), /*add_special_tokens=*/false);
  if (!size_ids.ok()) return size_ids.status();
  std::vector<int32_t> header = {ids.begin_image};
  header.insert(header.end(), size_ids->begin(), size_ids->end());
  header.push_back(ids.image);

  auto row = [&](const std::string& text, const char* field) -> absl::StatusOr<std::vector<int32_t>> {
    auto text_ids = tokenizer.Encode(text, /*add_special_tokens=*/false);
    if (!text_ids.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", text_ids.status().message()));
    std::vector<int32_t> out = {ids.bos};
    out.insert(out.end(), text_ids->begin(), text_ids->end());
    out.insert(out.end(), header.begin(), header.end());
    if (max_prompt_tokens > 0 && static_cast<int64_t>(out.size()) > max_prompt_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": gives ", out.size(), " prompt tokens, over the limit of ", max_prompt_tokens));
    }
    return out;
  };
  Emu3PromptIds p;
  absl::StatusOr<std::vector<int32_t>> cond = row(absl::StrCat(Sv(caption), kPositiveSuffix), "prompt");
  if (!cond.ok()) return cond.status();
  absl::StatusOr<std::vector<int32_t>> uncond = row(
      negative_prompt.empty() ? std::string(kDefaultNegativePrompt) : std::string(negative_prompt), "negative_prompt");
  if (!uncond.ok()) return uncond.status();
  p.cond = *std::move(cond);
  p.uncond = *std::move(uncond);
  return p;
}

}  // namespace argen::emu3
