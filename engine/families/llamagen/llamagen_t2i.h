// The text-conditional half of the LlamaGen family (t2i): sample_t2i.py's
// sampling defaults and the prompt recipe (T2iPrompt: caption -> the CFG
// pair's prefix embeddings, fed as prompt vectors), on a FamilyModel the
// family has filled with the shared parts (spec, sizes, decoder).
#pragma once

#include <string>

#include "engine/families/family.h"
#include "engine/families/llamagen/llamagen_config.h"

namespace argen::llamagen {

// `gpt_path`: the GPT weights file (its caption MLP and uncond_embedding).
// t5_on_gpu: the T5 encoder runs on CUDA (CudaT5Encoder; family option
// t5_backend cuda), else on the CPU; a build without CUDA refuses it when the
// prompt recipe is made.
void SetTextConditioning(const LlamaGenConfig& config, const std::string& gpt_path, bool t5_on_gpu,
                         families::FamilyModel& m);

}  // namespace argen::llamagen
