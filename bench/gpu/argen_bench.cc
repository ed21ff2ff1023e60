// argen_bench: end-to-end decode throughput and per-step latency breakdown of
// the CUDA backend on Janus-Pro-1B/7B-shaped models with random weights
// generated on the device, dense and sparse policies, several batch sizes;
// optionally at the largest batch a card of --card-memory bytes holds, and
// the attention kernel alone at the last decode step (--attention-micro).
//
//   argen_bench --model 7b --batches 16,64 --policies dense,diagonal:0.95
//   argen_bench --model 7b --card-memory 48G --max-batch --policies dense,diagonal:0.95
//   argen_bench --attention-micro --model 7b --batches 32,64 --policies diagonal:0.95,diagonal:0.9
//     (sparse: the two-pass and the staged kernel, A/B in one process; dense and sparse: the warp kernel where it
//     applies and what kAuto picks; grouped-query models, e.g. nextstep-14b's 40 heads over 8, laid out per KV head)
//   --attention-kernel auto|two-pass|staged|warp|one-pass   the engine's decode attention kernel (default auto)
//   --no-fused-argmin   diagonal rows select through probs + ObserveKernel (the earlier path)
//   --images-per-prompt N   images share a prompt N at a time (one request of N images)
//   --prompt-sharing on|off|both|across|all[,...]   those images read one copy of each prompt's KV (default
//     on; both: off and on; a list runs each in turn, e.g. off,across); across: every image reads prompt rows
//     (prompt rows), one per request's caption and one guidance prompt for all, placed by the KV manager
//     (engine/kv/kv_manager.h) as share_prompt_kv_across_requests places them; all: off, on, across
//   --weight-dtype auto|fp8[,...]   the layers' projections (BackendOptions::weight_format); a list runs a
//     backend of each in turn (the same random weights, fp8 quantizes them): the policy column gains "+fp8w"
//   --gemm-micro [--gemm-rows 2,16,...]   one layer's four projections alone, bf16 (cuBLAS; and the skinny kernel at
//   1-4 rows) against fp8 (gemm_micro.h)
//   --skinny-gemm on|off   bf16 Linears of 1-4 rows on kernels/skinny_linear.h or cuBLAS (off, the engine's
//     default): run twice for the A/B of one image's step
//   --ssd-semantic-share S   ssd: the share of the random model's (layer, kv head) pairs classified
//     semantic (default 0.5); every line ends with the image's exact KV MB and the mean keys a head attends
//   --model nextstep-14b   NextStep-1 (continuous tokens): random decoder weights on the device and a random
//     flow-matching head of the published shape (nextstep_shapes.h); each batch's line is followed by a
//     "split" line: the head alone in a CUDA graph against the graphed step (flow_head_micro.h), and the
//     stage timer's eager decoder / head split of the last --stage-steps steps (none with --stage-steps 0)
//   --vae-micro   (nextstep-14b) the CUDA VAE decoder alone, random weights of the published shape, on
//     --batches images of 512 px, fp32 and TF32 (vae_micro.h)
//   --head-micro  (nextstep-14b) the flow-matching head alone (flow_head_micro.h): one token for each of
//     --batches images, graphed and eager, without making the decoder; every FlowHeadTuning variant, or
//     those named by --head-variants (comma-separated, e.g. default: one variant under a profiler), then
//     each kernel alone in a chain (not with --head-variants)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/attention_micro.h"
#include "bench/gpu/decode_projection.h"
#include "bench/gpu/flow_head_micro.h"
#include "bench/gpu/flow_kernels_micro.h"
#include "bench/gpu/gemm_micro.h"
#include "bench/gpu/janus_shapes.h"
#include "bench/gpu/nextstep_shapes.h"
#include "bench/gpu/parallel_decode.h"
#include "bench/gpu/vae_micro.h"
#include "common/cli.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/step_plan.h"
#include "engine/sparse/policy_params.h"

