// What a generated image records about itself, as PNG text (png_text.h):
// prompt, seed and image index, policy with its resolved parameters, guidance
// (CFG weight), sampling, model, argen version, request id. Read it back with
// ReadPngText, or e.g. `python3 -c "from PIL import Image; print(Image.open('x.png').text)"`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/image/png_text.h"
#include "kernels/sparse/policy_types.h"

namespace argen::image {

struct GenerationMetadata {
  std::string prompt;
  std::string negative_prompt;      // recorded only when set, so other images keep their bytes
  std::optional<int32_t> class_id;  // class-conditional models: recorded after the prompt
  uint64_t seed = 0;                // the request's; image i draws from stream (seed, i)
  engine::SamplingParams sampling;
  sparse::ResolvedPolicy policy;
  double sparsity = 0;  // as requested (the resolved policy holds n_att)
  std::string model;
};

// Keys: prompt, (class_id, for class-conditional models), negative_prompt (only when set), seed, image_index, policy
// ("diagonal sparsity=0.9 n_att=26 n_slots=26 n_recent=64 n_sink=0 l_dec=256", then " kv_cache_dtype=fp8" for an fp8 KV
// request), guidance, sampling
// ("temperature=1 top_k=0 top_p=1"), model, argen_version, Software. No
// request id: the same request gives the same bytes.
TextEntries MetadataEntries(const GenerationMetadata& m, int32_t image_index);

// `png` with the metadata of image `image_index` added.
absl::StatusOr<std::string> AddGenerationMetadata(absl::string_view png, const GenerationMetadata& m,
                                                  int32_t image_index);

}  // namespace argen::image
