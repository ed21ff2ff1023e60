#include "server/model_info.h"

#include <map>
#include <string>
#include <string_view>

#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/preview.h"

namespace argen::server {

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
  out->set_num_classes(info.num_classes);
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
      {"parallel_window", config.default_parallel_window},
      {"speculative_window", config.default_speculative_window},
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