namespace argen::bench {
namespace {

enum class SharingMode { kOff, kWithin, kAcross };

struct Flags {
  std::vector<std::string> models = {"1b"};
  std::vector<int> batches = {16};
  std::vector<std::string> policies = {"dense", "diagonal:0.95"};
  int prompt_len = 50;
  int64_t kv_budget = 0;
  int64_t card_memory = 0;
  bool max_batch = false;
  // The server's default on cuda: max_batch_rows and the KV pool sized from the
  // card's free memory (engine/cuda/pool_sizing.h, kv_budget_bytes / max_batch_rows auto).
  bool auto_sizing = false;
  int max_rows = 512;  // --max-batch: rows the backend is sized for (workspaces count against --card-memory)
  bool attention_micro = false;
  bool graphs = true;
  bool fused_argmin = true;
  bool skinny_gemm = false;  // --skinny-gemm on|off: bf16 Linears of 1-4 rows on kernels/skinny_linear.h
  kernels::AttentionVariant variant = kernels::AttentionVariant::kAuto;
  int stage_steps = 4;
  // --project-bounded S: a policy of bounded memory (n_slots < l_dec) decodes its first S steps and
  // the rest is projected from its steady step (the mean of steps n_slots.. S: every step attends and
  // holds the same number of keys once the slots are full); dense and unbounded policies run whole.
  int project_steps = 0;
  // --parallel-window W: decode with image rows in flight, row r + 1 starting once row r has W tokens
  // (bench/gpu/parallel_decode.h); 0: one token an image a step.
  int parallel_window = 0;
  double ssd_semantic_share = 0.5;  // ssd: share of the random model's heads classified semantic
  int images_per_prompt = 1;        // images of one request (one prompt)
  std::vector<SharingMode> sharing = {SharingMode::kWithin};  // prompt-KV sharing (A/B: several)
  std::vector<model::WeightFormat> weight_formats = {model::WeightFormat::kAuto};
  bool gemm_micro = false;
  bool vae_micro = false;
  bool head_micro = false;
  std::vector<std::string> head_variants;  // --head-micro's variants by name (empty: all)
  std::vector<int> gemm_rows = {2, 16, 64, 256, 1024, 2816};
  std::string out;
};

int64_t ParseBytes(const std::string& s) {
  double v = std::atof(s.c_str());
  const char unit = s.empty() ? 0 : s.back();
  if (unit == 'G' || unit == 'g') v *= 1e9;
  if (unit == 'M' || unit == 'm') v *= 1e6;
  return static_cast<int64_t>(v);
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--model")
      f->models = absl::StrSplit(value(), ',');
    else if (a == "--batches") {
      f->batches.clear();
      for (absl::string_view s : absl::StrSplit(value(), ',')) {
        int b = 0;
        if (!absl::SimpleAtoi(s, &b) || b <= 0) return false;
        f->batches.push_back(b);
      }
    } else if (a == "--policies")
      f->policies = absl::StrSplit(value(), ',');
    else if (a == "--prompt-len")
      f->prompt_len = std::atoi(value().c_str());
    else if (a == "--kv-budget")
      f->kv_budget = ParseBytes(value());
    else if (a == "--card-memory")
      f->card_memory = ParseBytes(value());
    else if (a == "--max-batch")
      f->max_batch = true;
    else if (a == "--auto-sizing")
      f->auto_sizing = true;
    else if (a == "--max-rows") {
      if (!absl::SimpleAtoi(value(), &f->max_rows) || f->max_rows < 2 || f->max_rows % 2 != 0) return false;
    } else if (a == "--attention-micro")
      f->attention_micro = true;
    else if (a == "--no-graphs")
      f->graphs = false;
    else if (a == "--no-fused-argmin")
      f->fused_argmin = false;
    else if (a == "--attention-kernel") {
      const std::string v = value();
      if (v == "auto")
        f->variant = kernels::AttentionVariant::kAuto;
      else if (v == "two-pass")
        f->variant = kernels::AttentionVariant::kTwoPass;
      else if (v == "staged")
        f->variant = kernels::AttentionVariant::kStaged;
      else if (v == "warp")
        f->variant = kernels::AttentionVariant::kWarp;
      else if (v == "one-pass")
        f->variant = kernels::AttentionVariant::kOnePass;
      else
        return false;
    } else if (a == "--stage-steps")
      f->stage_steps = std::atoi(value().c_str());
    else if (a == "--project-bounded") {
      if (!absl::SimpleAtoi(value(), &f->project_steps) || f->project_steps < 0) return false;
    } else if (a == "--parallel-window") {
      if (!absl::SimpleAtoi(value(), &f->parallel_window) || f->parallel_window < 0) return false;
    } else if (a == "--ssd-semantic-share") {
      if (!absl::SimpleAtod(value(), &f->ssd_semantic_share) || !(f->ssd_semantic_share >= 0) ||
          !(f->ssd_semantic_share <= 1))
        return false;
    } else if (a == "--images-per-prompt") {
      if (!absl::SimpleAtoi(value(), &f->images_per_prompt) || f->images_per_prompt < 1) return false;
    } else if (a == "--prompt-sharing") {
      const std::string v = value();
      f->sharing.clear();
      for (absl::string_view m : absl::StrSplit(v, ',')) {
        if (m == "on")
          f->sharing.push_back(SharingMode::kWithin);
        else if (m == "off")
          f->sharing.push_back(SharingMode::kOff);
        else if (m == "both")
          f->sharing.insert(f->sharing.end(), {SharingMode::kOff, SharingMode::kWithin});
        else if (m == "across")
          f->sharing.push_back(SharingMode::kAcross);
        else if (m == "all")
          f->sharing.insert(f->sharing.end(), {SharingMode::kOff, SharingMode::kWithin, SharingMode::kAcross});
        else
          return false;
      }
    } else if (a == "--weight-dtype") {
      f->weight_formats.clear();
      for (absl::string_view m : absl::StrSplit(value(), ',')) {
        absl::StatusOr<model::WeightFormat> w = model::ParseWeightFormat(m);
        if (!w.ok()) return false;
        f->weight_formats.push_back(*w);
      }
    } else if (a == "--skinny-gemm") {
      const std::string v = value();
      if (v != "on" && v != "off") return false;
      f->skinny_gemm = v == "on";
    } else if (a == "--gemm-micro") {
      f->gemm_micro = true;
    } else if (a == "--vae-micro") {
      f->vae_micro = true;
    } else if (a == "--head-micro") {
      f->head_micro = true;
    } else if (a == "--head-variants") {
      f->head_variants = absl::StrSplit(value(), ',', absl::SkipEmpty());
      if (f->head_variants.empty()) return false;
    } else if (a == "--gemm-rows") {
      f->gemm_rows.clear();
      for (absl::string_view m : absl::StrSplit(value(), ',')) {
        int r = 0;
        if (!absl::SimpleAtoi(m, &r) || r <= 0) return false;
        f->gemm_rows.push_back(r);
      }
    } else if (a == "--out")
      f->out = value();
    else
      return false;
  }
  return f->prompt_len > 0;
}

// ssd on a random model: a classification with `share` of the (layer, kv
// head) pairs semantic, spread evenly (the step time depends on the share,
// not on which heads).
sparse::HeadClasses SyntheticClasses(const model::StackConfig& dims, double share) {
  sparse::HeadClasses c{dims.num_layers, dims.num_kv_heads, {}};
  const int n = dims.num_layers * dims.num_kv_heads;
  for (int h = 0; h < n; ++h) {
    c.semantic.push_back(static_cast<int>((h + 1) * share) > static_cast<int>(h * share) ? 1 : 0);
  }
  return c;
}

absl::StatusOr<sparse::ResolvedPolicy> PolicyFromSpec(const std::string& spec, const model::StackConfig& dims,
                                                      const sparse::GridGeometry& grid, double ssd_semantic_share) {
  // An optional "@dtype" suffix picks the KV storage: diagonal:0.95@fp8, dense@fp8.
  const std::vector<std::string> at = absl::StrSplit(spec, absl::MaxSplits('@', 1));
  std::vector<std::string> parts = absl::StrSplit(at[0], ':');
  absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(parts[0]);
  if (!kind.ok()) return kind.status();
  sparse::PolicyParams p;
  p.kind = *kind;
  if (at.size() > 1) {
    absl::StatusOr<sparse::KvFormat> format = sparse::ParseKvFormat(at[1]);
    if (!format.ok()) return format.status();
    p.kv_format = *format;
  }
  if (parts.size() > 1) p.sparsity = std::atof(parts[1].c_str());
  // Optional third field: n_recent (diagonal*'s N_r, h2o, alisa, the grid
  // policies, ssd's W), e.g. diagonal:0.95:64.
  if (parts.size() > 2) p.n_recent = std::atoi(parts[2].c_str());
  // The model's grid (Janus-Pro 24 x 24; Lumina-mGPT rows with a new line each).
  const sparse::HeadClasses classes = SyntheticClasses(dims, ssd_semantic_share);
  return sparse::ResolvePolicy(p, grid, &classes);
}

struct RunResult {
  bool ok = false;
  std::string note;
  double prefill_s = 0, decode_s = 0, step_ms = 0, last_steps_ms = 0;
  int projected_from = 0;  // > 0: decode steps run; decode_s adds the rest at steady_ms each
  int parallel_steps = 0;  // > 0: decoded with rows in flight in that many steps
  double steady_ms = 0;
  int64_t kv_bytes_per_image = 0;  // the pool bytes of the batch's rows per image
  cuda::StageTimes stages;
};

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// How a batch's images are laid out: requests of `per_prompt` images with one
// prompt, whose rows share its KV (the first image's) when `share`; `across`:
// every row reads a prompt row, one per request's caption and one guidance
// prompt for all (share_prompt_kv_across_requests).
struct PromptGroups {
  int per_prompt = 1;
  bool share = false;
  bool across = false;
};

kv::Sharing SharingOf(const PromptGroups& groups) {
  return groups.across ? kv::Sharing::kAcrossRequests : groups.share ? kv::Sharing::kWithinRequest : kv::Sharing::kNone;
}

// A batch's requests as the KV manager placed them (kv::KvManager::Place, the
// engine's order): its rows, CFG pairs in image order, and its prompt rows
// (across: the guidance prompt's first, then each request's caption's).
struct Batch {
  std::vector<kv::RequestRows> requests;
  std::vector<model::RowId> rows, prompt_rows;
  void Free(kv::KvManager& kv) {
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) kv.Free(&*it);
    requests.clear();
    rows.clear();
    prompt_rows.clear();
  }
};

