// The engine contract: what the scheduler drives, whatever the backend.
//
// A request becomes a *group* of 2 x num_images rows (cond, uncond pairs for
// classifier-free guidance). The scheduler adds groups between steps; each
// Step() prefills the groups added since the last step and decodes one image
// token for every running group, so requests join and leave at step
// boundaries (continuous batching). KV memory is owned by the backend and is
// bounded per group by its sparsity policy (PreparedRequest::kv_bytes).
//
// The engine owns the limits (ModelInfo: max_images_per_request,
// max_batch_rows, kv_budget_bytes, max_prompt_tokens) and the request rules
// (engine/request_rules.h): Prepare() enforces them, GetModelInfo reports
// them, and the scheduler admits by them. The KV ledger is the backend's
// pool: CanAdd() says exactly whether Add() would place a request now.
//
// One request object from admission to delivery (Request, below): Prepare()
// validates, tokenizes, and resolves the request's image layout and sparsity
// policy, once; the scheduler wraps the result in a Request and hands the
// engine that one object (Add takes the RequestPtr, the engine keeps the
// pointer, no copy). The engine writes the request's progress into it at
// every Step (its one progress counter and its tokens), and the scheduler
// reads progress, layout and policy from it; nothing downstream of Prepare
// computes them again.
//
// Threading: Prepare() and DecodeImages() are thread-safe; Add/CanAdd/Step/
// Remove/State/KvBytesInUse are called from one thread (the scheduler's loop),
// which is also the one that reads a running request's progress.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/weight_format.h"
#include "engine/sparse/policy_params.h"

