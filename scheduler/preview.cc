#include "scheduler/preview.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/token_vectors.h"

namespace argen::scheduler {

int32_t TokenRows(const engine::ImageLayout& layout) { return layout.grid_h; }

int32_t TokensPerRow(const engine::ImageLayout& layout) {
  return layout.grid.width > 0 ? layout.grid.width + layout.grid.row_break_tokens : layout.grid_w;
}

int32_t TokenRows(const engine::ModelInfo& info) { return TokenRows(engine::DefaultLayout(info)); }

int32_t TokensPerRow(const engine::ModelInfo& info) { return TokensPerRow(engine::DefaultLayout(info)); }

int32_t MaxPreviews(const engine::ImageLayout& layout) {
  return std::max(0, std::min(kMaxPreviews, TokenRows(layout) - 1));
}

int32_t MaxPreviews(const engine::ModelInfo& info) { return MaxPreviews(engine::DefaultLayout(info)); }

std::vector<int32_t> PreviewRows(int32_t previews, int32_t token_grid) {
  std::vector<int32_t> token_rows;
  for (int32_t j = 1; j <= previews; ++j) {
    token_rows.push_back(static_cast<int32_t>(int64_t{j} * token_grid / (previews + 1)));
  }
  return token_rows;
}

absl::StatusOr<std::vector<int32_t>> PreviewGrid(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                 int32_t token_grid) {
  if (token_grid < 1 || token_rows < 1 || token_rows > token_grid) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview of ", token_rows, " rows on a grid of ", token_grid, " rows"));
  }
  const size_t shown = static_cast<size_t>(token_rows) * token_grid;
  if (sampled.size() < shown) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview of ", token_rows, " rows needs ", shown, " tokens, have ", sampled.size()));
  }
  std::vector<int32_t> grid(sampled.begin(), sampled.begin() + static_cast<std::ptrdiff_t>(shown));
  grid.reserve(static_cast<size_t>(token_grid) * token_grid);
  const auto last_token_row = sampled.begin() + static_cast<std::ptrdiff_t>(shown - token_grid);
  for (int32_t r = token_rows; r < token_grid; ++r)
    grid.insert(grid.end(), last_token_row, last_token_row + token_grid);
  return grid;
}

absl::StatusOr<std::vector<int32_t>> PreviewTokens(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                   int32_t width, int32_t row_break, int32_t total_token_rows) {
  if (row_break == 0 && width == total_token_rows) return PreviewGrid(sampled, token_rows, total_token_rows);
  const int64_t stride = int64_t{width} + row_break;
  if (width < 1 || row_break < 0 || token_rows < 1 || token_rows > total_token_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview of ", token_rows, " rows on ", total_token_rows, " rows of ", width, " tokens"));
  }
  const size_t shown = static_cast<size_t>(token_rows * stride);
  if (sampled.size() < shown - (token_rows == total_token_rows ? row_break : 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview of ", token_rows, " rows needs ", shown, " tokens, have ", sampled.size()));
  }
  const size_t total = static_cast<size_t>(total_token_rows * stride - row_break);
  std::vector<int32_t> out(sampled.begin(), sampled.begin() + static_cast<std::ptrdiff_t>(std::min(shown, total)));
  out.reserve(total);
  const auto last_token_row = sampled.begin() + static_cast<std::ptrdiff_t>(shown - stride);
  while (out.size() < total) {
    const size_t take = std::min(static_cast<size_t>(stride), total - out.size());
    out.insert(out.end(), last_token_row, last_token_row + static_cast<std::ptrdiff_t>(take));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> PreviewTokenVectors(const std::vector<int32_t>& sampled, int32_t token_rows,
                                                         int32_t width, int32_t total_token_rows, int32_t token_dim) {
  if (width < 1 || token_dim < 1 || token_rows < 1 || token_rows > total_token_rows) {
    return absl::InvalidArgumentError(absl::StrCat("preview of ", token_rows, " rows on ", total_token_rows,
                                                   " rows of ", width, " tokens of ", token_dim, " words"));
  }
  const size_t words_per_row = static_cast<size_t>(width) * token_dim;
  const size_t shown = static_cast<size_t>(token_rows) * words_per_row;
  if (sampled.size() < shown) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview of ", token_rows, " rows needs ", shown, " words, have ", sampled.size()));
  }
  std::vector<int32_t> out(sampled.begin(), sampled.begin() + static_cast<std::ptrdiff_t>(shown));
  out.resize(static_cast<size_t>(total_token_rows) * words_per_row, std::bit_cast<int32_t>(engine::kNeutralTokenValue));
  return out;
}

void PaintUnsampledRows(engine::RgbImage& image, int32_t token_rows, int32_t token_grid) {
  if (token_grid < 1) return;
  const int64_t first_gray = int64_t{token_rows} * image.height / token_grid;
  const size_t pixel_row_bytes = static_cast<size_t>(image.width) * 3;
  for (int64_t y = std::max<int64_t>(0, first_gray); y < image.height; ++y) {
    std::fill_n(image.rgb.begin() + static_cast<std::ptrdiff_t>(y * pixel_row_bytes), pixel_row_bytes, kPreviewGray);
  }
}

}  // namespace argen::scheduler