// Places one request of `images` images (its caption and guidance prompt) as the engine would.
absl::Status PlaceRequest(kv::KvManager& kv, const sparse::ResolvedPolicy& policy, const std::vector<int32_t>& caption,
                          const std::vector<int32_t>& uncond, int images, const PromptGroups& groups, Batch* b) {
  kv::RequestRows r;
  if (absl::Status s = kv.Place({caption, uncond, policy, images, SharingOf(groups)}, &r); !s.ok()) return s;
  b->rows.insert(b->rows.end(), r.rows.begin(), r.rows.end());
  if (groups.across) {
    if (b->requests.empty()) b->prompt_rows.push_back(r.prompts[1]->second.row);  // the guidance prompt
    b->prompt_rows.push_back(r.prompts[0]->second.row);
  }
  b->requests.push_back(std::move(r));
  return absl::OkStatus();
}

// Largest number of images whose requests the KV pool admits (placed, then freed).
int MaxImages(kv::KvManager& kv, const sparse::ResolvedPolicy& policy, int prompt_len, int uncond_len, int cap,
              const PromptGroups& groups) {
  Batch b;
  int images = 0;
  // Distinct captions, one guidance prompt (only the lengths and which prompts are equal matter here).
  const std::vector<int32_t> guidance(uncond_len, -1);
  for (int r = 0; images + groups.per_prompt <= cap; ++r) {
    std::vector<int32_t> caption(prompt_len, 0);
    caption[0] = r;
    if (!PlaceRequest(kv, policy, caption, guidance, groups.per_prompt, groups, &b).ok()) break;
    images += groups.per_prompt;
  }
  b.Free(kv);
  return images;
}

// One decode step of a vector model (NextStep-1): every pair's query t fed the
// token vector its previous step drew and the device kept (kMadeVector).
absl::Status DecodeVectors(cuda::CudaBackend& be, const std::vector<model::RowId>& rows, int t,
                           const std::vector<model::SamplingSpec>& sampling, std::vector<int32_t>& sampled,
                           model::StepPlanBuilder& builder) {
  builder.Clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    builder.AddRow(rows[r]);
    builder.AddMadeVectorQuery(t);
    if (r % 2 == 1) builder.AddSampling(sampling[r / 2]);
  }
  return be.Forward(builder.Plan(), {sampled, nullptr});
}

RunResult RunBatch(cuda::CudaBackend& be, kv::KvManager& kv, const sparse::ResolvedPolicy& policy, int images,
                   int prompt_len, int uncond_len, int stage_steps, const PromptGroups& groups, float cfg_weight,
                   int project_steps, int parallel_window, int grid_period) {
  RunResult res;
  if (parallel_window > 0 && (be.spec().vector_tokens() || grid_period <= 0 || project_steps > 0)) {
    res.note = "--parallel-window: token-id models with a known grid, without --project-bounded";
    return res;
  }
  const int steps_to_run = DecodeStepsToRun(policy, project_steps, &res.note);
  if (steps_to_run == 0) return res;
  const int n_rows = 2 * images;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> tok(0, be.spec().text_vocab() - 1);
  // One random prompt pair per request, repeated for its images (across:
  // one guidance prompt for all, as Janus's padded row of one length is).
  std::vector<int32_t> tokens, fill_tokens, guidance(uncond_len);
  for (auto& t : guidance) t = tok(rng);
  std::vector<int32_t> group_tokens(prompt_len + uncond_len);
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> prompts;  // per request
  for (int i = 0; i < images; ++i) {
    if (i % groups.per_prompt == 0) {
      for (auto& t : group_tokens) t = tok(rng);
      if (groups.across) {
        std::copy(guidance.begin(), guidance.end(), group_tokens.begin() + prompt_len);
        if (i == 0) fill_tokens.insert(fill_tokens.end(), guidance.begin(), guidance.end());
        fill_tokens.insert(fill_tokens.end(), group_tokens.begin(), group_tokens.begin() + prompt_len);
      }
      prompts.emplace_back(std::vector<int32_t>(group_tokens.begin(), group_tokens.begin() + prompt_len),
                           std::vector<int32_t>(group_tokens.begin() + prompt_len, group_tokens.end()));
    }
    tokens.insert(tokens.end(), group_tokens.begin(), group_tokens.end());
  }
  Batch b;
  const std::vector<model::RowId>& rows = b.rows;
  const int64_t kv0 = kv.BytesInUse();
  for (size_t r = 0; r < prompts.size(); ++r) {
    const int request_images = std::min(groups.per_prompt, images - static_cast<int>(r) * groups.per_prompt);
    absl::Status a = PlaceRequest(kv, policy, prompts[r].first, prompts[r].second, request_images, groups, &b);
    if (!a.ok()) {
      b.Free(kv);
      res.note = "KV pool full (" + std::string(a.message()) + ")";
      return res;
    }
  }
  res.kv_bytes_per_image = (kv.BytesInUse() - kv0) / images;
  std::vector<int32_t> offsets(n_rows + 1, 0);
  for (int r = 0; r < n_rows; ++r) offsets[r + 1] = offsets[r] + (r % 2 == 0 ? prompt_len : uncond_len);
  // The prompt rows' prompts (the guidance prompt's, then the captions'), in
  // a call of their own before the rows' (together they exceed max_batch_rows).
  std::vector<int32_t> fill_offsets = {0};
  for (size_t p = 0; p < b.prompt_rows.size(); ++p)
    fill_offsets.push_back(fill_offsets.back() + (p == 0 ? uncond_len : prompt_len));
  std::vector<model::SamplingSpec> sampling(images);
  for (int i = 0; i < images; ++i) {
    sampling[i].seed = 1234;
    sampling[i].image_index = i;
    sampling[i].cfg_weight = cfg_weight;
  }
  std::vector<int32_t> sampled(images), steps(images);
  cudaDeviceSynchronize();
  const auto t0 = Clock::now();
  absl::Status s = absl::OkStatus();
  if (!b.prompt_rows.empty()) s = be.Prefill({{}, fill_offsets, fill_tokens, {}, b.prompt_rows}, {{}, nullptr});
  if (s.ok()) s = be.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr});
  const auto t1 = Clock::now();
  std::vector<int32_t> next(images);
  const bool vectors = be.spec().vector_tokens();
  model::StepPlanBuilder builder;
  const bool projected = steps_to_run < policy.l_dec - 1;
  Clock::time_point steady0 = t1;  // projected: when step n_slots began (each Decode returns its tokens: synchronous)
  ParallelDecodeResult parallel;
  if (s.ok() && parallel_window > 0) {
    s = DecodeInParallel(be, rows, sampling, sampled, policy.l_dec, grid_period, parallel_window, stage_steps,
                         &parallel);
    res.parallel_steps = parallel.steps;
    res.last_steps_ms = parallel.timed_steps_ms;  // the middle steps: see parallel_decode.h
  }
  for (int t = 0; s.ok() && parallel_window == 0 && t < steps_to_run; ++t) {
    if (t == steps_to_run - stage_steps) be.SetStageTiming(true);
    if (projected && t == policy.n_slots) steady0 = Clock::now();
    next = sampled;
    std::fill(steps.begin(), steps.end(), t);
    const auto a = Clock::now();
    s = vectors ? DecodeVectors(be, rows, t, sampling, sampled, builder)
                : be.Decode({rows, next, steps, sampling}, {sampled, nullptr});
    if (t >= steps_to_run - stage_steps) res.last_steps_ms += Seconds(a, Clock::now()) * 1e3;
  }
  const auto t2 = Clock::now();
  be.SetStageTiming(false);
  res.stages = be.TakeStageTimes();
  b.Free(kv);
  if (!s.ok()) {
    res.note = std::string(s.message());
    return res;
  }
  res.ok = true;
  res.prefill_s = Seconds(t0, t1);
  res.decode_s = Seconds(t1, t2);
  if (projected) {
    res.projected_from = steps_to_run;
    res.steady_ms = Seconds(steady0, t2) * 1e3 / (steps_to_run - policy.n_slots);
    res.decode_s = ProjectedDecodeSeconds(res.decode_s, res.steady_ms, policy.l_dec, steps_to_run);
  }
  res.step_ms = res.decode_s * 1e3 / (parallel_window > 0 ? std::max(1, res.parallel_steps) : policy.l_dec - 1);
  res.last_steps_ms /= std::max(1, stage_steps);
  return res;
}

