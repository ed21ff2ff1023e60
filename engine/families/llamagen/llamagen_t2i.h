// The text-conditional half of the LlamaGen family (t2i): sample_t2i.py's
// sampling defaults and the prompt recipe (T2iPrompt: caption -> the CFG
// pair's prefix embeddings, fed as prompt vectors), on a FamilyModel the
// family has filled with the shared parts (spec, sizes, decoder).
#pragma once

#include <string>

#include "engine/families/family.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/families/llamagen/t5_backend.h"

namespace argen::llamagen {

// `gpt_path`: the GPT weights file (its caption MLP and uncond_embedding).
// `t5_backend` (family option t5_backend): where the T5 encoder runs, CUDA
// (CudaT5Encoder) or the CPU, resolved against the engine's backend when the
// prompt recipe is made (T5RunsOnGpu); a build without CUDA refuses the GPU
// then.
void SetTextConditioning(const LlamaGenConfig& config, const std::string& gpt_path, T5Backend t5_backend,
                         families::FamilyModel& m);

}  // namespace argen::llamagen
