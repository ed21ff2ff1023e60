#include "engine/request_rules.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/model/sampler.h"
#include "engine/sparse/policy_params.h"
#include "engine/token_vectors.h"
#include "kernels/sparse/policy.h"
#include "kernels/sparse/policy_rewind.h"

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

sparse::GridGeometry PolicyGrid(const ImageLayout& layout) {
  if (layout.grid.width <= 0) return sparse::SquareGrid(layout.image_tokens);
  sparse::GridGeometry grid = layout.grid;
  grid.l_dec = layout.image_tokens;
  return grid;
}

ImageLayout DefaultLayout(const ModelInfo& info) {
  const int32_t width = info.default_width > 0 ? info.default_width : info.image_size;
  const int32_t height = info.default_height > 0 ? info.default_height : info.image_size;
  for (const ImageLayout& l : info.image_layouts) {
    if (l.width == width && l.height == height) return l;
  }
  ImageLayout l;
  l.width = width;
  l.height = height;
  l.grid_w = info.grid.width > 0 ? info.grid.width : info.token_grid;
  l.grid_h = info.grid.width > 0
                 ? (info.image_tokens + info.grid.row_break_tokens) / (info.grid.width + info.grid.row_break_tokens)
                 : info.token_grid;
  l.image_tokens = info.image_tokens;
  l.grid = info.grid;
  return l;
}

std::vector<ImageLayout> ImageLayouts(const ModelInfo& info) {
  if (!info.image_layouts.empty()) return info.image_layouts;
  return {DefaultLayout(info)};
}

int32_t MaxImageTokens(const ModelInfo& info) {
  int32_t most = info.image_tokens;
  for (const ImageLayout& l : info.image_layouts) most = std::max(most, l.image_tokens);
  return most;
}

std::string SupportedSizesText(const ModelInfo& info, size_t limit) {
  const std::vector<ImageLayout> layouts = ImageLayouts(info);
  std::string out;
  for (size_t i = 0; i < layouts.size() && i < limit; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", layouts[i].width, "x", layouts[i].height);
  }
  if (layouts.size() > limit) absl::StrAppend(&out, ", ... (", layouts.size(), " sizes; GetModelInfo lists all)");
  return out;
}

absl::StatusOr<ImageLayout> RequestLayout(const GenerationRequest& r, const ModelInfo& info) {
  if (r.width == 0 && r.height == 0) return DefaultLayout(info);
  if (r.width == 0 || r.height == 0) {
    return absl::InvalidArgumentError(absl::StrCat(r.width == 0 ? "width" : "height", ": must be set with ",
                                                   r.width == 0 ? "height" : "width",
                                                   " (both or neither; neither: the model's default size)"));
  }
  for (const ImageLayout& l : ImageLayouts(info)) {
    if (l.width == r.width && l.height == r.height) return l;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "width: image size ", r.width, "x", r.height, " (width x height) is not supported by model ", info.name,
      "; supported (WxH): ", SupportedSizesText(info), info.size_rule.empty() ? "" : "; the rule: ", info.size_rule));
}

int32_t MaxImagesPerRequest(const ModelInfo& info) {
  return std::min(info.max_images_per_request, info.max_batch_rows / 2);
}

int32_t MaxParallelWindow(const ImageLayout& layout) { return PolicyGrid(layout).width; }

int32_t MaxParallelWindow(const ModelInfo& info) {
  int32_t most = 0;
  for (const ImageLayout& l : ImageLayouts(info)) most = std::max(most, MaxParallelWindow(l));
  return most;
}

std::vector<ParameterRange> RequestParameterRanges(const ModelInfo& info) {
  // Bounds over every size (a request's own L_dec bounds it further).
  const double l_dec = MaxImageTokens(info);
  const sparse::GridGeometry grid = PolicyGrid(info);
  const std::string diagonal_window =
      grid.default_n_recent > 0
          ? absl::StrCat("0: this model's ", grid.default_n_recent, " at its default size, widened to n_att")
          : std::string("0: image_tokens / 2");
  return {
      {"num_images", 1, static_cast<double>(MaxImagesPerRequest(info)), false, false,
       "images per request; each is a CFG pair of KV rows (0 in a request means 1)"},
      {"sparsity", 0, 1, false, true, "fraction of the decode KV not attended per step"},
      {"n_att", 0, l_dec, false, false, "decode keys attended per step; 0: (1 - sparsity) x image_tokens"},
      {"n_recent", 0, l_dec, false, false,
       absl::StrCat(
           "diagonal*: recent window N_r (", diagonal_window,
           "); diagonal_grid: its window; h2o, alisa: protected "
           "recent keys; grid_window: the row's run; ssd: spatial window W; line_evict: recent positions kept whole "
           "(default one image row); 0: the policy's default")},
      {"n_sink", -1, l_dec - 1, false, false,
       "sink tokens; -1: the policy's default (4; grid_window, diagonal_grid, line_evict 0; ssd 1, its anchor)"},
      {"cfg_weight", 0, model::kMaxCfgWeight, false, false, "classifier-free guidance weight"},
      {"temperature", 0, model::kMaxTemperature, false, false, "sampling temperature; 0: greedy (argmax)"},
      {"top_k", 0, static_cast<double>(info.image_vocab), false, false, "keep the k most likely codes; 0: off"},
      {"top_p", 0, 1, true, false, "nucleus sampling mass; 1: off"},
      {"parallel_window", 0, static_cast<double>(MaxParallelWindow(info)), false, false,
       "parallel decoding (dense policy): image row r+1 starts once row r has this many tokens; 0: off"},
      {"speculative_window", 0, static_cast<double>(kMaxSpeculativeWindow), false, false,
       "speculative Jacobi decoding (dense policy, exact): tokens verified per step, the last made one and "
       "window - 1 drafts; 0: off"},
  };
}