// A vector model's step split after a batch's line: the head alone in a CUDA
// graph (all of the batch's pairs, one call) against the graphed step, and
// the stage timer's eager split (decoder: every stage but "head", which is
// the final norm, vector_out, the flow head and the tokens' copy back).
void PrintSplit(const std::string& name, const std::string& policy, int images, const RunResult& r,
                FlowHeadMicro& head_micro, float cfg_weight, FILE* out) {
  absl::StatusOr<FlowHeadTiming> t = head_micro.Time(images, cfg_weight);
  if (!t.ok()) {
    std::printf("split %s %s images=%d: head micro failed: %s\n", name.c_str(), policy.c_str(), images,
                std::string(t.status().message()).c_str());
    return;
  }
  const int steps = std::max(1, r.stages.steps);
  double eager_total = 0;
  for (double ms : r.stages.ms) eager_total += ms / steps;
  const double eager_head = r.stages.ms[static_cast<int>(cuda::Stage::kHead)] / steps;
  const double head_share = r.step_ms > 0 ? 100.0 * t->graph_ms / r.step_ms : 0.0;
  std::printf(
      "split %s %s images=%d: step %.3f ms (graphs), head alone %.3f ms (graph; eager %.3f ms) = %.1f%% of the step, "
      "decoder %.3f ms; stage timer (eager, %d steps): decoder %.3f ms, head %.3f ms = %.1f%%; tokens %s\n",
      name.c_str(), policy.c_str(), images, r.step_ms, t->graph_ms, t->eager_ms, head_share, r.step_ms - t->graph_ms,
      r.stages.steps, eager_total - eager_head, eager_head, eager_total > 0 ? 100.0 * eager_head / eager_total : 0.0,
      t->finite ? "finite" : "NOT FINITE");
  std::fflush(stdout);
  if (out) {
    std::fprintf(out,
                 "{\"kind\":\"split\",\"model\":\"%s\",\"policy\":\"%s\",\"images\":%d,\"step_ms\":%.4f,"
                 "\"head_graph_ms\":%.4f,\"head_eager_ms\":%.4f,\"head_share\":%.4f,\"stage_decoder_ms\":%.4f,"
                 "\"stage_head_ms\":%.4f,\"finite\":%s}\n",
                 name.c_str(), policy.c_str(), images, r.step_ms, t->graph_ms, t->eager_ms, head_share / 100.0,
                 eager_total - eager_head, eager_head, t->finite ? "true" : "false");
  }
}

// --head-micro: the flow head alone (random weights of the published shape), one token for each of
// --batches images, in a CUDA graph and eager; no decoder is made (seconds, not minutes).
bool RunHeadBatches(const std::string& name, const nextstep::NextStepConfig& config, const std::vector<int>& batches,
                    const std::vector<std::string>& only, FILE* out) {
  absl::StatusOr<std::unique_ptr<RandomFlowHead>> head = RandomNextStepFlowHead(config, 42);
  if (!head.ok()) {
    std::fprintf(stderr, "%s\n", std::string(head.status().message()).c_str());
    return false;
  }
  const int max_images = *std::max_element(batches.begin(), batches.end());
  absl::StatusOr<std::unique_ptr<FlowHeadMicro>> micro = FlowHeadMicro::Create((*head)->desc, max_images);
  if (!micro.ok()) {
    std::fprintf(stderr, "head micro: %s\n", std::string(micro.status().message()).c_str());
    return false;
  }
  const int evaluations = static_cast<int>((*head)->desc.times.size());  // the net's runs a token
  // The default first; then each lever off in turn (device_flow_head.h's FlowHeadTuning).
  using Gemms = cuda::FlowHeadTuning::Gemms;
  using Modulations = cuda::FlowHeadTuning::Modulations;
  const std::vector<std::pair<const char*, cuda::FlowHeadTuning>> variants = {
      {"default", {Gemms::kAuto, Modulations::kGrouped}},
      {"gemv-to-4-rows", {Gemms::kAuto, Modulations::kGrouped, 4}},
      {"gemv-to-16-rows", {Gemms::kAuto, Modulations::kGrouped, 16}},
      {"32-row-tiles-gemv-to-4", {Gemms::kAuto, Modulations::kGrouped, 4, false}},
      {"side-stream-modulations", {Gemms::kAuto, Modulations::kSide}},
      {"serial-modulations", {Gemms::kAuto, Modulations::kInline}},
      {"fused-gemms", {Gemms::kFused, Modulations::kGrouped}},
      {"cublas-gemms", {Gemms::kCublas, Modulations::kGrouped}},
  };
  for (const std::string& v : only) {
    if (std::none_of(variants.begin(), variants.end(), [&v](const auto& e) { return v == e.first; })) {
      std::fprintf(stderr, "head micro: no variant %s\n", v.c_str());
      return false;
    }
  }
  for (const auto& [variant, tuning] : variants) {
    if (!only.empty() && std::find(only.begin(), only.end(), variant) == only.end()) continue;
    (*micro)->SetTuning(tuning);
    for (int images : batches) {
      absl::StatusOr<FlowHeadTiming> t = (*micro)->Time(images, kNextStepCfgWeight);
      if (!t.ok()) {
        std::fprintf(stderr, "head micro: %s\n", std::string(t.status().message()).c_str());
        return false;
      }
      std::printf("head %s images=%d: graph %.3f ms (%.1f us a net evaluation of %d), eager %.3f ms; tokens %s; %s\n",
                  name.c_str(), images, t->graph_ms, 1e3 * t->graph_ms / evaluations, evaluations, t->eager_ms,
                  t->finite ? "finite" : "NOT FINITE", variant);
      std::fflush(stdout);
      if (out) {
        std::fprintf(out,
                     "{\"kind\":\"head\",\"model\":\"%s\",\"variant\":\"%s\",\"images\":%d,\"graph_ms\":%.4f,"
                     "\"eager_ms\":%.4f,\"finite\":%s}\n",
                     name.c_str(), variant, images, t->graph_ms, t->eager_ms, t->finite ? "true" : "false");
      }
    }
  }
  if (!only.empty()) return true;
  // Each kernel alone in a chain: where the per-evaluation time goes.
  std::vector<FlowKernelChainTime> chains;
  const absl::Status chained = TimeFlowKernelChains((*head)->desc.width, {2, 32, 128, 256}, &chains);
  for (const FlowKernelChainTime& c : chains) {
    std::printf("kernel %s rows=%d: %.2f us a launch (a chain of them in one graph): %s\n", name.c_str(), c.rows, c.us,
                c.kernel.c_str());
  }
  if (!chained.ok()) std::fprintf(stderr, "kernel chains: %s\n", std::string(chained.message()).c_str());
  std::fflush(stdout);
  return true;
}

