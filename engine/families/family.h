// A model family: everything that differs between models, behind one
// interface, so the engine (engine/model/generic_engine.h) and the devices
// (engine/cpu, engine/cuda) never name a family. A family lives in its own
// folder (engine/families/<family>/) and is listed once in the registry
// (engine/families/registry.cc). From a checkpoint directory it makes:
//   * the ModelSpec: the decoder stack with its switches, the input and
//     output stages, and the one tensor map (validated, then loaded by each
//     device);
//   * its generation recipe per image size (an engine::ImageLayout: decode
//     length, image geometry; with its forced tokens and prompt recipe, a
//     model::ImageRecipe), the default size's below, the others made on
//     demand by make_recipes;
//   * its prompt recipe (model::PromptEncoder): caption and negative prompt ->
//     the cond ids and the guidance row's ids; an empty negative prompt gets
//     the family's own unconditional prompt (a new family decides its default);
//   * the binding of its image decoder (token ids -> RGB) on the CPU or GPU;
//   * a continuous-token model (spec.vector_tokens(): NextStep-1): its token
//     head (make_token_head), which the backend runs as its output stage;
//     its image decoder then takes token vectors as the engine records them
//     (engine/token_vectors.h: token_dim words a token).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/model/generic_engine.h"
#include "engine/model/model_spec.h"
#include "engine/model/token_head.h"
#include "engine/vq/vq_precision.h"
#include "kernels/sparse/policy_types.h"

namespace argen::families {

struct DecoderOptions {
  bool gpu = false;                                              // the GPU decoder (else the CPU one)
  vq::DecoderPrecision precision = vq::DecoderPrecision::kAuto;  // GPU: auto (bf16, fp32 fallback), bf16, tf32, fp32
};

// What the engine tells a family's text encoder (FamilyModel::make_prompt_embedder).
struct EmbedderOptions {
  bool engine_on_gpu = false;  // the engine's backend is "cuda" (a family may run its encoder there too)
};

struct FamilyModel {
  std::string family;  // the registry name, e.g. "janus"
  model::ModelSpec spec;
  // The default image size (a request naming none):
  int32_t image_size = 0;    // pixels per side (the longer one)
  int32_t token_grid = 0;    // image code rows (and columns) per image
  int32_t image_tokens = 0;  // decode tokens per image (L_dec), forced ones included
  // The decode tokens' layout (rows, row breaks), which the grid policies and
  // ssd read; width 0: a square grid of image_tokens.
  sparse::GridGeometry grid;
  // [image_tokens] or empty: the input id forced at step t, -1 where sampled.
  std::vector<int32_t> forced_tokens;
  // The family's published sampling defaults (engine::ModelInfo::default_sampling).
  engine::SamplingParams default_sampling;
  // Positions beyond the prompt hold the decode tokens: prompt + image_tokens <= this.
  int32_t max_position_embeddings = 0;
  // Makes the default size's prompt recipe: caption -> (cond ids, uncond
  // ids), thread-safe (reads the tokenizer only when called).
  std::function<absl::StatusOr<model::PromptEncoder>()> make_prompt;
  // The default size in pixels (0: image_size square) and every size a
  // request may name, the default among them (empty: the default alone).
  int32_t image_width = 0, image_height = 0;
  std::vector<engine::ImageLayout> image_layouts;
  // The sizes' rule in words (engine::ModelInfo::size_rule); empty: none.
  std::string size_rule;
  // Makes the maker of every listed size's recipe (reads the tokenizer once,
  // failing where it lacks a size's tokens); null: the default size only.
  std::function<absl::StatusOr<model::ImageRecipeMaker>()> make_recipes;
  // The image decoder over `checkpoint` (EngineOptions::vq_backend and
  // vq_precision decide `options`). Token grids are the engine's recorded
  // tokens (engine::GroupState::tokens), of any listed size, mixed in one call.
  std::function<absl::StatusOr<model::ImageDecoder>(const checkpoint::Checkpoint& checkpoint,
                                                    const DecoderOptions& options)>
      make_decoder;
  // A continuous-token model's (spec.vector_tokens()) output stage over
  // `checkpoint` (BackendOptions::token_head); null for a code model.
  std::function<absl::StatusOr<std::shared_ptr<const model::TokenHead>>(const checkpoint::Checkpoint& checkpoint)>
      make_token_head;
  // Non-empty: the stack's weights are this one file of any name (LlamaGen's
  // c2i_L_384.pt), not the directory's hub layout (checkpoint::Checkpoint::Open).
  std::string weights_file;
  // Non-null: opens the stack's weights instead (a layout whose tensors need
  // renaming or reordering to the spec's names: Anole's Meta consolidated.pth).
  std::function<absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>>()> open_checkpoint;
  // Class-conditional models: the number of classes (engine::ModelInfo::
  // num_classes) and class id -> prompt ids; 0 and null for text models.
  int32_t num_classes = 0;
  model::ClassEncoder class_encoder;
  // Text models whose prompts arrive as embeddings (LlamaGen t2i): makes the
  // caption -> prompt vectors recipe (loads its text encoder when called, so
  // a caller after the spec alone pays nothing; `options` say where the
  // engine runs); null for id prompts.
  std::function<absl::StatusOr<model::PromptEmbedder>(const EmbedderOptions& options)> make_prompt_embedder;
};

// Options only some family understands, by name (engine::EngineOptions::
// family_options; the server's family_options / vqgan_dir keys), e.g.
// Lumina-mGPT's vqgan_dir. Each family parses and checks its own keys
// (CheckFamilyOptions): a key it does not take is an error naming the key and
// the family, so a typo or an option meant for another family never passes
// silently.
using FamilyOptions = std::map<std::string, std::string>;

// OkStatus when every key of `options` is one of `taken`; else
// InvalidArgument naming the first other key, the family and what it takes.
inline absl::Status CheckFamilyOptions(const std::string& family, const FamilyOptions& options,
                                       std::initializer_list<const char*> taken) {
  for (const auto& [key, value] : options) {
    if (std::find(taken.begin(), taken.end(), key) != taken.end()) continue;
    std::string known;
    for (const char* t : taken) absl::StrAppend(&known, known.empty() ? "" : ", ", t);
    return absl::InvalidArgumentError(absl::StrCat("family option '", key, "': the ", family,
                                                   " family takes no such option (it takes ",
                                                   known.empty() ? "none" : known, ")"));
  }
  return absl::OkStatus();
}

// The identity of a checkpoint, from its config.json.
struct ConfigIdentity {
  std::string model_type;                  // "" when absent
  std::vector<std::string> architectures;  // empty when absent
  std::string dir_name;                    // the model directory's own name (Anole's -hf conversion is told by it)
};

struct Family {
  std::string name;     // "janus"
  std::string matches;  // what it recognises, for messages: "model_type multi_modality"
  std::function<bool(const ConfigIdentity&)> recognises;
  // Optional: recognises a directory without config.json by its files
  // (LlamaGen's published c2i_<size>_<px>.pt).
  std::function<bool(const std::string& model_dir)> recognises_dir;
  // Checks `options` (CheckFamilyOptions) before anything else.
  std::function<absl::StatusOr<FamilyModel>(const std::string& model_dir, const FamilyOptions& options)> load;
};

}  // namespace argen::families
