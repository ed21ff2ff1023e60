// The Emu3-Gen family (BAAI/Emu3-Gen with BAAI/Emu3-VisionTokenizer, or the
// transformers-native BAAI/Emu3-Gen-hf; docs/checkpoint-format.md "Emu3"):
// config.json in either layout (emu3_config.h), the plain-Llama tensor map
// (emu3_spec.h), the tokenizer (emu3_tokenizer.h), the prompt recipe with
// its negative prompt (emu3_prompt.h), every size of Emu3's ratio rule with
// its forced row ends (emu3_schedule.h) and the vision decoder
// (engine/emu3vq, CPU). Sampling defaults as BAAI's image_generation.py:
// cfg 3.0, top-k 2048, temperature 1.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/families/emu3/emu3_config.h"
#include "engine/families/emu3/emu3_prompt.h"
#include "engine/families/emu3/emu3_schedule.h"
#include "engine/families/family.h"
#include "engine/model/generic_engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::emu3 {

// The family option naming BAAI's vision tokenizer directory (config.json +
// model.safetensors of BAAI/Emu3-VisionTokenizer); relative to model_dir;
// default <model_dir>/vision_tokenizer. The transformers layout has it inside.
inline constexpr char kVisionTokenizerDirOption[] = "vision_tokenizer_dir";
inline constexpr char kDefaultVisionTokenizerDir[] = "vision_tokenizer";

families::Family Emu3Family();

absl::StatusOr<families::FamilyModel> LoadEmu3(const std::string& model_dir, const families::FamilyOptions& options);

// The recorded decode tokens of one image (l_dec ids, row ends included) ->
// its codes in raster order, the size told by the length and the first row
// end among `sizes`. InvalidArgument naming the image and position for a
// wrong length, a row end that is not the row-end id, or an id outside the
// visual tokens.
struct Emu3CodeGrid {
  int32_t grid_w = 0, grid_h = 0;
  std::vector<int32_t> codes;
};
absl::StatusOr<Emu3CodeGrid> TokensToCodes(const std::vector<int32_t>& tokens,
                                           const std::vector<std::pair<int32_t, int32_t>>& sizes,
                                           int32_t pixels_per_code, const Emu3TokenIds& ids, int32_t codebook_size,
                                           size_t image);

// A prompt recipe for a w x h code grid over `tokenizer`: caption -> (cond,
// uncond) with `negative_prompt` (empty: Emu3's default).
model::PromptEncoder Emu3PromptEncoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer, Emu3TokenIds ids,
                                       int32_t grid_w, int32_t grid_h, std::string negative_prompt = "");

}  // namespace argen::emu3
