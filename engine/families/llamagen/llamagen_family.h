// The LlamaGen family (class-conditional, c2i): config (llamagen_config.h),
// tensor map (llamagen_spec.h), the class prompt, and the VQ-16 decoder
// binding over vq_ds16_c2i.pt (the same decoder as Janus-Pro's, engine/vq).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/families/family.h"

namespace argen::llamagen {

// `t5_dir` (family option t5_dir; empty: config.json's, else the published
// places): a t2i model's T5 encoder directory. `t5_backend` (family option
// t5_backend): "cpu" runs T5 on the host, "cuda" on the GPU, empty where the
// engine runs (backend cuda: the GPU; t5_backend.h).
absl::StatusOr<families::FamilyModel> LoadLlamaGen(const std::string& model_dir, const std::string& t5_dir = "",
                                                   const std::string& t5_backend = "");

// Recognises config.json's model_type "llamagen", or a directory without
// config.json holding a c2i_<size>_<px>.pt or t2i_<size>_stage<k>_<px>.pt.
families::Family LlamaGenFamily();

}  // namespace argen::llamagen
