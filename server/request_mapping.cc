#include "server/request_mapping.h"

#include <cmath>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/preview.h"
#include "server/status_details.h"

namespace argen::server {
namespace {

absl::Status Field(absl::string_view field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", why));
}

bool IsSparse(sparse::PolicyKind kind) { return kind != sparse::PolicyKind::kDense; }

absl::StatusOr<sparse::PolicyParams> ToPolicy(const v1::SparsityPolicy& p, const ServerConfig& config,
                                              int32_t image_tokens) {
  sparse::PolicyParams out = config.default_policy;
  if (!p.name().empty()) {
    absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(p.name());
    if (!kind.ok()) return Field("policy.name", std::string(kind.status().message()));
    if (*kind != config.default_policy.kind) {
      out = sparse::PolicyParams{};
      out.kind = *kind;
      if (IsSparse(*kind)) out.sparsity = config.default_policy.sparsity;
    }
  }
  if (!IsSparse(out.kind)) out.sparsity = 0;
  if (p.has_sparsity()) {
    if (!(p.sparsity() >= 0 && p.sparsity() < 1)) {
      return Field("policy.sparsity", absl::StrCat("must be in [0, 1), got ", p.sparsity()));
    }
    out.sparsity = p.sparsity();
  }
  if (p.has_n_att()) {
    if (p.n_att() < 0) return Field("policy.n_att", absl::StrCat("must be >= 0, got ", p.n_att()));
    out.n_att = p.n_att();
    if (p.n_att() > 0 && !p.has_sparsity()) out.sparsity = 0;  // n_att replaces the default sparsity
  }
  if (p.has_n_recent()) {
    if (p.n_recent() < 0) return Field("policy.n_recent", absl::StrCat("must be >= 0, got ", p.n_recent()));
    out.n_recent = p.n_recent();
  }
  if (p.has_n_sink()) {
    if (p.n_sink() < -1) return Field("policy.n_sink", absl::StrCat("must be >= -1, got ", p.n_sink()));
    out.n_sink = p.n_sink();
  }
  // A recent window inherited from default_policy that is narrower than this
  // request's N_att (e.g. default n_recent 64, request sparsity 0.8 -> N_att 115)
  // falls back to the policy's own default window (0.5 x L_dec, at least N_att):
  // a server default must not make an otherwise valid request invalid.
  if (!p.has_n_recent() && out.n_recent > 0 && out.kind == config.default_policy.kind &&
      !sparse::ResolvePolicy(out, image_tokens).ok()) {
    sparse::PolicyParams widened = out;
    widened.n_recent = 0;
    if (sparse::ResolvePolicy(widened, image_tokens).ok()) out = widened;
  }
  // Cross-field rules (n_att vs n_recent, sinks, ...) come from the one
  // implementation every backend uses.
  absl::StatusOr<sparse::ResolvedPolicy> resolved = sparse::ResolvePolicy(out, image_tokens);
  if (!resolved.ok()) return Field("policy", std::string(resolved.status().message()));
  return out;
}

bool PrintableId(const std::string& id) {
  for (char c : id) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServerConfig& config,
                                                              int32_t image_tokens,
                                                              uint64_t random_seed) {
  engine::GenerationRequest out;
  if (absl::StripAsciiWhitespace(request.prompt()).empty()) {
    return Field("prompt", "must not be empty");
  }
  out.prompt = request.prompt();
  const int32_t images = request.num_images() == 0 ? 1 : request.num_images();
  if (images < 1 || images > config.max_images_per_request) {
    return Field("num_images", absl::StrCat("must be in [1, ", config.max_images_per_request,
                                            "] (0 means 1), got ", request.num_images()));
  }
  out.num_images = images;
  out.sampling = config.default_sampling;
  out.sampling.seed = request.has_seed() ? request.seed() : random_seed;
  if (request.has_cfg_weight()) {
    if (!std::isfinite(request.cfg_weight()) || request.cfg_weight() < 0 || request.cfg_weight() > 100) {
      return Field("cfg_weight", absl::StrCat("must be in [0, 100], got ", request.cfg_weight()));
    }
    out.sampling.cfg_weight = request.cfg_weight();
  }
  if (request.has_temperature()) {
    if (!(request.temperature() > 0) || !std::isfinite(request.temperature())) {
      return Field("temperature", absl::StrCat("must be > 0, got ", request.temperature()));
    }
    out.sampling.temperature = request.temperature();
  }
  if (request.has_top_k()) {
    if (request.top_k() < 0) return Field("top_k", absl::StrCat("must be >= 0, got ", request.top_k()));
    out.sampling.top_k = request.top_k();
  }
  if (request.has_top_p()) {
    if (!(request.top_p() > 0 && request.top_p() <= 1)) {
      return Field("top_p", absl::StrCat("must be in (0, 1], got ", request.top_p()));
    }
    out.sampling.top_p = request.top_p();
  }
  if (request.request_id().size() > 128 || !PrintableId(request.request_id())) {
    return Field("request_id", "must be at most 128 printable ASCII characters without spaces");
  }
  absl::StatusOr<sparse::PolicyParams> policy = ToPolicy(request.policy(), config, image_tokens);
  if (!policy.ok()) return policy.status();
  out.policy = *policy;
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& status) { return ToGrpcStatusWithDetails(status); }

void FillMetrics(const scheduler::RequestMetrics& m, v1::RequestMetrics* out) {
  out->set_queue_wait_seconds(absl::ToDoubleSeconds(m.queue_wait));
  out->set_prefill_seconds(absl::ToDoubleSeconds(m.prefill));
  out->set_decode_seconds(absl::ToDoubleSeconds(m.decode));
  out->set_vq_decode_seconds(absl::ToDoubleSeconds(m.vq_decode));
  out->set_total_seconds(absl::ToDoubleSeconds(m.total));
  out->set_tokens_per_second(m.tokens_per_second);
  out->set_images_per_second(m.images_per_second);
  out->set_peak_kv_bytes(m.peak_kv_bytes);
  out->set_mean_batch_rows(m.mean_batch_rows);
  out->set_steps(m.steps);
  out->set_rows(m.rows);
}

v1::GenerateEvent ToProtoEvent(scheduler::RequestEvent& event, const std::string& request_id) {
  v1::GenerateEvent out;
  if (auto* q = std::get_if<scheduler::QueuedEvent>(&event)) {
    v1::Accepted* a = out.mutable_accepted();
    a->set_request_id(request_id);
    a->set_queue_position(q->position);
    a->set_seed(q->seed);
    a->set_kv_bytes(q->kv_bytes);
    a->set_rows(q->rows);
    v1::ResolvedPolicy* p = a->mutable_policy();
    p->set_name(std::string(sparse::PolicyName(q->policy.kind)));
    p->set_l_dec(q->policy.l_dec);
    p->set_n_att(q->policy.n_att);
    p->set_n_slots(q->policy.n_slots);
    p->set_n_sink(q->policy.n_sink);
    p->set_n_recent(q->policy.n_recent);
  } else if (auto* s = std::get_if<scheduler::StartedEvent>(&event)) {
    out.mutable_started()->set_queue_wait_seconds(absl::ToDoubleSeconds(s->queue_wait));
    out.mutable_started()->set_batch_rows(s->batch_rows);
  } else if (auto* p = std::get_if<scheduler::ProgressEvent>(&event)) {
    out.mutable_progress()->set_tokens_done(p->tokens_done);
    out.mutable_progress()->set_tokens_total(p->tokens_total);
  } else if (auto* i = std::get_if<scheduler::ImageEvent>(&event)) {
    v1::Image* img = out.mutable_image();
    img->set_index(i->index);
    img->set_seed(i->seed);
    img->set_width(i->width);
    img->set_height(i->height);
    img->set_png(std::move(i->encoded));
  } else if (auto* f = std::get_if<scheduler::FinishedEvent>(&event)) {
    FillMetrics(f->metrics, out.mutable_metrics());
  } else if (auto* v = std::get_if<scheduler::PreviewEvent>(&event)) {
    v1::Preview* preview = out.mutable_preview();
    preview->set_index(v->index);
    preview->set_image(v->image);
    preview->set_rows_done(v->rows_done);
    preview->set_tokens_done(v->tokens_done);
    preview->set_width(v->width);
    preview->set_height(v->height);
    preview->set_png(std::move(v->encoded));
  }
  return out;
}

void FillModelInfo(const engine::ModelInfo& info, const ServerConfig& config, v1::ModelInfo* out) {
  out->set_model(info.name);
  out->set_backend(info.backend);
  out->set_image_size(info.image_size);
  out->set_token_grid(info.token_grid);
  out->set_image_tokens(info.image_tokens);
  out->set_image_vocab(info.image_vocab);
  out->set_max_prompt_tokens(info.max_prompt_tokens);
  out->set_kv_bytes_per_token_row(info.kv_bytes_per_token_row);
  out->set_kv_budget_bytes(config.kv_budget_bytes);
  out->set_max_batch_rows(config.max_batch_rows);
  out->set_queue_limit(config.queue_limit);
  out->set_num_layers(info.num_layers);
  out->set_hidden_size(info.hidden_size);
  out->set_max_previews(std::max(0, std::min(scheduler::kMaxPreviews, info.token_grid - 1)));
  for (sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    v1::PolicyInfo* pi = out->add_policies();
    pi->set_name(std::string(sparse::PolicyName(kind)));
    for (std::string_view f : sparse::PolicyParameterNames(kind)) pi->add_parameters(std::string(f));
  }
  auto range = [&](const char* name, double lo, double hi, double def, const char* meaning) {
    v1::ParameterRange* r = out->add_ranges();
    r->set_name(name);
    r->set_min(lo);
    r->set_max(hi);
    r->set_default_value(def);
    r->set_meaning(meaning);
  };
  const double l_dec = info.image_tokens;
  range("num_images", 1, config.max_images_per_request, 1, "images per request (2 KV rows each)");
  range("sparsity", 0, 1, config.default_policy.sparsity,
        "fraction of decode KV not attended per step, [0, 1)");
  range("n_att", 0, l_dec, 0, "decode keys attended per step; 0: (1 - sparsity) * image_tokens");
  range("n_recent", 0, l_dec, 0,
        "diagonal*: recent window N_r (0: image_tokens / 2); diagonal_grid: its window; h2o/alisa: protected "
        "recent keys; grid_window: the row's run; ssd: spatial window W; 0: the policy default");
  range("n_sink", -1, l_dec, -1,
        "sink tokens; -1: the policy default (4; grid_window/diagonal_grid 0; ssd 1, its anchor)");
  range("cfg_weight", 0, 100, config.default_sampling.cfg_weight, "classifier-free guidance weight");
  range("temperature", 0, 100, config.default_sampling.temperature, "sampling temperature, > 0");
  range("top_k", 0, info.image_vocab, config.default_sampling.top_k, "0: off");
  range("top_p", 0, 1, config.default_sampling.top_p, "(0, 1]; 1: off");
  v1::SparsityPolicy* d = out->mutable_default_policy();
  d->set_name(std::string(sparse::PolicyName(config.default_policy.kind)));
  d->set_sparsity(config.default_policy.sparsity);
  d->set_n_att(config.default_policy.n_att);
  d->set_n_recent(config.default_policy.n_recent);
  d->set_n_sink(config.default_policy.n_sink);
}

}  // namespace argen::server
