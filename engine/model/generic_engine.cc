#include "engine/model/generic_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "engine/token_vectors.h"
#include "kernels/sparse/policy.h"

namespace argen::model {

GenericEngine::GenericEngine(std::unique_ptr<Backend> backend, PromptEncoder encoder, ImageDecoder decoder,
                             GenericEngineConfig config)
    : backend_(std::move(backend)),
      kv_(*backend_),
      encoder_(std::move(encoder)),
      decoder_(std::move(decoder)),
      config_(std::move(config)),
      sampled_offset_(backend_->spec().input.sampled_offset),
      token_dim_(backend_->spec().output.token_dim) {
  engine::ModelInfo& info = config_.info;
  info.image_vocab = backend_->spec().logits();
  info.token_dim = token_dim_;
  info.kv_budget_bytes = backend_->PoolBytes();
  info.max_batch_rows = backend_->MaxBatchRows();
  info.memory_sizing = backend_->MemorySizing();
  info.kv_bytes_per_token_row = backend_->KvBytesPerTokenRow();
  // The default size: the constructor's encoder and forced tokens.
  const engine::ImageLayout layout = engine::DefaultLayout(info);
  recipes_[{layout.width, layout.height}] =
      std::make_shared<const ImageRecipe>(ImageRecipe{layout, config_.forced_tokens, encoder_});
}

absl::StatusOr<std::shared_ptr<const ImageRecipe>> GenericEngine::Recipe(const engine::ImageLayout& layout) const {
  std::lock_guard<std::mutex> lock(recipes_mu_);
  auto it = recipes_.find({layout.width, layout.height});
  if (it != recipes_.end()) return it->second;
  if (!config_.make_recipe) {
    return absl::InvalidArgumentError(
        absl::StrCat("width: image size ", layout.width, "x", layout.height,
                     " has no recipe in this engine; supported (WxH): ", engine::SupportedSizesText(config_.info)));
  }
  absl::StatusOr<ImageRecipe> made = config_.make_recipe(layout);
  if (!made.ok()) return made.status();
  if (!(made->layout == layout) ||
      (!made->forced_tokens.empty() && static_cast<int32_t>(made->forced_tokens.size()) != layout.image_tokens) ||
      (token_dim_ > 0 && !made->forced_tokens.empty()) || !made->encoder) {
    return absl::InternalError(
        absl::StrCat("the family's recipe for ", layout.width, "x", layout.height, " does not match its layout"));
  }
  auto recipe = std::make_shared<const ImageRecipe>(*std::move(made));
  recipes_.emplace(std::pair{layout.width, layout.height}, recipe);
  return recipe;
}

GenericEngine::~GenericEngine() {
  for (auto& [id, g] : groups_) FreeRows(g);
}

absl::Status GenericEngine::ValidatePromptIds(const std::vector<int32_t>& cond,
                                              const std::vector<int32_t>& uncond) const {
  if (cond.empty() || uncond.empty()) {
    return absl::InvalidArgumentError("cond_ids and uncond_ids must be non-empty");
  }
  for (const std::vector<int32_t>* ids : {&cond, &uncond}) {
    if (static_cast<int32_t>(ids->size()) > config_.info.max_prompt_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: ", ids->size(), " tokens, over max_prompt_tokens ", config_.info.max_prompt_tokens));
    }
  }
  const int32_t vocab = backend_->spec().text_vocab();
  for (const std::vector<int32_t>* ids : {&cond, &uncond}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt token id ", id, " is outside the text vocabulary (vocab_size ", vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status GenericEngine::ValidatePrompts(const engine::PreparedRequest& p) const {
  if (p.cond_embeddings.empty() && p.uncond_embeddings.empty()) return ValidatePromptIds(p.cond_ids, p.uncond_ids);
  if (p.cond_ids.empty() || p.uncond_ids.empty()) {
    return absl::InvalidArgumentError("cond_ids and uncond_ids must be non-empty");
  }
  const size_t width = static_cast<size_t>(config_.info.hidden_size);
  for (auto [ids, rows] :
       {std::pair{&p.cond_ids, &p.cond_embeddings}, std::pair{&p.uncond_ids, &p.uncond_embeddings}}) {
    if (static_cast<int32_t>(ids->size()) > config_.info.max_prompt_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: ", ids->size(), " tokens, over max_prompt_tokens ", config_.info.max_prompt_tokens));
    }
    if (rows->size() != ids->size() * width) {
      return absl::InvalidArgumentError(absl::StrCat("prompt embeddings: ", rows->size(), " floats for ", ids->size(),
                                                     " positions of hidden_size ", width));
    }
    for (size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i] != static_cast<int32_t>(i)) {
        return absl::InvalidArgumentError("prompt embeddings: the ids must be the positions 0 .. len - 1");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<sparse::ResolvedPolicy> GenericEngine::Resolve(const sparse::PolicyParams& params,
                                                              const engine::ImageLayout& layout) const {
  const sparse::GridGeometry grid = engine::PolicyGrid(layout);
  if (params.kind == sparse::PolicyKind::kSsd && config_.ssd_heads == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparsity policy ssd: model ", config_.info.name, " has no head classification (",
                     "ssd_heads.json in its directory; tools/characterize makes it, docs/policies.md)"));
  }
  return sparse::ResolvePolicy(params, grid, config_.ssd_heads.get());
}

absl::StatusOr<engine::PreparedRequest> GenericEngine::Prepare(const engine::GenerationRequest& request) const {
  if (absl::Status s = engine::ValidateRequest(request, config_.info); !s.ok()) return s;
  if (request.speculative_window > 0 && backend_->spec().vector_tokens()) {
    return absl::InvalidArgumentError(
        "speculative_window: this model draws continuous token vectors; speculative decoding verifies discrete "
        "tokens against their distribution");
  }
  if (request.speculative_window > 0 && !backend_->SupportsRewind()) {
    return absl::UnimplementedError(absl::StrCat("speculative_window: the ", backend_->name(),
                                                 " backend does not run speculative decoding (the cpu and cuda "
                                                 "backends do; docs/serving.md); send speculative_window 0"));
  }
  absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(request, config_.info);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<sparse::ResolvedPolicy> policy = Resolve(request.policy, *layout);
  if (!policy.ok()) return policy.status();
  absl::StatusOr<std::shared_ptr<const ImageRecipe>> recipe = Recipe(*layout);
  if (!recipe.ok()) return recipe.status();
  engine::PreparedRequest p;
  if (config_.prompt_embedder && !request.class_id) {
    absl::StatusOr<PromptEmbeddings> embedded = config_.prompt_embedder({request.prompt, request.negative_prompt});
    if (!embedded.ok()) return embedded.status();
    const size_t width = static_cast<size_t>(config_.info.hidden_size);
    for (auto [rows, ids] : {std::pair{&embedded->cond, &p.cond_ids}, std::pair{&embedded->uncond, &p.uncond_ids}}) {
      if (width == 0 || rows->size() % width != 0) {
        return absl::InternalError(absl::StrCat("the family's prompt embeddings are ", rows->size(),
                                                " floats, not rows of hidden_size ", width));
      }
      ids->resize(rows->size() / width);
      for (size_t i = 0; i < ids->size(); ++i) (*ids)[i] = static_cast<int32_t>(i);
    }
    p.cond_embeddings = std::move(embedded->cond);
    p.uncond_embeddings = std::move(embedded->uncond);
  } else {
    absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> ids =
        !request.class_id       ? (*recipe)->encoder({request.prompt, request.negative_prompt})
        : config_.class_encoder ? config_.class_encoder(*request.class_id)
                                : absl::InvalidArgumentError("class_id: this model has no class-conditional prompt");
    if (!ids.ok()) return ids.status();
    p.cond_ids = std::move(ids->first);
    p.uncond_ids = std::move(ids->second);
  }
  if (absl::Status s = ValidatePrompts(p); !s.ok()) return s;
  p.request = request;
  p.layout = *layout;
  p.policy = *policy;
  const kv::RequestBytes bytes = kv_.Bytes(ShapeOf(p));
  p.kv_bytes = bytes.kv_bytes;
  p.own_kv_bytes = bytes.own_kv_bytes;
  if (absl::Status s = engine::CheckKvFits(p.kv_bytes, 2 * request.num_images,
                                           std::string(sparse::PolicyName(policy->kind)), config_.info);
      !s.ok()) {
    return s;
  }
  return p;
}

kv::Sharing GenericEngine::SharingOf(int32_t images, bool embedded) const {
  if (!config_.share_prompt_kv) return kv::Sharing::kNone;
  if (config_.share_prompt_kv_across_requests && !embedded) return kv::Sharing::kAcrossRequests;
  return images > 1 ? kv::Sharing::kWithinRequest : kv::Sharing::kNone;
}

kv::RequestShape GenericEngine::ShapeOf(const engine::PreparedRequest& request) const {
  const int32_t images = request.request.num_images;
  return {request.cond_ids, request.uncond_ids, request.policy, images,
          SharingOf(images, !request.cond_embeddings.empty())};
}

bool GenericEngine::CanAdd(const engine::PreparedRequest& request) const { return kv_.CanPlace(ShapeOf(request)); }

absl::StatusOr<engine::GroupId> GenericEngine::Add(engine::RequestPtr request) {
  if (request == nullptr) return absl::InvalidArgumentError("Add: no request");
  const engine::PreparedRequest& p = request->prepared;
  // Add checks, never recomputes: the request is one Prepare made (a
  // tampered one must not reach a shared Step()), its layout the one its
  // size names and its policy resolved for that layout.
  if (absl::Status s = engine::ValidateRequest(p.request, config_.info); !s.ok()) return s;
  if (absl::Status s = ValidatePrompts(p); !s.ok()) return s;
  absl::StatusOr<engine::ImageLayout> named = engine::RequestLayout(p.request, config_.info);
  if (!named.ok()) return named.status();
  if (p.policy.l_dec != named->image_tokens || !(p.layout == *named)) {
    return absl::InvalidArgumentError(absl::StrCat("policy.l_dec (", p.policy.l_dec, ") must equal image_tokens (",
                                                   named->image_tokens, ") of ", named->width, "x", named->height));
  }
  absl::StatusOr<std::shared_ptr<const ImageRecipe>> recipe = Recipe(p.layout);
  if (!recipe.ok()) return recipe.status();
  Group g;
  g.recipe = *std::move(recipe);
  const int32_t images = p.request.num_images;
  if (absl::Status s = kv_.Place(ShapeOf(p), &g); !s.ok()) return s;
  const engine::SamplingParams& s = p.request.sampling;
  engine::RequestProgress& progress = request->progress;
  progress = {};
  for (int32_t i = 0; i < images; ++i) {
    g.sampling.push_back({s.temperature, s.top_k, s.top_p, s.cfg_weight, s.seed, i});
    progress.tokens.emplace_back().reserve(p.layout.image_tokens);
  }
  if (p.request.parallel_window > 0) {
    const sparse::GridGeometry grid = engine::PolicyGrid(p.layout);
    const std::vector<int32_t>& forced = g.recipe->forced_tokens;
    g.parallel = std::make_unique<ParallelSchedule>(p.layout.image_tokens, grid.width + grid.row_break_tokens,
                                                    p.request.parallel_window, forced);
    std::vector<int32_t> made(p.layout.image_tokens, -1);
    for (size_t t = 0; t < forced.size() && t < made.size(); ++t) made[t] = forced[t];
    g.made.assign(images, made);
  }
  if (p.request.speculative_window > 0) {
    for (int32_t i = 0; i < images; ++i) {
      g.speculative.emplace_back(p.layout.image_tokens, p.request.speculative_window, backend_->spec().logits(),
                                 sampled_offset_, g.recipe->forced_tokens, g.sampling[i]);
    }
  }
  g.request = std::move(request);
  const engine::GroupId id = next_id_++;
  groups_.emplace(id, std::move(g));
  pending_.push_back(id);
  return id;
}

void GenericEngine::FreeRows(Group& g) { kv_.Free(&g); }

void GenericEngine::Record(engine::GroupId id, Group& g, const int32_t* sampled, const float* vectors,
                           engine::StepReport* report) {
  if (g.parallel != nullptr) {
    // Token 0 (the prefill's): one output per image, as a query that records it.
    g.parallel->Made(0);
    for (size_t i = 0; i < g.made.size(); ++i) {
      if (g.made[i][0] < 0) g.made[i][0] = sampled_offset_ + sampled[i];
    }
    RecordParallel(id, g, nullptr, report);
    return;
  }
  const int32_t t = g.tokens_done();
  const std::vector<int32_t>& forced_tokens = g.recipe->forced_tokens;
  const int32_t forced = t < static_cast<int32_t>(forced_tokens.size()) ? forced_tokens[t] : -1;
  if (!g.speculative.empty()) {
    // Token 0 (the prefill's), as sequential decoding makes it; then the drafts.
    for (size_t i = 0; i < g.speculative.size(); ++i) {
      g.speculative[i].Start(forced >= 0 ? forced : sampled_offset_ + sampled[i]);
    }
    RecordSpeculative(id, g, nullptr, report);
    return;
  }
  engine::RequestProgress& progress = g.progress();
  for (size_t i = 0; i < progress.tokens.size(); ++i) {
    if (vectors != nullptr) {
      engine::AppendTokenVector({vectors + i * token_dim_, static_cast<size_t>(token_dim_)}, &progress.tokens[i]);
    } else {
      progress.tokens[i].push_back(forced >= 0 ? forced : sampled_offset_ + sampled[i]);
    }
  }
  ++progress.tokens_done;
  ++progress.steps;
  if (progress.tokens_done >= g.prepared().layout.image_tokens) {
    progress.finished = true;
    FreeRows(g);
    report->finished.push_back(id);
  }
}

void GenericEngine::RecordParallel(engine::GroupId id, Group& g, const int32_t* sampled, engine::StepReport* report) {
  ParallelSchedule& schedule = *g.parallel;
  if (sampled != nullptr) {
    const std::vector<ParallelSchedule::Query>& queries = schedule.Next();
    const size_t n = queries.size();
    for (size_t i = 0; i < g.made.size(); ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (queries[j].records) g.made[i][queries[j].index + 1] = sampled_offset_ + sampled[i * n + j];
      }
    }
    schedule.Commit();
  }
  engine::RequestProgress& progress = g.progress();
  const int32_t leading = schedule.leading();
  for (size_t i = 0; i < progress.tokens.size(); ++i) {
    progress.tokens[i].insert(progress.tokens[i].end(), g.made[i].begin() + progress.tokens_done,
                              g.made[i].begin() + leading);
  }
  progress.tokens_done = leading;
  ++progress.steps;
  if (schedule.done()) {
    progress.finished = true;
    FreeRows(g);
    report->finished.push_back(id);
  }
}

void GenericEngine::RecordSpeculative(engine::GroupId id, Group& g, const float* logits, engine::StepReport* report) {
  if (logits != nullptr) {
    if (speculative_sampler_ == nullptr) {
      speculative_sampler_ = std::make_unique<HostSampler>(backend_->spec().logits());
    }
    const int64_t point = int64_t{2} * backend_->spec().logits();  // one output point's rows
    for (SpeculativeImage& image : g.speculative) {
      if (image.done()) continue;  // fed nothing
      const int32_t n = image.queries();
      image.Verify(logits, *speculative_sampler_);
      logits += n * point;
    }
  }
  engine::RequestProgress& progress = g.progress();
  int32_t common = std::numeric_limits<int32_t>::max();
  progress.drafts_proposed = progress.drafts_accepted = 0;
  for (const SpeculativeImage& image : g.speculative) {
    common = std::min(common, image.made());
    progress.drafts_proposed += image.drafts_proposed();
    progress.drafts_accepted += image.drafts_accepted();
  }
  for (size_t i = 0; i < progress.tokens.size(); ++i) {
    const std::vector<int32_t>& tokens = g.speculative[i].tokens();
    progress.tokens[i].insert(progress.tokens[i].end(), tokens.begin() + progress.tokens_done, tokens.begin() + common);
  }
  progress.tokens_done = common;
  ++progress.steps;
  if (common >= g.prepared().layout.image_tokens) {
    progress.finished = true;
    FreeRows(g);
    report->finished.push_back(id);
  }
}

int32_t GenericEngine::DecodeQueriesOf(Group& g) const {
  if (!g.speculative.empty()) {
    int32_t queries = 0;
    for (const SpeculativeImage& image : g.speculative) queries += image.done() ? 0 : 2 * image.queries();
    return queries;
  }
  const int32_t per_row = g.parallel != nullptr ? static_cast<int32_t>(g.parallel->Next().size()) : 1;
  return static_cast<int32_t>(g.rows.size()) * per_row;
}

absl::Status GenericEngine::PrefillPending(engine::StepReport* report) {
  size_t next = 0;
  while (next < pending_.size()) {
    batch_groups_.clear();
    batch_filled_.clear();
    step_plan_.Clear();
    // The shared prompts a group reads that no earlier call filled and this one does not yet.
    const auto unfilled = [&](const Group& g) {
      std::vector<SharedPrompts::iterator> out;
      for (SharedPrompts::iterator p : g.prompts) {
        if (!p->second.filled && std::ranges::find(batch_filled_, p) == batch_filled_.end() &&
            std::ranges::find(out, p) == out.end()) {
          out.push_back(p);
        }
      }
      return out;
    };
    const auto add_prompts = [&](const std::vector<SharedPrompts::iterator>& prompts) {
      batch_filled_.insert(batch_filled_.end(), prompts.begin(), prompts.end());
    };
    const size_t max_rows = static_cast<size_t>(config_.info.max_batch_rows);
    // Fill one backend call with whole groups (and the shared prompts they
    // need filled), up to max_batch_rows rows.
    while (next < pending_.size()) {
      Group& g = groups_.at(pending_[next]);
      const std::vector<SharedPrompts::iterator> prompts = unfilled(g);
      const size_t used = step_plan_.rows() + batch_filled_.size();
      if ((used > 0 || !prompts.empty()) && used + g.rows.size() + prompts.size() > max_rows) {
        // A group that fills a call alone gets its prompts filled first, in a call of their own.
        if (used == 0) add_prompts(prompts);
        break;
      }
      add_prompts(prompts);
      // A row reading another's prompt KV (a later image's, or every row under
      // sharing across requests) feeds no queries: it completes with its owner.
      const engine::PreparedRequest& prepared = g.prepared();
      const bool embedded = !prepared.cond_embeddings.empty();
      const kv::Sharing sharing = SharingOf(static_cast<int32_t>(g.sampling.size()), embedded);
      const bool shares_all = sharing == kv::Sharing::kAcrossRequests;
      const bool shares_later = sharing == kv::Sharing::kWithinRequest;
      for (size_t i = 0; i < g.sampling.size(); ++i) {
        for (int k = 0; k < 2; ++k) {
          const std::vector<int32_t>& ids = k == 0 ? prepared.cond_ids : prepared.uncond_ids;
          step_plan_.AddRow(g.rows[2 * i + k]);
          if (shares_all || (shares_later && i > 0)) continue;
          if (embedded) {
            step_plan_.AddPromptEmbeddings(k == 0 ? prepared.cond_embeddings : prepared.uncond_embeddings,
                                           config_.info.hidden_size, 0, static_cast<int32_t>(ids.size()));
          } else {
            step_plan_.AddPromptQueries(ids, 0, static_cast<int32_t>(ids.size()));
          }
        }
        step_plan_.AddSampling(g.sampling[i]);
      }
      batch_groups_.push_back({pending_[next], static_cast<int32_t>(g.sampling.size())});
      ++next;
    }
    // The prompt rows follow the rows.
    for (SharedPrompts::iterator p : batch_filled_) {
      const std::vector<int32_t>& ids = p->first.second;
      step_plan_.AddPromptRow(p->second.row);
      step_plan_.AddPromptQueries(ids, 0, static_cast<int32_t>(ids.size()));
    }
    batch_sampled_.assign(step_plan_.pairs(), -1);
    batch_vectors_.assign(step_plan_.pairs() * token_dim_, 0.0f);
    absl::Status s = backend_->Forward(step_plan_.Plan(), {batch_sampled_, nullptr, VectorsOut()});
    if (!s.ok()) return s;
    for (SharedPrompts::iterator p : batch_filled_) p->second.filled = true;
    const int32_t* sampled = batch_sampled_.data();
    const float* vectors = VectorsOut();
    for (auto [id, images] : batch_groups_) {
      Group& g = groups_.at(id);
      Record(id, g, sampled, vectors, report);
      sampled += images;
      if (vectors != nullptr) vectors += static_cast<size_t>(images) * token_dim_;
      report->groups_prefilled += 1;
    }
  }
  pending_.clear();
  return absl::OkStatus();
}

absl::Status GenericEngine::DecodeRunning(const std::vector<engine::GroupId>& ids, engine::StepReport* report) {
  size_t next = 0;
  while (next < ids.size()) {
    batch_groups_.clear();
    step_plan_.Clear();
    int32_t call_queries = 0, call_outputs = 0;
    bool call_logits = false;  // a speculative group verifies from the row logits
    while (next < ids.size()) {
      Group& g = groups_.at(ids[next]);
      // The call's budget counts every query (a row per query without parallel decoding).
      const int32_t queries = DecodeQueriesOf(g);
      if (call_queries > 0 && call_queries + queries > config_.info.max_batch_rows) break;
      call_queries += queries;
      if (!g.speculative.empty()) {
        // Each unfinished image: its last token and drafts, at consecutive
        // indices from the first token not made (again, after a rejection).
        step_plan_.AllowRewind();
        call_logits = true;
        for (size_t i = 0; i < g.speculative.size(); ++i) {
          const SpeculativeImage& image = g.speculative[i];
          if (image.done()) continue;
          for (int k = 0; k < 2; ++k) {
            step_plan_.AddRow(g.rows[2 * i + k]);
            for (int32_t j = 0; j < image.queries(); ++j) {
              step_plan_.AddQuery(QueryKind::kDecode, image.input(j), image.first_index() + j);
            }
          }
          step_plan_.AddSampling(g.sampling[i]);
          call_outputs += image.queries();
        }
      } else if (g.parallel != nullptr) {
        // The schedule's queries, the same for every image and both rows of its pair.
        step_plan_.AllowOutOfOrder();
        const std::vector<ParallelSchedule::Query>& plan = g.parallel->Next();
        for (size_t i = 0; i < g.sampling.size(); ++i) {
          for (int k = 0; k < 2; ++k) {
            step_plan_.AddRow(g.rows[2 * i + k]);
            for (const ParallelSchedule::Query& q : plan) {
              step_plan_.AddQuery(QueryKind::kDecode, g.made[i][q.input_token], q.index, q.provisional);
            }
          }
          step_plan_.AddSampling(g.sampling[i]);
          call_outputs += static_cast<int32_t>(plan.size());
        }
      } else {
        // One decode query per row: image i's last token, at its index.
        for (size_t i = 0; i < g.sampling.size(); ++i) {
          for (int k = 0; k < 2; ++k) {
            step_plan_.AddRow(g.rows[2 * i + k]);
            if (token_dim_ > 0) {
              step_plan_.AddMadeVectorQuery(g.tokens_done() - 1);  // the backend kept the pair's vector
            } else {
              step_plan_.AddQuery(QueryKind::kDecode, g.progress().tokens[i].back(), g.tokens_done() - 1);
            }
          }
          step_plan_.AddSampling(g.sampling[i]);
          ++call_outputs;
        }
      }
      batch_groups_.push_back({ids[next], static_cast<int32_t>(g.sampling.size())});
      ++next;
    }
    batch_sampled_.assign(call_outputs, -1);
    if (call_logits) batch_logits_.resize(int64_t{2} * call_outputs * backend_->spec().logits());
    batch_vectors_.assign(static_cast<size_t>(call_outputs) * token_dim_, 0.0f);
    absl::Status s = backend_->Forward(step_plan_.Plan(),
                                       {batch_sampled_, call_logits ? batch_logits_.data() : nullptr, VectorsOut()});
    if (!s.ok()) return s;
    report->rows_decoded += static_cast<int32_t>(step_plan_.rows());
    const int32_t* sampled = batch_sampled_.data();
    const float* vectors = VectorsOut();
    for (auto [id, images] : batch_groups_) {
      Group& g = groups_.at(id);
      if (!g.speculative.empty()) {
        int32_t outputs = 0;
        for (const SpeculativeImage& image : g.speculative) outputs += image.done() ? 0 : image.queries();
        RecordSpeculative(
            id, g, batch_logits_.data() + (sampled - batch_sampled_.data()) * int64_t{2} * backend_->spec().logits(),
            report);
        sampled += outputs;
      } else if (g.parallel != nullptr) {
        const int32_t outputs = images * static_cast<int32_t>(g.parallel->Next().size());
        RecordParallel(id, g, sampled, report);
        sampled += outputs;
      } else {
        Record(id, g, sampled, vectors, report);
        sampled += images;
        if (vectors != nullptr) vectors += static_cast<size_t>(images) * token_dim_;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::StepReport> GenericEngine::Step() {
  engine::StepReport report;
  // Groups that were running before this step get one decode token; the
  // groups prefilled now get their token 0 from the prefill.
  decode_ids_.clear();
  for (auto& [id, g] : groups_) {
    if (g.tokens_done() > 0 && !g.progress().finished) decode_ids_.push_back(id);
  }
  if (absl::Status s = PrefillPending(&report); !s.ok()) return s;
  if (absl::Status s = DecodeRunning(decode_ids_, &report); !s.ok()) return s;
  return report;
}

void GenericEngine::Remove(engine::GroupId id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  FreeRows(it->second);
  std::erase(pending_, id);
  groups_.erase(it);
}

absl::StatusOr<engine::GroupState> GenericEngine::State(engine::GroupId id) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("group ", id, " is not in the engine"));
  const Group& g = it->second;
  engine::GroupState s;
  s.tokens_done = g.tokens_done();
  s.tokens_total = g.prepared().layout.image_tokens;
  s.finished = g.progress().finished;
  s.tokens = g.progress().tokens;
  return s;
}

absl::StatusOr<std::vector<engine::RgbImage>> GenericEngine::DecodeImages(
    const std::vector<std::vector<int32_t>>& token_grids) {
  return decoder_(token_grids);
}

}  // namespace argen::model
