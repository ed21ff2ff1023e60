// Where argen_sweep puts a finished request's images, per --format:
//
// - default: OUT/<config>/<prompt index:04d>_<image>.png (tools/sweep/report.py
//   and tools/scorer read it);
// - geneval: the layout GenEval's evaluation/evaluate_images.py reads, with
//   OUT/<config> as its image folder: <prompt index:05d>/metadata.jsonl (the
//   prompt's line of evaluation_metadata.jsonl, verbatim) and
//   <prompt index:05d>/samples/<image:04d>.png;
// - dpg: the layout DPG-Bench's compute_dpg_bench.py reads, with OUT/<config>
//   as --image-root-path: one <prompt file name>.png a prompt, its images
//   tiled 2 x 2 (image i at column i % 2, row i / 2; --pic-num = images per
//   prompt, --resolution = the image's side); a single image stays as it is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/image/png.h"
#include "tools/sweep/prompt_set.h"

namespace argen::sweep {

enum class OutputFormat { kDefault, kGeneval, kDpg };

// "default", "geneval", "dpg".
std::string_view OutputFormatName(OutputFormat format);
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

// DPG-Bench crops at most 4 cells of a 2 x 2 grid.
inline constexpr int32_t kDpgMaxImages = 4;

// The images tiled 2 x 2 (1 to 4 of one size; cells without an image black).
absl::StatusOr<engine::RgbImage> TileTwoByTwo(const std::vector<engine::RgbImage>& images);

// Writes one request's files into `config_dir` (OUT/<config>) and returns
// each image's path relative to it, for the manifest (dpg: the grid's, for
// every image). Errors name the file.
absl::StatusOr<std::vector<std::string>> WriteRequestFiles(OutputFormat format, const std::string& config_dir,
                                                           const BenchmarkPrompt& prompt,
                                                           const std::vector<engine::RgbImage>& images,
                                                           const image::PngOptions& png);

}  // namespace argen::sweep
