// The generic batch engine: implements engine::Engine (engine/engine.h) over
// any model::Backend, for any model family (the family supplies the prompt
// encoder, the image decoder and its generation recipe). It owns the request
// bookkeeping (groups of CFG row pairs, their tokens) and nothing per
// element: each Step() is at most one Backend::Forward call of prompt
// queries per max_batch_rows rows of newly added groups and one of decode
// queries (one per row) per max_batch_rows running rows.
//
// Generation (as in the official Janus generation_inference.py): the prompt
// is prefilled for a cond and an uncond row per image, token 0 is sampled from
// the prefill's last position, and each later token from the decode step that
// fed the previous token (through the input stage) to both rows; CFG logits =
// uncond + w * (cond - uncond), softmax(logits / T). A sampled logit v is
// recorded as the input id sampled_offset + v; at a step the recipe forces,
// the forced id is recorded instead of the sample (it is still fed back, so
// it writes KV like any token). A group finishes after its layout's
// image_tokens tokens; its KV is freed at that moment (and by Remove() at any
// time).
//
// Image sizes: a request runs on its size's ImageRecipe (the layout, its
// forced tokens, its prompt encoder), which Prepare() resolves (an
// unsupported size is INVALID_ARGUMENT listing the sizes). The default
// size's recipe is the constructor's encoder with GenericEngineConfig's
// forced_tokens; the others come from make_recipe, made on first use and
// kept. Rows of different sizes decode in one batch: every row carries its
// own policy (l_dec) and steps, the backends nothing per batch.
//
// Continuous-token models (the backend's spec().vector_tokens(): NextStep-1):
// the backend's token head draws each token as token_dim floats
// (StepOutputs::token_vectors) and keeps it; the engine feeds token t back as
// the pair's kept vector (StepPlanBuilder::AddMadeVectorQuery) and records
// its floats' bits, token_dim words a token (engine/token_vectors.h), which
// DecodeImages hands the family's decoder as they are. Such a model forces
// no tokens (it has no input ids) and takes no parallel decoding
// (engine::ValidateRequest refuses it); progress counts tokens as for codes.
//
// Each Step() adds exactly one token to every group: newly added groups get
// token 0 from their prefill, the others one decode token; a request with
// parallel_window > 0 (engine/model/parallel_schedule.h) instead feeds one
// query per image row in flight, making several tokens per step, later ones
// early (its progress shows the leading run; RequestProgress::steps counts
// its steps). A request with speculative_window > 0 (engine/model/
// speculative.h) feeds each image's last token and its drafts, asks for the
// call's row logits, keeps what the acceptance rule takes (1 .. window tokens
// per image per step, images apart) and feeds the rest again next step
// (StepPlan::rewinds); its progress shows the tokens every image has. A
// backend call holds at most max_batch_rows queries (rows without parallel
// or speculative decoding), a request's at least.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "engine/model/parallel_schedule.h"
#include "engine/model/speculative.h"
#include "engine/sparse/policy_params.h"
#include "kernels/sparse/policy_types.h"