absl::Status ValidateRequest(const GenerationRequest& r, const ModelInfo& info) {
  if (info.num_classes > 0) {
    if (!r.prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("prompt: this model (", info.family,
                                                     ") is class-conditional: send class_id in [0, ", info.num_classes,
                                                     ") and no prompt"));
    }
    if (!r.class_id) {
      return absl::InvalidArgumentError(absl::StrCat("class_id: required by this class-conditional model (",
                                                     info.family, "), in [0, ", info.num_classes, ")"));
    }
    if (*r.class_id < 0 || *r.class_id >= info.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("class_id: must be in [0, ", info.num_classes, "), got ", *r.class_id));
    }
  } else {
    if (r.class_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("class_id: this model (", info.family, ") is text-conditional: send a prompt, not a class id"));
    }
    if (absl::StripAsciiWhitespace(r.prompt).empty()) {
      return absl::InvalidArgumentError("prompt: must not be empty");
    }
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
  if (MakesContinuousTokens(info)) {
    // A continuous-token model draws each token with its flow-matching head:
    // there are no codes to truncate or reweigh, and no input ids to feed early.
    const auto no_codes = [&](const char* field, const char* off) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": this model (", info.family,
                                                     ") makes continuous image tokens, not codes; leave it ", off,
                                                     " (only VQ models take it)"));
    };
    if (s.top_k != 0) return no_codes("top_k", "0");
    if (s.top_p != 1.0f) return no_codes("top_p", "1");
    if (s.temperature != 1.0f) return no_codes("temperature", "1");
    if (r.parallel_window != 0) return no_codes("parallel_window", "0");
  }
  if (absl::Status st = model::CheckTemperature(s.temperature); !st.ok()) return Field("temperature", st);
  if (absl::Status st = model::CheckCfgWeight(s.cfg_weight); !st.ok()) return Field("cfg_weight", st);
  if (absl::Status st = model::CheckTopK(s.top_k, info.image_vocab); !st.ok()) return Field("top_k", st);
  if (absl::Status st = model::CheckTopP(s.top_p); !st.ok()) return Field("top_p", st);
  absl::StatusOr<ImageLayout> layout = RequestLayout(r, info);
  if (!layout.ok()) return layout.status();
  // The policy's fields and cross-field rules: messages name policy.<field>.
  absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(r.policy, PolicyGrid(*layout));
  if (!p.ok()) return p.status();
  if (absl::Status s = CheckParallelWindow(r.parallel_window, *layout, *p); !s.ok()) return s;
  return CheckSpeculativeWindow(r.speculative_window, r.parallel_window, *p);
}

absl::Status CheckSpeculativeWindow(int32_t window, int32_t parallel_window, const sparse::ResolvedPolicy& policy) {
  if (window < 0 || window > kMaxSpeculativeWindow) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_window: must be in [0, ", kMaxSpeculativeWindow, "] (0: off), got ", window));
  }
  if (window > 0 && parallel_window > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_window: speculative decoding does not combine with parallel decoding (",
                     "parallel_window ", parallel_window, "); set one of them to 0"));
  }
  if (window > 0 && !sparse::PlansRewind(policy)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative_window: speculative decoding needs the dense policy (a rejected draft's K/V is rewritten; the ",
        "sparse policies keep a ring or per-step state that cannot step back), got policy ",
        std::string(sparse::PolicyName(policy.kind))));
  }
  return absl::OkStatus();
}

absl::Status CheckParallelWindow(int32_t window, const ImageLayout& layout, const sparse::ResolvedPolicy& policy) {
  const int32_t most = MaxParallelWindow(layout);
  if (window < 0 || window > most) {
    return absl::InvalidArgumentError(absl::StrCat("parallel_window: must be in [0, ", most,
                                                   "] (0: off; at most the image's ", most, " tokens per row), got ",
                                                   window));
  }
  if (window > 0 && !sparse::PlansOutOfOrder(policy)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parallel_window: parallel decoding runs with the dense, sliding_window, streaming_llm, diagonal and ",
        "diagonal_sink4 policies (docs/policies.md); policy ", std::string(sparse::PolicyName(policy.kind)),
        " keeps scores, a grid phase or per-line state that assumes one token per step; use one of those or "
        "parallel_window 0"));
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
