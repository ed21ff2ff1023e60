#include "engine/image/generation_metadata.h"

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "engine/sparse/policy_params.h"

namespace argen::image {

TextEntries MetadataEntries(const GenerationMetadata& m, int32_t image_index) {
  const sparse::ResolvedPolicy& p = m.policy;
  TextEntries e = {
      {"prompt", m.prompt},
      {"seed", absl::StrCat(m.seed)},
      {"image_index", absl::StrCat(image_index)},
      {"policy",
       absl::StrCat(std::string(sparse::PolicyName(p.kind)), " sparsity=", m.sparsity, " n_att=", p.n_att,
                    " n_slots=", p.n_slots, " n_recent=", p.n_recent, " n_sink=", p.n_sink, " l_dec=", p.l_dec,
                    // Only when not the backend's own, so auto images keep their bytes.
                    p.kv_format == sparse::KvFormat::kAuto
                        ? std::string()
                        : absl::StrCat(" kv_cache_dtype=", std::string(sparse::KvFormatName(p.kv_format))))},
      {"guidance", absl::StrCat(m.sampling.cfg_weight)},
      {"sampling",
       absl::StrCat("temperature=", m.sampling.temperature, " top_k=", m.sampling.top_k, " top_p=", m.sampling.top_p)},
      {"model", m.model},
  };
  if (!m.negative_prompt.empty()) e.insert(e.begin() + 1, {"negative_prompt", m.negative_prompt});
  if (m.class_id) e.insert(e.begin() + 1, {"class_id", absl::StrCat(*m.class_id)});
  e.emplace_back("argen_version", Version());
  e.emplace_back("Software", VersionLine("argen"));
  return e;
}

absl::StatusOr<std::string> AddGenerationMetadata(absl::string_view png, const GenerationMetadata& m,
                                                  int32_t image_index) {
  return AddPngText(png, MetadataEntries(m, image_index));
}

}  // namespace argen::image
