// LlamaGen class-conditional (c2i) checkpoints (FoundationVision/LlamaGen:
// autoregressive/models/gpt.py, autoregressive/sample/sample_c2i.py) as
// published: a directory holding the GPT weights `c2i_<size>_<px>.pt`
// (e.g. c2i_L_384.pt) and the VQ-16 tokenizer `vq_ds16_c2i.pt`, both torch
// pickles of {"model": state dict, ...}. The file name gives the GPT shape
// (GPT_models: B, L, XL, XXL, XXXL, 1B, 3B, 7B) and the image size. An
// optional config.json with "model_type": "llamagen" names other shapes and
// files (smaller test models; docs/checkpoint-format.md lists its keys).
//
// Text-to-image (t2i) checkpoints as published (README, sample_t2i.py):
// `t2i_<size>_stage<k>_<px>.pt` (t2i_XL_stage1_256.pt, t2i_XL_stage2_512.pt),
// `vq_ds16_t2i.pt`, and the FLAN-T5-XL text encoder as the hub ships
// google/flan-t5-xl, in `t5-ckpt/flan-t5-xl/` (the repository's
// pretrained_models layout) or `flan-t5-xl/`; 120 caption slots
// (cls_token_num) of T5 features (caption_dim 2048).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/vq/vq_config.h"

namespace argen::llamagen {

struct LlamaGenConfig {
  std::string gpt_file;  // in the model directory
  std::string vq_file;
  std::string gpt_model;  // "GPT-B", ... or "custom"
  int32_t dim = 0, n_layer = 0, n_head = 0, n_kv_head = 0;
  int32_t ffn_hidden = 0;  // FeedForward's: find_multiple(int(ffn_dim_multiplier * int(8 dim / 3)), multiple_of)
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  int32_t num_classes = 1000;
  int32_t class_rows = 1001;  // the class table: num_classes + the unconditional row
  int32_t image_size = 256;
  int32_t downsample = 16;
  int32_t cls_token_num = 1;      // c2i: the class token; t2i: the caption slots (120)
  bool text_conditional = false;  // gpt_type "t2i"
  int32_t caption_dim = 2048;     // t2i: the T5 features' width (gpt.py ModelArgs.caption_dim)
  std::string t5_dir;             // t2i: the T5 encoder's hub directory, absolute or in the model directory
  vq::Vq16Config vq;              // vocab = vq.codebook_size

  int32_t grid() const { return image_size / downsample; }
  int32_t image_tokens() const { return grid() * grid(); }
  int32_t head_dim() const { return dim / n_head; }
};

// FeedForward's hidden width (gpt.py): int(2 * 4 dim / 3), times the
// multiplier when given, rounded up to a multiple of `multiple_of`.
int32_t FfnHidden(int32_t dim, double ffn_dim_multiplier, int32_t multiple_of);

// Whether `name` is a published c2i GPT file name: c2i_<size>_<px>.pt.
bool IsC2iFileName(const std::string& name);
// Whether `name` is a published t2i GPT file name: t2i_<size>_stage<k>_<px>.pt.
bool IsT2iFileName(const std::string& name);

// A published c2i model's configuration without its files (benchmarks with
// random weights): `size` as in the file names (B, L, XL, ...), the image size.
absl::StatusOr<LlamaGenConfig> PublishedLlamaGenConfig(const std::string& size, int32_t image_size);

// The directory's configuration: config.json when present, else the one
// c2i_*.pt or t2i_*.pt file's name. `t5_dir` (the family option) overrides
// where a t2i model's T5 encoder is. Errors name the file and field.
absl::StatusOr<LlamaGenConfig> LoadLlamaGenConfig(const std::string& model_dir, const std::string& t5_dir = "");

}  // namespace argen::llamagen
