#include "engine/families/nextstep/nextstep_prompt.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::nextstep {

absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadNextStepTokenizer(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  // Qwen2's NFC normalizer: argen encodes text as given, the same ids for text
  // already in NFC (ASCII, and what keyboards and most sources produce).
  if (auto it = root.find("normalizer"); it != root.end() && it->is_object() && it->value("type", "") == "NFC") {
    *it = nullptr;
  }
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::LoadFromJson(root.dump(), path);
  if (!tok.ok()) return tok.status();
  return std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
}

absl::StatusOr<NextStepTokenIds> FindNextStepTokens(const tokenizer::Tokenizer& tokenizer,
                                                    const NextStepConfig& config) {
  NextStepTokenIds ids;
  struct Wanted {
    const char* content;
    int32_t* out;
    const char* field;  // config.json's id for it ("" when it states none)
    int32_t stated;
  };
  for (const Wanted& w :
       {Wanted{kImageAreaToken, &ids.image_area, "", -1}, Wanted{kBeginImageToken, &ids.boi, "boi", config.boi},
        Wanted{kEndImageToken, &ids.eoi, "eoi", config.eoi},
        Wanted{kImagePlaceholderToken, &ids.image_placeholder, "image_placeholder_id", config.image_placeholder_id}}) {
    const std::optional<int32_t> id = tokenizer.TokenToId(w.content);
    if (!id) {
      return absl::FailedPreconditionError(
          absl::StrCat(tokenizer.source(), ": token \"", w.content, "\" needed by the NextStep prompt is missing"));
    }
    if (w.stated >= 0 && *id != w.stated) {
      return absl::FailedPreconditionError(absl::StrCat("config.json: ", w.field, " ", w.stated, " is not the token \"",
                                                        w.content, "\" (id ", *id, " in ", tokenizer.source(), ")"));
    }
    *w.out = *id;
  }
  return ids;
}

absl::StatusOr<NextStepPromptIds> BuildNextStepPrompt(const tokenizer::Tokenizer& tokenizer,
                                                      const NextStepTokenIds& ids, std::string_view caption,
                                                      std::string_view negative_prompt, int32_t grid_w,
                                                      int32_t grid_h) {
  if (caption.empty()) return absl::InvalidArgumentError("prompt: caption is empty");
  if (grid_w <= 0 || grid_h <= 0) return absl::InvalidArgumentError("prompt: the token grid must be positive");
  // The pipeline tokenizes the prefix with special tokens and drops the BOS:
  // the same ids as without them (the post-processor only prepends).
  absl::StatusOr<std::vector<int32_t>> prefix =
      tokenizer.Encode(absl::StrCat(kImageAreaToken, grid_h, "*", grid_w), /*add_special_tokens=*/false);
  if (!prefix.ok()) return prefix.status();
  prefix->push_back(ids.boi);

  auto row = [&](const std::string& text, const char* field) -> absl::StatusOr<std::vector<int32_t>> {
    absl::StatusOr<std::vector<int32_t>> out = tokenizer.Encode(text, /*add_special_tokens=*/true);
    if (!out.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", out.status().message()));
    out->insert(out->end(), prefix->begin(), prefix->end());
    return out;
  };
  absl::StatusOr<std::vector<int32_t>> cond = row(absl::StrCat(std::string(caption), " ", kPositivePrompt), "prompt");
  if (!cond.ok()) return cond.status();
  absl::StatusOr<std::vector<int32_t>> uncond = row(
      negative_prompt.empty() ? std::string(kDefaultNegativePrompt) : std::string(negative_prompt), "negative_prompt");
  if (!uncond.ok()) return uncond.status();
  return NextStepPromptIds{*std::move(cond), *std::move(uncond)};
}

}  // namespace argen::nextstep
