// The one place where a request's parameters are judged: every range, the
// limits a request must fit, and the table GetModelInfo advertises, which is
// built from the same checks (a parameter is advertised with exactly the
// range that is enforced). The server's mapping and the engine's Prepare()
// both call ValidateRequest; nothing else checks request ranges.
//
// Status codes (docs/serving.md): INVALID_ARGUMENT whose message starts with
// the field (`prompt`, `num_images`, `temperature`, `cfg_weight`, `top_k`,
// `top_p`, `width` / `height` (the image size), or the policy's
// `policy.<field>` from sparse::ResolvePolicy);
// FAILED_PRECONDITION naming `max_batch_rows` or `kv_budget_bytes` when the
// request could never run on this server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/sparse/policy_params.h"

namespace argen::engine {

struct ParameterRange {
  std::string name;  // the request field: num_images, sparsity, n_att, ...
  double min = 0, max = 0;
  bool min_exclusive = false, max_exclusive = false;
  std::string meaning;
};

// Every request parameter with the range ValidateRequest enforces for this
// model and these limits. Cross-field rules of the policies (docs/policies.md)
// narrow some combinations further; each bound itself is reachable.
std::vector<ParameterRange> RequestParameterRanges(const ModelInfo& info);

// The grid the policies are resolved against: the model's (info.grid), with
// l_dec = image_tokens; a square grid of image_tokens when it has none. For
// the default size; PolicyGrid(layout) for a request's own.
sparse::GridGeometry PolicyGrid(const ModelInfo& info);
sparse::GridGeometry PolicyGrid(const ImageLayout& layout);

// The default size's layout: from image_layouts when listed, else from
// image_size, token_grid, image_tokens and grid.
ImageLayout DefaultLayout(const ModelInfo& info);
// Every size a request may name: info.image_layouts, or the default alone.
std::vector<ImageLayout> ImageLayouts(const ModelInfo& info);
// The largest L_dec over the sizes (what a backend plans its buffers for).
int32_t MaxImageTokens(const ModelInfo& info);
// "512x512, 768x256, ..." with at most `limit` sizes, then
// "... (N sizes; GetModelInfo lists all)", for bounded messages.
std::string SupportedSizesText(const ModelInfo& info, size_t limit = 20);
// The request's layout: its width x height, or the default for 0 x 0.
// INVALID_ARGUMENT naming `width` or `height` when only one is set, or
// `width` with the supported sizes for a size the model lacks.
absl::StatusOr<ImageLayout> RequestLayout(const GenerationRequest& request, const ModelInfo& info);

// The most images one request may ask for: max_images_per_request, and the
// batch cap's max_batch_rows / 2 (each image is a CFG pair of rows).
int32_t MaxImagesPerRequest(const ModelInfo& info);

// Field ranges and the batch cap (see the top of this file).
absl::Status ValidateRequest(const GenerationRequest& request, const ModelInfo& info);

// parallel_window: in [0, the layout's tokens per image row], and > 0 only
// with a policy whose rows may write out of order (dense). INVALID_ARGUMENT
// naming parallel_window.
absl::Status CheckParallelWindow(int32_t window, const ImageLayout& layout, const sparse::ResolvedPolicy& policy);
// The largest parallel_window of a layout / over the model's sizes.
int32_t MaxParallelWindow(const ImageLayout& layout);
int32_t MaxParallelWindow(const ModelInfo& info);

// speculative_window: in [0, kMaxSpeculativeWindow], and > 0 only with a
// policy whose rows may rewrite their last decode indices (dense) and
// without parallel_window. INVALID_ARGUMENT naming speculative_window.
inline constexpr int32_t kMaxSpeculativeWindow = 32;
absl::Status CheckSpeculativeWindow(int32_t window, int32_t parallel_window, const sparse::ResolvedPolicy& policy);

// FAILED_PRECONDITION naming kv_budget_bytes when a request needing
// `kv_bytes` for `rows` rows could not run even on an idle server.
absl::Status CheckKvFits(int64_t kv_bytes, int32_t rows, const std::string& policy_name, const ModelInfo& info);

}  // namespace argen::engine