namespace argen::engine {

struct SamplingParams {
  float temperature = 1.0f;  // [0, 100]; 0: greedy (argmax of the guided logits)
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float cfg_weight = 5.0f;   // logits = uncond + w * (cond - uncond), [0, 100]
  uint64_t seed = 0;         // image i of a request draws from stream (seed, i)
};

// One image size a model makes, and its decode sequence: the family's layout
// of that size (Janus: its one square; Lumina-mGPT: each supported W x H).
// A request names its size (GenerationRequest::width, height) and runs on
// its own layout: its L_dec, grid, forced tokens, prompt and KV need.
struct ImageLayout {
  int32_t width = 0, height = 0;   // pixels
  int32_t grid_w = 0, grid_h = 0;  // code columns, code rows
  int32_t image_tokens = 0;        // decode tokens per image: L_dec, forced ones included
  // The decode tokens' layout for the policies (rows, row breaks); width 0:
  // a square grid of image_tokens.
  sparse::GridGeometry grid;
  bool operator==(const ImageLayout& o) const {
    return width == o.width && height == o.height && grid_w == o.grid_w && grid_h == o.grid_h &&
           image_tokens == o.image_tokens && grid.width == o.grid.width &&
           grid.row_break_tokens == o.grid.row_break_tokens && grid.l_dec == o.grid.l_dec;
  }
};

struct ModelInfo {
  std::string name;     // checkpoint directory name
  std::string family;   // model family (engine/families/registry.h), e.g. "janus"
  std::string backend;  // "cpu" or "cuda"
  // The default image size's layout (a request that names no size):
  int32_t image_size = 0;    // pixels per side (the longer side)
  int32_t token_grid = 0;    // visual tokens per side (the longer side)
  int32_t image_tokens = 0;  // decode tokens per image: the decode length L_dec
  int32_t image_vocab = 0;   // logits sampled per token (image codes)
  // Words per token in RequestProgress::tokens: a continuous-token model's
  // token_dim (engine/token_vectors.h); 0 for code ids (one word a token).
  int32_t token_dim = 0;
  // The decode tokens' layout (the family's: rows, row breaks), which the grid
  // policies and ssd read; width 0: a square grid of image_tokens.
  sparse::GridGeometry grid;
  // The default size in pixels; 0: image_size square.
  int32_t default_width = 0, default_height = 0;
  // Every size a request may name, in the family's order, the default among
  // them; empty: the default alone (engine::ImageLayouts(info) fills it in).
  std::vector<ImageLayout> image_layouts;
  // The family's rule for its sizes in words (Emu3: any aspect ratio at its
  // image area), added to a refused size's message; empty: the list says it.
  std::string size_rule;
  // The family's published sampling defaults (Janus-Pro: cfg 5; Lumina-mGPT:
  // cfg 4, image top-k 2000); a server uses them where its config sets none.
  SamplingParams default_sampling;
  // > 0: class-conditional (LlamaGen c2i): requests name a class_id in
  // [0, num_classes) instead of a caption.
  int32_t num_classes = 0;
  int32_t num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, hidden_size = 0;
  int64_t kv_bytes_per_token_row = 0;  // K+V bytes of one token of one row, all layers
  // Limits, enforced by Prepare() and reported by GetModelInfo.
  int32_t max_prompt_tokens = 0;
  int32_t max_images_per_request = 0;
  int32_t max_batch_rows = 0;   // rows (2 per image) per backend call: the batch cap
  int64_t kv_budget_bytes = 0;  // the backend's pool (KV and policy state of all rows)
  // How the backend split the device's memory when it sized the pool or the
  // batch cap itself (cuda "auto"); empty otherwise. For the start-up log.
  std::string memory_sizing;
};

struct GenerationRequest {
  std::string prompt;  // the caption; the engine builds the chat-format prompt
  // The guidance row's prompt (model::PromptText); "": the family's default.
  std::string negative_prompt;
  // Class-conditional models (ModelInfo::num_classes > 0): the class, in
  // [0, num_classes), and no prompt. Text models take none.
  std::optional<int32_t> class_id;
  int32_t num_images = 1;
  // The image size in pixels, one of ModelInfo::image_layouts; 0 and 0: the
  // model's default size (both or neither).
  int32_t width = 0, height = 0;
  SamplingParams sampling;
  sparse::PolicyParams policy;
  // Parallel decoding (ZipAR-style, docs/serving.md): image row r + 1 starts
  // once row r has this many tokens, every started row then advances one
  // token per step; 0: off, one token per step in raster order. Dense only.
  int32_t parallel_window = 0;
  // Speculative Jacobi decoding (SJD, docs/serving.md): each step feeds the
  // last made token and speculative_window - 1 draft tokens, keeps the drafts
  // the model's distribution accepts and resamples the first rejected one, so
  // the images are distributed exactly as sequential decoding's; 0: off.
  // Dense only, not with parallel_window.
  int32_t speculative_window = 0;
};

// A validated request: token ids for both CFG rows and its exact KV need.
// Prepare() makes it, resolving the layout and the policy (the only place
// they are resolved); it is constant from then on.
struct PreparedRequest {
  GenerationRequest request;
  std::vector<int32_t> cond_ids;    // the family's prompt (Janus: chat format, ends with <begin_of_image>)
  std::vector<int32_t> uncond_ids;  // its guidance row (Janus: same length; Lumina: the image header)
  // Prompts given as embeddings (LlamaGen t2i): each row's [len x hidden_size]
  // input vectors; the ids above are then their positions 0 .. len - 1. Empty: id prompts.
  std::vector<float> cond_embeddings, uncond_embeddings;
  ImageLayout layout;             // its size's (the request's width x height, or the default)
  sparse::ResolvedPolicy policy;  // resolved for layout.image_tokens
  // Pool bytes its admission may take at most: its rows and, under prompt-KV
  // sharing across requests, the shared prompts it would create if none of
  // them is resident (Add places at most this much).
  int64_t kv_bytes = 0;
  // Pool bytes of its own rows, exactly as placed, for its whole life: kv_bytes
  // less the shared prompts (which Engine::SharedKvBytes counts); kv_bytes without sharing across requests.
  int64_t own_kv_bytes = 0;
};

// A request's progress, written by the engine at each Step (the calling
// thread) and read by its driver between steps. The one count of what a
// request has made: the scheduler's Progress events, previews and metrics
// read it, and Finished requests' images are decoded from its tokens.
struct RequestProgress {
  // Tokens made per image so far, the leading run in decode order (parallel
  // decoding makes later ones early: they join when the run reaches them).
  int32_t tokens_done = 0;
  int32_t steps = 0;  // engine steps taken part in (== tokens_done without parallel decoding)
  // Speculative decoding: draft tokens verified and accepted, all images.
  int64_t drafts_proposed = 0, drafts_accepted = 0;
  bool finished = false;  // its last token is made; the engine never writes it again
  // [image][token]: the model's token ids in decode order (Janus: the VQ
  // codes in raster order); DecodeImages() takes them as they are.
  std::vector<std::vector<int32_t>> tokens;
};

// The one request object, from admission to delivery (after nano-vllm's
// Sequence, vLLM's Request): what Prepare made, and its progress. The
// scheduler and the engine share it (RequestPtr).
struct Request {
  PreparedRequest prepared;  // constant after Prepare
  RequestProgress progress;  // the engine's to write (Add, Step)
};
using RequestPtr = std::shared_ptr<Request>;

inline RequestPtr MakeRequest(PreparedRequest prepared) {
  auto request = std::make_shared<Request>();
  request->prepared = std::move(prepared);
  return request;
}

using GroupId = int64_t;

// A copy of a group's progress (RequestProgress) for tools and tests.
struct GroupState {
  int32_t tokens_done = 0;   // tokens made per image so far
  int32_t tokens_total = 0;  // the request's layout's image_tokens
  bool finished = false;
  // [image][token]: the model's token ids in decode order (Janus: the VQ
  // codes in raster order); DecodeImages() takes them as they are.
  std::vector<std::vector<int32_t>> tokens;
};

struct StepReport {
  int32_t groups_prefilled = 0;
  int32_t rows_decoded = 0;       // rows in this step's decode batch
  std::vector<GroupId> finished;  // groups whose last token was sampled in this step
};

struct RgbImage {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes a pixel
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelInfo& info() const = 0;

