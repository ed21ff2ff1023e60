#include "server/request_mapping.h"

#include <cmath>
#include <map>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_defaults.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/preview.h"
#include "server/status_details.h"

namespace argen::server {
namespace {

bool PrintableId(const std::string& id) {
  for (char c : id) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

sparse::PolicyRequest ToPolicyRequest(const v1::SparsityPolicy& p) {
  sparse::PolicyRequest r;
  r.name = p.name();
  if (p.has_sparsity()) r.sparsity = p.sparsity();
  if (p.has_n_att()) r.n_att = p.n_att();
  if (p.has_n_recent()) r.n_recent = p.n_recent();
  if (p.has_n_sink()) r.n_sink = p.n_sink();
  return r;
}

// The request's kv_cache_dtype, or the server's default when unset or empty.
// Apart from the policy rule: naming another policy keeps the default dtype.
absl::StatusOr<sparse::KvFormat> KvFormatOf(const v1::SparsityPolicy& p, sparse::KvFormat server_default) {
  if (p.kv_cache_dtype().empty()) return server_default;
  absl::StatusOr<sparse::KvFormat> format = sparse::ParseKvFormat(p.kv_cache_dtype());
  if (!format.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("policy.kv_cache_dtype: \"", p.kv_cache_dtype().substr(0, 64),
                                                   "\" is not one of auto, fp8 (also fp8_e4m3)"));
  }
  return *format;
}

}  // namespace

absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServerConfig& config, const engine::ModelInfo& info,
                                                              uint64_t random_seed) {
  engine::GenerationRequest out;
  out.prompt = request.prompt();
  out.num_images = request.num_images() == 0 ? 1 : request.num_images();
  out.sampling = config.default_sampling;
  out.sampling.seed = request.has_seed() ? request.seed() : random_seed;
  if (request.has_cfg_weight()) out.sampling.cfg_weight = request.cfg_weight();
  if (request.has_temperature()) out.sampling.temperature = request.temperature();
  if (request.has_top_k()) out.sampling.top_k = request.top_k();
  if (request.has_top_p()) out.sampling.top_p = request.top_p();
  if (request.request_id().size() > 128 || !PrintableId(request.request_id())) {
    return absl::InvalidArgumentError("request_id: must be at most 128 printable ASCII characters without spaces");
  }
  if (request.width() < 0 || request.height() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(request.width() < 0 ? "width" : "height",
                                                   ": must be >= 0 (0: the model's default size), got ",
                                                   request.width() < 0 ? request.width() : request.height()));
  }
  out.width = request.width();
  out.height = request.height();
  // The policy defaults apply to the request's own decode length.
  absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(out, info);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<sparse::PolicyParams> policy = sparse::ApplyPolicyDefaults(
      ToPolicyRequest(request.policy()), config.default_policy, engine::PolicyGrid(*layout));
  if (!policy.ok()) return policy.status();
  absl::StatusOr<sparse::KvFormat> kv_format = KvFormatOf(request.policy(), config.default_policy.kv_format);
  if (!kv_format.ok()) return kv_format.status();
  out.policy = *policy;
  out.policy.kv_format = *kv_format;
  if (absl::Status s = engine::ValidateRequest(out, info); !s.ok()) return s;
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
    p->set_kv_cache_dtype(std::string(sparse::KvFormatName(q->policy.kv_format)));
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
  out->set_family(info.family);
  out->set_backend(info.backend);
  out->set_image_size(info.image_size);
  out->set_token_grid(info.token_grid);
  out->set_image_tokens(info.image_tokens);
  out->set_image_vocab(info.image_vocab);
  out->set_max_prompt_tokens(info.max_prompt_tokens);
  out->set_kv_bytes_per_token_row(info.kv_bytes_per_token_row);
  // The engine's limits: what it enforces.
  out->set_kv_budget_bytes(info.kv_budget_bytes);
  out->set_max_batch_rows(info.max_batch_rows);
  out->set_max_images_per_request(engine::MaxImagesPerRequest(info));
  out->set_queue_limit(config.queue_limit);
  out->set_num_layers(info.num_layers);
  out->set_hidden_size(info.hidden_size);
  out->set_max_previews(scheduler::MaxPreviews(info));
  for (const engine::ImageLayout& l : engine::ImageLayouts(info)) {
    v1::ImageSize* size = out->add_image_sizes();
    size->set_width(l.width);
    size->set_height(l.height);
    size->set_image_tokens(l.image_tokens);
  }
  const engine::ImageLayout default_layout = engine::DefaultLayout(info);
  out->mutable_default_size()->set_width(default_layout.width);
  out->mutable_default_size()->set_height(default_layout.height);
  out->mutable_default_size()->set_image_tokens(default_layout.image_tokens);
  for (sparse::KvFormat format : {sparse::KvFormat::kAuto, sparse::KvFormat::kFp8E4m3}) {
    out->add_kv_cache_dtypes(std::string(sparse::KvFormatName(format)));
  }
  out->set_weight_dtype(config.weight_dtype);
  for (sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    v1::PolicyInfo* pi = out->add_policies();
    pi->set_name(std::string(sparse::PolicyName(kind)));
    for (std::string_view f : sparse::PolicyParameterNames(kind)) pi->add_parameters(std::string(f));
  }
  // Defaults are the server's (what an unset field becomes).
  const sparse::PolicyParams& dp = config.default_policy;
  const engine::SamplingParams& ds = config.default_sampling;
  const std::map<std::string, double> defaults = {
      {"num_images", 1},
      {"sparsity", dp.sparsity},
      {"n_att", dp.n_att},
      {"n_recent", dp.n_recent},
      {"n_sink", dp.n_sink},
      {"cfg_weight", ds.cfg_weight},
      {"temperature", ds.temperature},
      {"top_k", ds.top_k},
      {"top_p", ds.top_p},
  };
  for (const engine::ParameterRange& range : engine::RequestParameterRanges(info)) {
    v1::ParameterRange* r = out->add_ranges();
    r->set_name(range.name);
    r->set_min(range.min);
    r->set_max(range.max);
    r->set_min_exclusive(range.min_exclusive);
    r->set_max_exclusive(range.max_exclusive);
    auto d = defaults.find(range.name);
    if (d != defaults.end()) r->set_default_value(d->second);
    r->set_meaning(range.meaning);
  }
  v1::SparsityPolicy* d = out->mutable_default_policy();
  d->set_name(std::string(sparse::PolicyName(dp.kind)));
  d->set_sparsity(dp.sparsity);
  d->set_n_att(dp.n_att);
  d->set_n_recent(dp.n_recent);
  d->set_n_sink(dp.n_sink);
  d->set_kv_cache_dtype(std::string(sparse::KvFormatName(dp.kv_format)));
}

}  // namespace argen::server