// --vae-micro: the published VAE with random weights, 512 px images (a 64 x 64 latent), fp32 then TF32.
bool RunVaeBatches(const std::string& name, const nextstep::NextStepConfig& config, const std::vector<int>& batches,
                   FILE* out) {
  absl::StatusOr<RandomVae> vae = RandomNextStepVae(7);
  if (!vae.ok()) {
    std::fprintf(stderr, "vae micro: %s\n", std::string(vae.status().message()).c_str());
    return false;
  }
  const int32_t side = config.latent_size * config.latent_patch_size;
  const int32_t px = side * vae->config.downsample();
  for (bool tf32 : {false, true}) {
    std::vector<VaeMicroRow> rows;
    std::string err;
    if (!RunVaeMicro(vae->weights, vae->config, side, batches, tf32, &rows, &err)) {
      std::fprintf(stderr, "vae micro: %s\n", err.c_str());
      return false;
    }
    for (const VaeMicroRow& r : rows) {
      std::printf("vae %s %s images=%d (%d px, %d a chunk): %.1f ms, %.2f ms/image, %.1f img/s\n", name.c_str(),
                  tf32 ? "tf32" : "fp32", r.images, px, r.chunk_images, r.ms, r.ms / r.images, 1e3 * r.images / r.ms);
      if (out)
        std::fprintf(out,
                     "{\"kind\":\"vae\",\"model\":\"%s\",\"precision\":\"%s\",\"images\":%d,\"px\":%d,"
                     "\"ms\":%.3f}\n",
                     name.c_str(), tf32 ? "tf32" : "fp32", r.images, px, r.ms);
    }
    std::fflush(stdout);
  }
  return true;
}

constexpr char kBenchUsage[] =
    "argen_bench: GPU end-to-end and micro benchmarks of the CUDA backend (bench/gpu/*.sh run it).\n"
    "  argen_bench [--model 1b,7b,lumina-512,lumina-768,anole-512,emu3,emu3-512,llamagen-xl-384 (with --prompt-len "
    "1),nextstep-14b] "
    "[--batches 1,8,...] "
    "[--policies "
    "dense,diagonal:0.9[:N_r][@fp8],...]\n"
    "              [--prompt-len N] [--kv-budget 40G] [--card-memory 48G] [--max-batch] [--max-rows R] "
    "[--auto-sizing]\n"
    "              [--attention-micro] [--no-graphs] [--no-fused-argmin]\n"
    "              [--attention-kernel auto|two-pass|staged|warp|one-pass] [--skinny-gemm on|off]\n"
    "              [--stage-steps N] [--images-per-prompt N] [--prompt-sharing on|off|both|across|all]\n"
    "              [--project-bounded S] (bounded-memory policies: S steps run, the rest projected from\n"
    "               the steady step; the policy column says +projS; dense runs whole)\n"
    "              [--parallel-window W] (image rows in flight, ZipAR-style, as the server's parallel_window;\n"
    "               the policy column says +pwW, step_ms is a step of the schedule's, last_ms and the\n"
    "               stage columns its middle steps, where the most rows are in flight)\n"
    "              [--weight-dtype auto|fp8[,...]] [--gemm-micro [--gemm-rows 2,16,...]]\n"
    "              [--vae-micro] (nextstep-14b: the CUDA VAE decoder alone on --batches images)\n"
    "              [--head-micro] (nextstep-14b: the flow head alone, one token for --batches images)\n"
    "              [--out FILE.jsonl] [--help] [--version]\n";

