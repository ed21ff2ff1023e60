// Previews: intermediate images of a request while its tokens are sampled.
//
// What a preview shows (exact, so a client or test can rebuild it): a request
// asking for k previews of an image with a G x G token grid gets preview j
// (1 <= j <= k) once r_j = floor(j * G / (k + 1)) complete token rows have
// been sampled (r_j * G tokens, raster order; evenly spaced token counts).
// The preview decodes the G x G grid whose first r_j rows are the sampled
// tokens and whose remaining rows repeat row r_j - 1 (the decoder is
// convolutional, so pixels near the edge depend on what follows), then paints
// every pixel row at or below floor(r_j * H / G) mid-gray (128, 128, 128):
// only pixel rows of sampled token rows are shown. A continuous-token model
// (NextStep-1: each token token_dim floats) decodes its first r_j rows of
// token vectors as sampled and every later token as the neutral token
// (engine::kNeutralTokenValue: all zeros, the normalized latent's mean), then
// paints the same pixel rows gray. Previews are encoded like
// the final images (PNG). They are produced on the image workers, never on the
// decode loop, and dropped, not queued, when the image path or the client is
// behind (see Scheduler).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace argen::scheduler {

// Most previews one request may ask for (per image).
inline constexpr int32_t kMaxPreviews = 8;

// The token rows of an image of `layout` (its grid's rows; a square grid:
// token_grid) and the decode tokens per row (width + row breaks); of the
// model's default size for `info`.
int32_t TokenRows(const engine::ImageLayout& layout);
int32_t TokensPerRow(const engine::ImageLayout& layout);
int32_t TokenRows(const engine::ModelInfo& info);
int32_t TokensPerRow(const engine::ModelInfo& info);
// At most kMaxPreviews, and fewer than the token rows.
int32_t MaxPreviews(const engine::ImageLayout& layout);
int32_t MaxPreviews(const engine::ModelInfo& info);

// The token rows r_1 .. r_k the previews show, for a grid of `token_grid`
// token rows; strictly increasing and in [1, token_grid) when
// 1 <= k < token_grid (the scheduler refuses larger k).
std::vector<int32_t> PreviewRows(int32_t previews, int32_t token_grid);

// The token grid a preview decodes: the first `token_rows` token rows of
// `sampled` (which holds at least token_rows * token_grid tokens), then token
// row token_rows - 1 repeated.
absl::StatusOr<std::vector<int32_t>> PreviewGrid(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                 int32_t token_grid);

// The same for a decode sequence whose rows of `width` tokens are each
// followed by `row_break` tokens (Lumina-mGPT's new line; the last row has
// none): the first `token_rows` rows with their breaks as sampled (`sampled`
// holds at least token_rows * (width + row_break) tokens), then token row
// token_rows - 1 and its break repeated up to `total_token_rows` rows.
// row_break 0, width = total_token_rows = G: PreviewGrid.
absl::StatusOr<std::vector<int32_t>> PreviewTokens(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                   int32_t width, int32_t row_break, int32_t total_token_rows);

// The same for a continuous-token model: `sampled` holds token_dim words a
// token (engine/token_vectors.h), rows of `width` tokens in raster order, at
// least token_rows rows; the first `token_rows` rows as sampled, then neutral
// tokens (engine::kNeutralTokenValue) up to `total_token_rows` rows.
absl::StatusOr<std::vector<int32_t>> PreviewTokenVectors(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                         int32_t width, int32_t total_token_rows, int32_t token_dim);

// Paints the pixel rows not covered by `token_rows` sampled token rows mid-gray.
void PaintUnsampledRows(engine::RgbImage& image, int32_t token_rows, int32_t token_grid);

inline constexpr uint8_t kPreviewGray = 128;

}  // namespace argen::scheduler
