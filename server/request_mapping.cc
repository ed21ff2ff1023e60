#include "server/request_mapping.h"

#include <cmath>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_defaults.h"
#include "engine/sparse/policy_params.h"
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
  out.negative_prompt = request.negative_prompt();
  if (request.has_class_id()) out.class_id = request.class_id();
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
  // The server's defaults apply where they can (a dense request, not the
  // other mode's); a request's own value is checked as given.
  const bool dense = out.policy.kind == sparse::PolicyKind::kDense;
  const bool own_speculative = request.has_speculative_window() && request.speculative_window() > 0;
  out.parallel_window = request.has_parallel_window() ? request.parallel_window()
                        : dense && !own_speculative   ? config.default_parallel_window
                                                      : 0;
  out.speculative_window = request.has_speculative_window()    ? request.speculative_window()
                           : dense && out.parallel_window == 0 ? config.default_speculative_window
                                                               : 0;
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
  out->set_drafts_proposed(m.drafts_proposed);
  out->set_drafts_accepted(m.drafts_accepted);
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

}  // namespace argen::server
