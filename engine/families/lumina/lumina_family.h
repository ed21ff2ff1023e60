// The Lumina-mGPT family (Alpha-VLLM/Lumina-mGPT: Chameleon architecture,
// model_type "chameleon"; docs/lumina-mgpt.md): config.json with its
// vocabulary_map (lumina_config.h), the HF tensor map (lumina_spec.h), the
// prompt recipe (engine/families/lumina/lumina_prompt.h: the guidance row is the
// image header alone, so the two rows of a pair differ in length), the decode
// schedule with forced row breaks (lumina_schedule.h) and Meta's Chameleon
// VQGAN decoder from vqgan.yaml + vqgan.ckpt (CPU: engine/vqgan; GPU:
// engine/vq_cuda through lumina_vq16.h for one square size, the other sizes
// on the CPU decoder).
//
// Every supported size per request (SupportedSizes; each its own layout,
// forced row breaks and prompt header, made on first use); the default is
// the first of argen_image_sizes, else the square target of the checkpoint
// (512, 768 or 1024, from the directory name's "-512" / "-768" / "-1024"
// suffix as Alpha-VLLM names them). Sampling defaults as Lumina-mGPT's
// README: cfg 4.0, image top-k 2000.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/families/family.h"
#include "engine/families/lumina/chameleon_vocab.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/families/lumina/lumina_schedule.h"
#include "engine/model/generic_engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::lumina {

inline constexpr float kDefaultCfgWeight = 4.0f;
inline constexpr int32_t kDefaultImageTopK = 2000;
inline constexpr char kDefaultVqganDir[] = "tokenizer";

// The family options Lumina-mGPT takes (families::FamilyOptions).
inline constexpr char kVqganDirOption[] = "vqgan_dir";
struct LuminaOptions {
  // The directory of Meta's Chameleon image tokenizer (vqgan.yaml,
  // vqgan.ckpt), kept apart from the language model; empty:
  // <model_dir>/tokenizer. Relative paths are relative to model_dir.
  std::string vqgan_dir;
};
// InvalidArgument naming any key but vqgan_dir (families::CheckFamilyOptions).
absl::StatusOr<LuminaOptions> ParseLuminaOptions(const families::FamilyOptions& options);

families::Family LuminaFamily();

absl::StatusOr<families::FamilyModel> LoadLumina(const std::string& model_dir, const families::FamilyOptions& options);

// The sizes a checkpoint supports: argen_image_sizes, else CropSizeList of
// the target named by the directory; FailedPrecondition when neither says.
absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SupportedSizes(const LuminaConfig& config,
                                                                        const std::string& model_dir);

// Where vqgan.yaml and vqgan.ckpt are: options.vqgan_dir (relative to
// model_dir) or <model_dir>/tokenizer.
std::string VqganDir(const std::string& model_dir, const LuminaOptions& options);

// The recorded decode tokens of one image (l_dec ids, row breaks included)
// -> its VQGAN codes in raster order. InvalidArgument naming the image and
// position for a wrong length, a row end that is not the new-line id or an
// id outside the image tokens.
absl::StatusOr<std::vector<int32_t>> TokensToCodes(const std::vector<int32_t>& tokens, const LuminaSchedule& schedule,
                                                   const ImageTokenRange& range, int32_t new_line_id, size_t image);

// The schedule of one recorded sequence of any of `sizes`: the size whose
// decode length it has and whose rows are as long as its first row (the
// first new line). InvalidArgument naming the image when none is.
absl::StatusOr<LuminaSchedule> ScheduleOfTokens(const std::vector<int32_t>& tokens,
                                                const std::vector<std::pair<int32_t, int32_t>>& sizes,
                                                int32_t new_line_id, size_t image);

// tokenizer.json, checked against config.json's ids of the loop's special tokens.
absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadLuminaTokenizer(const std::string& model_dir,
                                                                                 const LuminaConfig& config);

// Caption -> (<s> human turn <reserved08706> + header, header) for W x H.
absl::StatusOr<model::PromptEncoder> LuminaPromptEncoder(const std::string& model_dir, const LuminaConfig& config,
                                                         int32_t width, int32_t height);
absl::StatusOr<model::PromptEncoder> LuminaPromptEncoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                                                         int32_t width, int32_t height);

// Every size's recipe (its schedule's forced new lines and its prompt) over
// one tokenizer; an error now when the tokenizer lacks a size's tokens.
absl::StatusOr<model::ImageRecipeMaker> LuminaRecipes(const std::string& model_dir, const LuminaConfig& config,
                                                      const std::vector<std::pair<int32_t, int32_t>>& sizes,
                                                      int32_t new_line_id);

}  // namespace argen::lumina
