#include "engine/request_rules.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/model/sampler.h"
#include "engine/sparse/policy_params.h"

namespace argen::engine {
namespace {

absl::Status Field(absl::string_view field, const absl::Status& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why.message()));
}

}  // namespace

sparse::GridGeometry PolicyGrid(const ModelInfo& info) {
  if (info.grid.width <= 0) return sparse::SquareGrid(info.image_tokens);
  sparse::GridGeometry grid = info.grid;
  grid.l_dec = info.image_tokens;
  return grid;
}

int32_t MaxImagesPerRequest(const ModelInfo& info) {
  return std::min(info.max_images_per_request, info.max_batch_rows / 2);
}

std::vector<ParameterRange> RequestParameterRanges(const ModelInfo& info) {
  const double l_dec = info.image_tokens;
  return {
      {"num_images", 1, static_cast<double>(MaxImagesPerRequest(info)), false, false,
       "images per request; each is a CFG pair of KV rows (0 in a request means 1)"},
      {"sparsity", 0, 1, false, true, "fraction of the decode KV not attended per step"},
      {"n_att", 0, l_dec, false, false, "decode keys attended per step; 0: (1 - sparsity) x image_tokens"},
      {"n_recent", 0, l_dec, false, false,
       "diagonal*: recent window N_r (0: image_tokens / 2); diagonal_grid: its window; h2o, alisa: protected "
       "recent keys; grid_window: the row's run; ssd: spatial window W; 0: the policy's default"},
      {"n_sink", -1, l_dec - 1, false, false,
       "sink tokens; -1: the policy's default (4; grid_window, diagonal_grid 0; ssd 1, its anchor)"},
      {"cfg_weight", 0, model::kMaxCfgWeight, false, false, "classifier-free guidance weight"},
      {"temperature", 0, model::kMaxTemperature, false, false, "sampling temperature; 0: greedy (argmax)"},
      {"top_k", 0, static_cast<double>(info.image_vocab), false, false, "keep the k most likely codes; 0: off"},
      {"top_p", 0, 1, true, false, "nucleus sampling mass; 1: off"},
  };
}

absl::Status ValidateRequest(const GenerationRequest& r, const ModelInfo& info) {
  if (absl::StripAsciiWhitespace(r.prompt).empty()) {
    return absl::InvalidArgumentError("prompt: must not be empty");
  }
  if (r.num_images < 1 || r.num_images > info.max_images_per_request) {
    return absl::InvalidArgumentError(absl::StrCat("num_images: must be in [1, ", info.max_images_per_request,
                                                   "] (max_images_per_request), got ", r.num_images));
  }
  if (2 * int64_t{r.num_images} > info.max_batch_rows) {
    return absl::FailedPreconditionError(
        absl::StrCat("request can never fit: num_images ", r.num_images, " needs ", 2 * int64_t{r.num_images},
                     " batch rows (2 per image for guidance) but the server's max_batch_rows is ", info.max_batch_rows,
                     "; at most ", MaxImagesPerRequest(info), " images per request"));
  }
  const SamplingParams& s = r.sampling;
  if (absl::Status st = model::CheckTemperature(s.temperature); !st.ok()) return Field("temperature", st);
  if (absl::Status st = model::CheckCfgWeight(s.cfg_weight); !st.ok()) return Field("cfg_weight", st);
  if (absl::Status st = model::CheckTopK(s.top_k, info.image_vocab); !st.ok()) return Field("top_k", st);
  if (absl::Status st = model::CheckTopP(s.top_p); !st.ok()) return Field("top_p", st);
  // The policy's fields and cross-field rules: messages name policy.<field>.
  if (absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(r.policy, PolicyGrid(info)); !p.ok()) {
    return p.status();
  }
  return absl::OkStatus();
}

absl::Status CheckKvFits(int64_t kv_bytes, int32_t rows, const std::string& policy_name, const ModelInfo& info) {
  if (kv_bytes <= info.kv_budget_bytes) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("request can never fit: it needs ", kv_bytes, " bytes of KV cache (", rows, " rows under policy ",
                   policy_name, ") but the server's KV budget (kv_budget_bytes) is ", info.kv_budget_bytes,
                   " bytes; ask for fewer images or a sparser policy"));
}

}  // namespace argen::engine