int Main(int argc, char** argv) {
  if (std::optional<int> rc = cli::HelpOrVersion(argc, argv, "argen_bench", kBenchUsage)) return *rc;
  Flags f;
  if (!ParseFlags(argc, argv, &f)) {
    std::fprintf(stderr,
                 "usage: argen_bench [--model 1b,7b,...,nextstep-14b] [--batches 16,64] [--policies "
                 "dense,diagonal:0.95]\n"
                 "  [--prompt-len 50] [--kv-budget BYTES | --card-memory 48G [--max-batch [--max-rows 512]]]\n"
                 "  (a policy is name[:sparsity[:n_recent]][@kv_cache_dtype], e.g. diagonal:0.95:64, "
                 "diagonal:0.95@fp8, ssd:0.9)\n"
                 "  [--ssd-semantic-share 0.5]  (ssd: share of the random model's heads classified semantic)\n"
                 "  [--attention-micro] [--no-graphs] [--stage-steps 4] [--out results.jsonl]\n"
                 "  [--attention-kernel auto|two-pass|staged|warp|one-pass] [--no-fused-argmin]\n"
                 "  [--images-per-prompt N] [--prompt-sharing on|off|both|across|all]\n"
                 "  [--weight-dtype auto|fp8[,...]] [--gemm-micro [--gemm-rows 2,16,...]] [--vae-micro]\n"
                 "  [--head-micro]\n");
    return 2;
  }
  FILE* out = f.out.empty() ? nullptr : std::fopen(f.out.c_str(), "a");
  for (const std::string& name : f.models) {
    absl::StatusOr<BenchModel> bench_model = BenchModelFor(name);
    if (!bench_model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(bench_model.status().message()).c_str());
      return 2;
    }
    const model::ModelSpec* spec = &bench_model->spec;
    const sparse::GridGeometry grid = bench_model->grid;
    const int uncond_len = bench_model->uncond_len > 0 ? bench_model->uncond_len : f.prompt_len;
    const model::StackConfig* dims = &spec->stack;
    if (f.vae_micro) {
      if (!bench_model->nextstep) {
        std::fprintf(stderr, "--vae-micro: %s has no VAE (nextstep-14b has)\n", name.c_str());
        return 2;
      }
      if (!RunVaeBatches(name, *bench_model->nextstep, f.batches, out)) return 1;
      continue;
    }
    if (f.head_micro) {
      if (!bench_model->nextstep) {
        std::fprintf(stderr, "--head-micro: %s has no flow head (nextstep-14b has)\n", name.c_str());
        return 2;
      }
      if (!RunHeadBatches(name, *bench_model->nextstep, f.batches, f.head_variants, out)) return 1;
      continue;
    }
    if (f.gemm_micro) {
      std::vector<GemmMicroRow> rows;
      std::string err;
      if (!RunGemmMicro(*dims, f.gemm_rows, &rows, &err)) {
        std::fprintf(stderr, "gemm micro: %s\n", err.c_str());
        return 1;
      }
      if (out)
        for (const GemmMicroRow& r : rows)
          std::fprintf(out,
                       "{\"kind\":\"gemm\",\"model\":\"%s\",\"gemm\":\"%s\",\"out\":%d,\"in\":%d,\"rows\":%d,"
                       "\"bf16_us\":%.2f,\"skinny_us\":%.2f,\"fp8_us\":%.2f}\n",
                       name.c_str(), r.name.c_str(), r.out, r.in, r.rows, r.bf16_us, r.skinny_us, r.fp8_us);
      continue;
    }
    if (f.attention_micro) {
      for (int images : f.batches) {
        for (const std::string& spec : f.policies) {
          absl::StatusOr<sparse::ResolvedPolicy> p = PolicyFromSpec(spec, *dims, grid, f.ssd_semantic_share);
          if (!p.ok() || p->kind == sparse::PolicyKind::kDense) continue;
          AttentionMicroShape shape;
          shape.rows = 2 * images;
          shape.heads = dims->num_heads;
          shape.kv_heads = dims->num_kv_heads;
          shape.head_dim = dims->head_dim;
          shape.prompt_len = f.prompt_len;
          shape.l_dec = grid.l_dec;
          shape.n_att = p->n_att;
          shape.n_slots = p->n_slots;
          AttentionMicroResult r;
          std::string err;
          if (!RunAttentionMicro(shape, &r, &err)) {
            std::fprintf(stderr, "attention micro: %s\n", err.c_str());
            return 1;
          }
          const char* auto_dense = AttentionVariantName(r.auto_dense);
          const char* auto_sparse = AttentionVariantName(r.auto_sparse);
          // The columns before "; kv heads" are the parsers' (scenarios/micro.sh); new fields go after them.
          std::printf(
              "attention %s images=%d n_att=%d: dense %.1f us (%.0f GB/s), sparse two-pass %.1f us (%.0f GB/s, %.0f%% "
              "of copy %.0f GB/s), speedup %.2fx; kv heads %d/%d, auto: dense %s, sparse %s\n",
              name.c_str(), images, p->n_att, r.dense_us, r.dense_gbs, r.sparse_us, r.sparse_gbs,
              100.0 * r.sparse_gbs / r.copy_gbs, r.copy_gbs, r.dense_us / r.sparse_us, shape.kv_heads, shape.heads,
              auto_dense, auto_sparse);
          if (r.staged_ran) {
            std::printf(
                "attention %s images=%d n_att=%d: sparse staged   %.1f us (%.0f GB/s, %.0f%% of copy), speedup %.2fx, "
                "staged/two-pass %.2f; auto picks %s\n",
                name.c_str(), images, p->n_att, r.staged_us, r.staged_gbs, 100.0 * r.staged_gbs / r.copy_gbs,
                r.dense_us / r.staged_us, r.staged_us / r.sparse_us, auto_sparse);
          } else {
            std::printf("attention %s images=%d n_att=%d: staged kernel does not fit (two-pass runs)\n", name.c_str(),
                        images, p->n_att);
          }
          // The warp kernel where it applies (one split of at most 1024 keys), against the two-pass one.
          auto warp = [&](bool ran, double us, double gbs, double two_pass_us) {
            if (!ran) return std::string("does not apply (split or over 1024 keys)");
            char text[128];
            std::snprintf(text, sizeof(text), "%.1f us (%.0f GB/s, %.0f%% of copy), warp/two-pass %.2f", us, gbs,
                          100.0 * gbs / r.copy_gbs, us / two_pass_us);
            return std::string(text);
          };
          for (const AttentionMicroResult::SplitTarget& t : r.sparse_targets) {
            std::printf(
                "attention %s images=%d n_att=%d: sparse two-pass at %d blocks an SM: %d splits (engine %d), %.1f us "
                "(%.0f GB/s, %.0f%% of copy), /engine's %.2f\n",
                name.c_str(), images, p->n_att, t.blocks_per_sm, t.splits, r.sparse_splits, t.us, t.gbs,
                100.0 * t.gbs / r.copy_gbs, t.us / r.sparse_us);
          }
          for (const AttentionMicroResult::SplitTarget& t : r.dense_targets) {
            std::printf(
                "attention %s images=%d n_att=%d: dense two-pass at %d blocks an SM: %d splits (engine %d), %.1f us "
                "(%.0f GB/s), /engine's %.2f\n",
                name.c_str(), images, p->n_att, t.blocks_per_sm, t.splits, r.dense_splits, t.us, t.gbs,
                t.us / r.dense_us);
          }
          // The split launches against a separate combine launch (the kernels before split counters).
          auto combine = [&](int splits, double us, double fused_us) {
            if (us <= 0) return std::string("not split");
            char text[128];
            std::snprintf(text, sizeof(text), "%d splits, %.1f us, fused/combine launch %.2f", splits, us,
                          fused_us / us);
            return std::string(text);
          };
          std::printf("attention %s images=%d n_att=%d: with a combine launch: dense %s; sparse %s\n", name.c_str(),
                      images, p->n_att, combine(r.dense_splits, r.dense_combine_us, r.dense_us).c_str(),
                      combine(r.sparse_splits, r.sparse_combine_us, r.sparse_us).c_str());
          std::printf("attention %s images=%d n_att=%d: warp dense %s; warp sparse %s\n", name.c_str(), images,
                      p->n_att, warp(r.dense_warp_ran, r.dense_warp_us, r.dense_warp_gbs, r.dense_us).c_str(),
                      warp(r.sparse_warp_ran, r.sparse_warp_us, r.sparse_warp_gbs, r.sparse_us).c_str());
          std::printf(
              "attention %s images=%d n_att=%d: one-pass dense %.1f us (%.0f%% of copy), /two-pass %.2f; one-pass "
              "sparse %.1f us (%.0f%% of copy), /two-pass %.2f, speedup %.2fx (one-pass both)\n",
              name.c_str(), images, p->n_att, r.dense_one_pass_us, 100.0 * r.dense_one_pass_gbs / r.copy_gbs,
              r.dense_one_pass_us / r.dense_us, r.sparse_one_pass_us, 100.0 * r.sparse_one_pass_gbs / r.copy_gbs,
              r.sparse_one_pass_us / r.sparse_us, r.dense_one_pass_us / r.sparse_one_pass_us);
          // Where a two-pass block's time goes, launched alone (AttentionMicroResult::Phases).
          auto phases = [&](const char* mode, const AttentionMicroResult::Phases& ph) {
            if (ph.blocks == 0) return;  // a build without ARGEN_ATTENTION_PHASES
            static const char* kNames[] = {"", "prologue", "wait", "keys", "softmax", "values", "end"};
            std::string text;
            for (int phase = 1; phase < kernels::kAttentionPhaseCount; ++phase) {
              char part[64];
              std::snprintf(part, sizeof(part), "%s%s %.2f / %.2f", phase > 1 ? ", " : "", kNames[phase],
                            ph.median_us[phase], ph.max_us[phase]);
              text += part;
            }
            std::printf(
                "attention %s images=%d n_att=%d: phases %s two-pass alone (%d blocks x %d threads; median / max a "
                "block, us): %s; span %.1f us, starts spread %.1f us (%.3f ns a cycle)\n",
                name.c_str(), images, p->n_att, mode, ph.blocks, ph.threads, text.c_str(), ph.span_us,
                ph.start_spread_us, ph.ns_per_cycle);
          };
          phases("dense", r.dense_phases);
          phases("sparse", r.sparse_phases);
          std::fflush(stdout);
          if (out)
            std::fprintf(
                out,
                "{\"kind\":\"attention\",\"model\":\"%s\",\"images\":%d,\"n_att\":%d,\"dense_us\":%.2f,"
                "\"sparse_us\":%.2f,\"dense_gbs\":%.1f,\"sparse_gbs\":%.1f,\"staged_us\":%.2f,\"staged_gbs\":%"
                ".1f,\"auto_staged\":%s,\"copy_gbs\":%.1f,\"heads\":%d,\"kv_heads\":%d,\"dense_warp_us\":%.2f,"
                "\"sparse_warp_us\":%.2f,\"auto_dense\":\"%s\",\"auto_sparse\":\"%s\",\"dense_one_pass_us\":%.2f,"
                "\"sparse_one_pass_us\":%.2f}\n",
                name.c_str(), images, p->n_att, r.dense_us, r.sparse_us, r.dense_gbs, r.sparse_gbs, r.staged_us,
                r.staged_gbs, r.auto_staged ? "true" : "false", r.copy_gbs, shape.heads, shape.kv_heads,
                r.dense_warp_us, r.sparse_warp_us, auto_dense, auto_sparse, r.dense_one_pass_us, r.sparse_one_pass_us);
        }
      }
      continue;
    }
    int max_images = 0;
    for (int b : f.batches) max_images = std::max(max_images, b);
    // A vector model's token head: random weights of the published shape, made once (host), uploaded
    // by each backend; its own copy times the head alone (FlowHeadMicro).
    std::unique_ptr<RandomFlowHead> flow_head;
    std::unique_ptr<FlowHeadMicro> head_micro;
    std::string head_micro_error;
    const float cfg_weight = bench_model->nextstep ? kNextStepCfgWeight : model::SamplingSpec{}.cfg_weight;
    if (bench_model->nextstep) {
      absl::StatusOr<std::unique_ptr<RandomFlowHead>> made = RandomNextStepFlowHead(*bench_model->nextstep, 42);
      if (!made.ok()) {
        std::fprintf(stderr, "%s\n", std::string(made.status().message()).c_str());
        return 1;
      }
      flow_head = *std::move(made);
    }
    const model::FlowMatchingHeadDesc* head_desc = flow_head ? &flow_head->desc : nullptr;
    for (model::WeightFormat weight_format : f.weight_formats) {
      const bool fp8w = weight_format == model::WeightFormat::kFp8;
      model::BackendOptions options;
      options.weight_format = weight_format;
      options.max_batch_rows = std::max(2 * max_images, f.max_batch ? f.max_rows : 2);
      options.max_prompt_tokens = std::max(f.prompt_len, 64);
      options.kv_budget_bytes = f.kv_budget;
      options.decode_tokens = grid.l_dec;
      if (f.auto_sizing) {
        options.max_batch_rows = 0;
        options.kv_budget_bytes = 0;
      } else if (f.card_memory > 0) {
        // Everything but the pool, measured with a 1 GB pool; the rest of the
        // card is the pool (rows' KV and policy state both come out of it).
        size_t free0 = 0, total = 0;
        cudaMemGetInfo(&free0, &total);
        options.kv_budget_bytes = int64_t{1} << 30;
        int64_t other = 0;
        {
          auto probe = cuda::CreateRandomCudaBackend(*spec, options, 1, head_desc);
          if (!probe.ok()) {
            std::fprintf(stderr, "%s\n", std::string(probe.status().message()).c_str());
            return 1;
          }
          size_t free1 = 0;
          cudaMemGetInfo(&free1, &total);
          other = static_cast<int64_t>(free0 - free1) - (int64_t{1} << 30);
        }
        options.kv_budget_bytes = f.card_memory - other;
        std::printf("card %.1f GB: weights + workspaces %.2f GB, KV budget %.2f GB\n", f.card_memory / 1e9, other / 1e9,
                    options.kv_budget_bytes / 1e9);
      }
      const auto c0 = Clock::now();
      auto backend = cuda::CreateRandomCudaBackend(*spec, options, 42, head_desc);
      if (!backend.ok()) {
        std::fprintf(stderr, "%s\n", std::string(backend.status().message()).c_str());
        return 1;
      }
      cuda::CudaBackend& be = **backend;
      kv::KvManager kv(be);  // the backend's rows, placed as the engine places them
      if (!be.MemorySizing().empty()) std::printf("%s\n", be.MemorySizing().c_str());
      be.SetGraphs(f.graphs);
      be.SetAttentionVariant(f.variant);
      be.SetFusedArgmin(f.fused_argmin);
      be.SetSkinnyGemm(f.skinny_gemm);
      std::printf(
          "model %s: weights %.2f GB (%s), KV pool %.2f GB, setup %.1f s, graphs %s, attention kernel %s, fused argmin "
          "%s, gemm %s\n",
          name.c_str(), be.WeightBytes() / 1e9, fp8w ? "fp8 layers" : "bf16", be.KvPoolBytes() / 1e9,
          Seconds(c0, Clock::now()), f.graphs ? "on" : "off", AttentionVariantName(f.variant),
          f.fused_argmin ? "on" : "off",
          fp8w            ? "cublasLt fp8 (per-channel x per-row scales)"
          : f.skinny_gemm ? "skinny kernel at 1-4 rows, cublas bf16 above"
                          : "cublas bf16");
      std::printf("%-5s %-20s %6s %9s %9s %9s %9s %8s |", "model", "policy", "images", "prefill_s", "decode_s",
                  "step_ms", "last_ms", "img/s");
      for (const char* s : cuda::kStageNames) std::printf(" %8s", s);
      std::printf(" %8s %10s %8s\n", "indexing", "kv_MB/img", "keys");
      for (const std::string& policy_spec : f.policies) {
        absl::StatusOr<sparse::ResolvedPolicy> policy = PolicyFromSpec(policy_spec, *dims, grid, f.ssd_semantic_share);
        if (!policy.ok()) {
          std::fprintf(stderr, "%s: %s\n", policy_spec.c_str(), std::string(policy.status().message()).c_str());
          return 2;
        }
        for (SharingMode mode : f.sharing) {
          const PromptGroups groups{f.images_per_prompt, mode == SharingMode::kWithin && f.images_per_prompt > 1,
                                    mode == SharingMode::kAcross};
          // The policy column: name[/nN][+share|+across] (N images a prompt, its KV shared, or
          // every prompt read from prompt rows).
          const std::string spec =
              absl::StrCat(policy_spec, f.images_per_prompt > 1 ? absl::StrCat("/n", f.images_per_prompt) : "",
                           groups.share ? "+share" : "", groups.across ? "+across" : "", fp8w ? "+fp8w" : "");
          std::vector<int> batches = f.batches;
          if (f.max_batch) batches = {MaxImages(kv, *policy, f.prompt_len, uncond_len, be.MaxBatchRows() / 2, groups)};
          for (int images : batches) {
            RunResult r = RunBatch(be, kv, *policy, images, f.prompt_len, uncond_len, f.stage_steps, groups, cfg_weight,
                                   f.project_steps, f.parallel_window, grid.width + grid.row_break_tokens);
            if (!r.ok) {
              std::printf("%-5s %-20s %6d  %s\n", name.c_str(), spec.c_str(), images, r.note.c_str());
              continue;
            }
            const double total = r.prefill_s + r.decode_s;
            // A projected run says so in its policy column and on a line of its own.
            const std::string shown = r.projected_from > 0   ? absl::StrCat(spec, "+proj", r.projected_from)
                                      : r.parallel_steps > 0 ? absl::StrCat(spec, "+pw", f.parallel_window)
                                                             : spec;
            if (r.parallel_steps > 0) {
              std::printf("parallel %s %s images=%d: window %d, %d decode steps (sequential: %d)\n", name.c_str(),
                          spec.c_str(), images, f.parallel_window, r.parallel_steps, policy->l_dec - 1);
            }
            if (r.projected_from > 0) {
              std::printf(
                  "projected %s %s images=%d: ran %d of %d decode steps; steady step %.3f ms (steps %d..%d), "
                  "the other %d at that\n",
                  name.c_str(), spec.c_str(), images, r.projected_from, policy->l_dec - 1, r.steady_ms, policy->n_slots,
                  r.projected_from - 1, policy->l_dec - 1 - r.projected_from);
            }
            std::printf("%-5s %-20s %6d %9.3f %9.3f %9.3f %9.3f %8.2f |", name.c_str(), shown.c_str(), images,
                        r.prefill_s, r.decode_s, r.step_ms, r.last_steps_ms, images / total);
            for (double ms : r.stages.ms) std::printf(" %8.3f", r.stages.steps ? ms / r.stages.steps : 0.0);
            // indexing = plan + observe + apply (the policies' device work)
            const double indexing = r.stages.ms[static_cast<int>(cuda::Stage::kPlan)] +
                                    r.stages.ms[static_cast<int>(cuda::Stage::kObserve)] +
                                    r.stages.ms[static_cast<int>(cuda::Stage::kApply)];
            // The exact pool bytes of an image (its CFG pair: KV and policy state,
            // Backend::RowBytes) and the mean decode keys a head attends per step
            // (sparse::MeanAttendedKeys; ssd: by class).
            const int64_t pair_bytes = r.kv_bytes_per_image;
            const double kv_mb = pair_bytes / 1e6;
            std::printf(" %8.3f %10.2f %8.1f\n", r.stages.steps ? indexing / r.stages.steps : 0.0, kv_mb,
                        sparse::MeanAttendedKeys(*policy));
            std::fflush(stdout);
            if (out) {
              std::fprintf(out,
                           "{\"kind\":\"e2e\",\"model\":\"%s\",\"policy\":\"%s\",\"images\":%d,\"max_batch\":%s,\"kv_"
                           "budget\":%lld,\"prefill_s\":%.4f,\"decode_s\":%.4f,\"step_ms\":%.4f,\"last_step_ms\":%.4f,"
                           "\"img_per_s\":%.4f,\"kv_bytes_per_image\":%lld,\"n_slots\":%d,\"mean_keys\":%.2f",
                           name.c_str(), spec.c_str(), images, f.max_batch ? "true" : "false",
                           static_cast<long long>(be.KvPoolBytes()), r.prefill_s, r.decode_s, r.step_ms,
                           r.last_steps_ms, images / total, static_cast<long long>(pair_bytes), policy->n_slots,
                           sparse::MeanAttendedKeys(*policy));
              for (int i = 0; i < static_cast<int>(cuda::Stage::kCount); ++i)
                std::fprintf(out, ",\"%s_ms\":%.4f", cuda::kStageNames[i],
                             r.stages.steps ? r.stages.ms[i] / r.stages.steps : 0.0);
              std::fprintf(out,
                           ",\"projected_from\":%d,\"steady_step_ms\":%.4f,\"images_per_prompt\":%d,\"prompt_"
                           "sharing\":\"%s\",\"weight_dtype\":\"%s\"}\n",
                           r.projected_from, r.steady_ms, f.images_per_prompt,
                           groups.across  ? "across"
                           : groups.share ? "within"
                                          : "off",
                           fp8w ? "fp8" : "auto");
            }
            if (flow_head && f.stage_steps > 0) {
              // The head's own copy, made after the first backend (its weights are on the card first).
              // Without room for it (a pool sized to the whole card) the line says so and the run goes on.
              if (!head_micro && head_micro_error.empty()) {
                absl::StatusOr<std::unique_ptr<FlowHeadMicro>> m =
                    FlowHeadMicro::Create(flow_head->desc, be.MaxBatchRows() / 2);
                if (m.ok()) {
                  head_micro = *std::move(m);
                } else {
                  head_micro_error = std::string(m.status().message());
                }
              }
              if (head_micro) {
                PrintSplit(name, spec, images, r, *head_micro, cfg_weight, out);
              } else {
                std::printf("split %s %s images=%d: no head micro (%s)\n", name.c_str(), spec.c_str(), images,
                            head_micro_error.c_str());
              }
            }
          }
        }
      }
    }  // weight formats
  }
  if (out) std::fclose(out);
  return 0;
}

}  // namespace
}  // namespace argen::bench

int main(int argc, char** argv) { return argen::bench::Main(argc, argv); }