  // Validates (engine/request_rules.h) and tokenizes. INVALID_ARGUMENT naming
  // the field; FAILED_PRECONDITION naming max_batch_rows or kv_budget_bytes
  // when the request could never run.
  virtual absl::StatusOr<PreparedRequest> Prepare(const GenerationRequest& request) const = 0;
  // Whether Add(request) would place all its rows now (the backend's pool).
  // Exact: a wrapper must forward it, or admission and placement disagree.
  virtual bool CanAdd(const PreparedRequest& request) const = 0;
  // RESOURCE_EXHAUSTED (and nothing placed) exactly when CanAdd is false.
  // The engine keeps `request` while the group lives and writes its progress
  // (resetting it here) at every Step; request->prepared must be what
  // Prepare() made (Add checks it is consistent, and refuses it otherwise).
  virtual absl::StatusOr<GroupId> Add(RequestPtr request) = 0;
  // Tools and tests: Add(MakeRequest(prepared)), a request object of its own.
  absl::StatusOr<GroupId> Add(const PreparedRequest& prepared) { return Add(MakeRequest(prepared)); }
  virtual absl::StatusOr<StepReport> Step() = 0;
  virtual void Remove(GroupId id) = 0;  // frees the group's KV at once (and drops its RequestPtr)
  // A copy of the group's progress (tools and tests; the scheduler reads the
  // request object instead).
  virtual absl::StatusOr<GroupState> State(GroupId id) const = 0;
  virtual int64_t KvBytesInUse() const = 0;
  // Pool bytes of the prompts shared across requests (held while a request
  // reads them); KvBytesInUse = the running requests' own_kv_bytes + this.
  virtual int64_t SharedKvBytes() const { return 0; }
  virtual int32_t RunningRows() const = 0;

  virtual absl::StatusOr<std::vector<RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& token_grids) = 0;
};

struct EngineOptions {
  std::string model_dir;
  // Options only the model's family understands, by name, handed to it as they
  // are; the family parses its own keys and refuses any other (an error naming
  // the key and the family). Lumina-mGPT: "vqgan_dir", the directory of Meta's
  // Chameleon image tokenizer (vqgan.yaml, vqgan.ckpt), relative to model_dir;
  // absent: <model_dir>/tokenizer. Janus-Pro takes none.
  std::map<std::string, std::string> family_options;
  std::string backend = "cpu";  // "cpu" or "cuda"
  int32_t threads = 0;          // CPU threads; 0: all cores
  // The backend's pool; 0 ("auto"): sized by the backend (cpu: unbounded;
  // cuda: the device's free memory after the weights, the VQ decoder, the
  // workspaces and a safety margin, engine/cuda/pool_sizing.h).
  int64_t kv_budget_bytes = 0;
  // Rows per backend call; 0 ("auto"): cpu 64; cuda: the most rows whose KV
  // at a reference row fits the device beside their workspaces.
  int32_t max_batch_rows = 256;
  int32_t max_images_per_request = 16;
  // VQ image decoder: "auto" (the GPU one when backend is "cuda", else the
  // CPU one), "cpu" or "cuda" (needs a CUDA build and a GPU; works with either backend).
  std::string vq_backend = "auto";
  // GPU VQ decoder precision: "auto" (bf16 tensor cores, fp32 where that path
  // cannot run), "bf16" (bf16 or an error), "tf32" or "fp32" (the accuracy
  // reference). The CPU decoder is fp32: it takes "auto" and "fp32" only.
  std::string vq_precision = "auto";
  // The server's default kv_cache_dtype: what cuda's auto max_batch_rows sizes
  // rows for (requests still choose their own).
  sparse::KvFormat default_kv_format = sparse::KvFormat::kAuto;
  // Prompt-KV sharing: the images of one request read one copy of each of its
  // prompts' KV (engine/model/backend.h); off: a copy per image.
  bool share_prompt_kv = true;
  // Prompt-KV sharing across requests: requests with the same prompt (every
  // request's guidance row of one length; identical captions) read one copy
  // of its KV, held while any of them runs. Needs share_prompt_kv.
  bool share_prompt_kv_across_requests = false;
  // The decoder layers' projections: the backend's own precision, or fp8
  // (engine/model/weight_format.h).
  model::WeightFormat weight_format = model::WeightFormat::kAuto;
};

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineOptions& options);

}  // namespace argen::engine