namespace argen::model {

// Caption -> (cond ids, uncond ids) of the chat-format generation prompt.
// What a request says about its two guidance rows' prompts.
struct PromptText {
  std::string caption;  // the conditional row's
  // The unconditional row's (what the image should not show); "": the
  // family's own unconditional prompt, which each family decides (Janus-Pro:
  // the caption's chat prompt with its text padded out; Lumina-mGPT: the
  // image header alone).
  std::string negative_prompt;
};
// The family's prompt recipe: text -> (cond ids, uncond ids); must be thread-safe.
using PromptEncoder =
    std::function<absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>>(const PromptText& text)>;
// A text model whose prompts arrive as embeddings (LlamaGen t2i: T5 features
// through its caption MLP): text -> each row's prompt as [len x hidden_size]
// input vectors, row-major (the two rows may differ in length); must be
// thread-safe. Such prompts have no token ids, so they are never shared
// across requests (a prompt row holds ids); the images of one request still
// share theirs.
struct PromptEmbeddings {
  std::vector<float> cond, uncond;
};
using PromptEmbedder = std::function<absl::StatusOr<PromptEmbeddings>(const PromptText& text)>;
// A class-conditional model's prompt: class id -> (cond ids, uncond ids)
// (LlamaGen c2i: [class] and [num_classes], rows of its class table).
using ClassEncoder =
    std::function<absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>>(int32_t class_id)>;
// Token grids -> images (the VQ decoder); must be thread-safe.
using ImageDecoder =
    std::function<absl::StatusOr<std::vector<engine::RgbImage>>(const std::vector<std::vector<int32_t>>& token_grids)>;

// Everything per image size: the layout (ModelInfo's), the tokens forced at
// its steps and the prompt recipe naming the size (Lumina-mGPT's header).
struct ImageRecipe {
  engine::ImageLayout layout;
  std::vector<int32_t> forced_tokens;  // [layout.image_tokens] or empty: -1 where sampled
  PromptEncoder encoder;
};
// The family's recipe of one of ModelInfo::image_layouts; thread-safe.
using ImageRecipeMaker = std::function<absl::StatusOr<ImageRecipe>(const engine::ImageLayout& layout)>;

struct GenericEngineConfig {
  // The model and the limits. The engine takes image_vocab, kv_budget_bytes,
  // kv_bytes_per_token_row and max_batch_rows from the backend (their owner,
  // which may have sized them itself: cuda "auto").
  engine::ModelInfo info;
  // The default size's: [image_tokens] or empty, the input id forced at step
  // t, -1 where sampled.
  std::vector<int32_t> forced_tokens;
  // The other sizes' recipes (info.image_layouts); null: the default size only.
  ImageRecipeMaker make_recipe;
  // Class-conditional models (info.num_classes > 0): requests' class_id ->
  // prompt ids, instead of the recipe's caption encoder.
  ClassEncoder class_encoder;
  // Text models whose prompts are embeddings: the caption's prompt recipe
  // instead of the recipe's encoder (every size).
  PromptEmbedder prompt_embedder;
  // ssd's head classification (the model's ssd_heads.json); null: ssd is refused.
  std::shared_ptr<const sparse::HeadClasses> ssd_heads;
  // Prompt-KV sharing (backend.h): the images of one request read one copy of
  // its cond prompt's KV and one of its uncond prompt's, where the backend
  // supports it. Off: every row holds its own (the A/B baseline).
  bool share_prompt_kv = true;
  // Sharing across requests (engine::EngineOptions): every request's rows
  // read its prompts from prompt rows (backend.h) shared by all the running
  // requests with the same prompt, where the backend has them.
  bool share_prompt_kv_across_requests = false;
};

class GenericEngine final : public engine::Engine {
 public:
  GenericEngine(std::unique_ptr<Backend> backend, PromptEncoder encoder, ImageDecoder decoder,
                GenericEngineConfig config);
  ~GenericEngine() override;

  const engine::ModelInfo& info() const override { return config_.info; }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& request) const override;
  bool CanAdd(const engine::PreparedRequest& request) const override;
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr request) override;
  absl::StatusOr<engine::StepReport> Step() override;
  void Remove(engine::GroupId id) override;
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override;
  int64_t KvBytesInUse() const override { return kv_.BytesInUse(); }
  int64_t SharedKvBytes() const override { return kv_.SharedBytes(); }
  int32_t RunningRows() const override { return kv_.RowsInUse(); }
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(
      const std::vector<std::vector<int32_t>>& token_grids) override;

  Backend& backend() { return *backend_; }
  // The backend's rows: placement, sharing and the KV ledger.
  kv::KvManager& kv() { return kv_; }

 private:
  // The prompts shared across requests (the KV manager's; `filled` is ours to set).
  using SharedPrompts = kv::SharedPrompts;

  // A group: the request object (engine/engine.h) it runs, whose progress
  // is its tokens, tokens_done() of them per image; it is prefilled once it
  // has one (the rows' own step counters live in the KV manager's table,
  // model::RowState). Its rows (cond, uncond per image) and, sharing across
  // requests, the shared prompts they read are what the KV manager placed
  // for it (kv::RequestRows).
  struct Group : kv::RequestRows {
    engine::RequestPtr request;                 // shared with the driver (the scheduler's Job)
    std::shared_ptr<const ImageRecipe> recipe;  // its size's
    std::vector<SamplingSpec> sampling;         // per image
    // parallel_window > 0: the request's schedule and every image's tokens
    // by index (-1 where not made yet; forced ones from the start).
    std::unique_ptr<ParallelSchedule> parallel;
    std::vector<std::vector<int32_t>> made;
    // speculative_window > 0: every image's drafts and verified tokens.
    std::vector<SpeculativeImage> speculative;
    const engine::PreparedRequest& prepared() const { return request->prepared; }
    engine::RequestProgress& progress() { return request->progress; }
    const engine::RequestProgress& progress() const { return request->progress; }
    int32_t tokens_done() const { return request->progress.tokens_done; }
  };

  // How a request of `images` images shares prompt KV (the config's sharing switches).
  // A request's prompt-KV sharing; prompts of embeddings are never shared across requests.
  kv::Sharing SharingOf(int32_t images, bool embedded) const;
  // The rows the KV manager places for a request.
  kv::RequestShape ShapeOf(const engine::PreparedRequest& request) const;
  // sparse::ResolvePolicy with the layout's grid and the model's head classification.
  absl::StatusOr<sparse::ResolvedPolicy> Resolve(const sparse::PolicyParams& params,
                                                 const engine::ImageLayout& layout) const;
  // The recipe of `layout` (one of the model's), made on first use; thread-safe.
  absl::StatusOr<std::shared_ptr<const ImageRecipe>> Recipe(const engine::ImageLayout& layout) const;
  // Lengths, max_prompt_tokens and ids inside the text vocabulary, so a bad
  // request fails in Prepare/Add and never inside a shared Step().
  absl::Status ValidatePromptIds(const std::vector<int32_t>& cond, const std::vector<int32_t>& uncond) const;
  // A prepared request's prompts: ids, or embeddings indexed by their positions.
  absl::Status ValidatePrompts(const engine::PreparedRequest& p) const;
  absl::Status PrefillPending(engine::StepReport* report);
  absl::Status DecodeRunning(const std::vector<engine::GroupId>& ids, engine::StepReport* report);
  // Records token `t` of every image of `g`, finishing (and freeing) it at the end.
  // A vector model's: `vectors` holds token_dim floats per image (else null).
  void Record(engine::GroupId id, Group& g, const int32_t* sampled, const float* vectors, engine::StepReport* report);
  // Parallel decoding: the step's queries of `g` and their samples
  // ([image][query]) made, its progress moved to the leading run.
  void RecordParallel(engine::GroupId id, Group& g, const int32_t* sampled, engine::StepReport* report);
  // Speculative decoding: verifies the step's outputs of `g` (`logits`: its
  // unfinished images' output points' rows, in order), its progress moved
  // to the tokens every image has.
  void RecordSpeculative(engine::GroupId id, Group& g, const float* logits, engine::StepReport* report);
  // The group's queries in this step's decode call (one per row without parallel decoding).
  int32_t DecodeQueriesOf(Group& g) const;
  void FreeRows(Group& g);
  // StepOutputs::token_vectors: the step's vector buffer for a vector model, else null.
  float* VectorsOut() { return token_dim_ > 0 ? batch_vectors_.data() : nullptr; }

  std::unique_ptr<Backend> backend_;
  kv::KvManager kv_;  // after backend_: freed before it
  PromptEncoder encoder_;
  ImageDecoder decoder_;
  GenericEngineConfig config_;
  int32_t sampled_offset_ = 0;
  int32_t token_dim_ = 0;          // > 0: a vector model (floats per token)
  mutable std::mutex recipes_mu_;  // Prepare() is thread-safe
  mutable std::map<std::pair<int32_t, int32_t>, std::shared_ptr<const ImageRecipe>> recipes_;  // by (width, height)
  std::map<engine::GroupId, Group> groups_;  // ordered: batches are built in Add order
  std::vector<engine::GroupId> pending_;     // added since the last Step
  engine::GroupId next_id_ = 1;

  // Per-step batch arrays, reused (cleared, never shrunk) across steps.
  std::vector<SharedPrompts::iterator> batch_filled_;  // the shared prompts the call fills (its prompt rows)
  std::vector<int32_t> batch_sampled_;
  std::vector<float> batch_logits_;                   // the call's row logits, when a speculative group is in it
  std::unique_ptr<HostSampler> speculative_sampler_;  // made on first use
  std::vector<float> batch_vectors_;                  // vector models: [output points x token_dim]
  StepPlanBuilder step_plan_;                         // the backend call's plan of query tokens
  std::vector<std::pair<engine::GroupId, int32_t>> batch_groups_;  // group, images in the batch
  std::vector<engine::GroupId> decode_ids_;
};

}  // namespace argen::model
