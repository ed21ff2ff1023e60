#include "engine/checkpoint/generation_tensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argen::checkpoint {
namespace {

// Appends weight+bias of a Linear / Conv2d / GroupNorm.
void WeightBias(std::vector<ExpectedTensor>& out, const std::string& prefix, std::vector<int64_t> weight_shape) {
  const int64_t out_dim = weight_shape[0];
  out.push_back({prefix + ".weight", std::move(weight_shape)});
  out.push_back({prefix + ".bias", {out_dim}});
}

void Conv(std::vector<ExpectedTensor>& out, const std::string& prefix, int64_t cout, int64_t cin, int64_t k) {
  WeightBias(out, prefix, {cout, cin, k, k});
}

void GroupNorm(std::vector<ExpectedTensor>& out, const std::string& prefix, int64_t channels) {
  WeightBias(out, prefix, {channels});
}

// LlamaGen ResnetBlock: norm1, conv1, norm2, conv2, and a 1x1 nin_shortcut when channels change.
void ResnetBlock(std::vector<ExpectedTensor>& out, const std::string& p, int64_t cin, int64_t cout) {
  GroupNorm(out, p + ".norm1", cin);
  Conv(out, p + ".conv1", cout, cin, 3);
  GroupNorm(out, p + ".norm2", cout);
  Conv(out, p + ".conv2", cout, cout, 3);
  if (cin != cout) Conv(out, p + ".nin_shortcut", cout, cin, 1);
}

void AttnBlock(std::vector<ExpectedTensor>& out, const std::string& p, int64_t c) {
  GroupNorm(out, p + ".norm", c);
  for (const char* name : {".q", ".k", ".v", ".proj_out"}) Conv(out, p + name, c, c, 1);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::vector<ExpectedTensor> LanguageGenerationTensors(const JanusConfig& config) {
  const LanguageConfig& l = config.language;
  const int64_t hidden = l.hidden_size, inter = l.intermediate_size;
  const int64_t q_dim = int64_t{l.num_attention_heads} * l.head_dim;
  const int64_t kv_dim = int64_t{l.num_key_value_heads} * l.head_dim;
  std::vector<ExpectedTensor> out;
  out.push_back({"language_model.model.embed_tokens.weight", {l.vocab_size, hidden}});
  for (int32_t i = 0; i < l.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("language_model.model.layers.", i, ".");
    out.push_back({p + "input_layernorm.weight", {hidden}});
    out.push_back({p + "self_attn.q_proj.weight", {q_dim, hidden}});
    out.push_back({p + "self_attn.k_proj.weight", {kv_dim, hidden}});
    out.push_back({p + "self_attn.v_proj.weight", {kv_dim, hidden}});
    out.push_back({p + "self_attn.o_proj.weight", {hidden, q_dim}});
    out.push_back({p + "post_attention_layernorm.weight", {hidden}});
    out.push_back({p + "mlp.gate_proj.weight", {inter, hidden}});
    out.push_back({p + "mlp.up_proj.weight", {inter, hidden}});
    out.push_back({p + "mlp.down_proj.weight", {hidden, inter}});
  }
  out.push_back({"language_model.model.norm.weight", {hidden}});

  const GenVisionConfig& v = config.gen_vision;
  out.push_back({"gen_embed.weight", {v.image_token_size, v.n_embed}});
  // MlpProjector mlp_gelu: Sequential(Linear, GELU, Linear, ...): Linears at even indices.
  const GenAlignerConfig& a = config.gen_aligner;
  WeightBias(out, "gen_aligner.layers.0", {a.n_embed, a.input_dim});
  for (int32_t d = 1; d < a.depth; ++d) {
    WeightBias(out, absl::StrCat("gen_aligner.layers.", 2 * d), {a.n_embed, a.n_embed});
  }
  const GenHeadConfig& h = config.gen_head;
  WeightBias(out, "gen_head.output_mlp_projector", {h.image_token_embed, h.n_embed});
  WeightBias(out, "gen_head.vision_head", {h.image_token_size, h.image_token_embed});
  return out;
}

std::vector<ExpectedTensor> VqDecoderTensors(const GenVisionConfig& vq) {
  const std::string p = "gen_vision_model.";
  const int64_t levels = static_cast<int64_t>(vq.ch_mult.size());
  std::vector<ExpectedTensor> out;
  out.push_back({p + "quantize.embedding.weight", {vq.codebook_size, vq.codebook_embed_dim}});
  Conv(out, p + "post_quant_conv", vq.z_channels, vq.codebook_embed_dim, 1);

  const std::string d = p + "decoder.";
  int64_t block_in = int64_t{vq.ch} * vq.ch_mult.back();
  Conv(out, d + "conv_in", block_in, vq.z_channels, 3);
  ResnetBlock(out, d + "mid.0", block_in, block_in);
  AttnBlock(out, d + "mid.1", block_in);
  ResnetBlock(out, d + "mid.2", block_in, block_in);
  // conv_blocks[i] serves resolution level (levels - 1 - i): deepest first.
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t level = levels - 1 - i;
    const int64_t block_out = int64_t{vq.ch} * vq.ch_mult[level];
    const std::string b = absl::StrCat(d, "conv_blocks.", i, ".");
    for (int32_t j = 0; j <= vq.num_res_blocks; ++j) {
      ResnetBlock(out, absl::StrCat(b, "res.", j), block_in, block_out);
      block_in = block_out;
      if (level == levels - 1) AttnBlock(out, absl::StrCat(b, "attn.", j), block_in);
    }
    if (level != 0) Conv(out, b + "upsample.conv", block_in, block_in, 3);
  }
  GroupNorm(out, d + "norm_out", block_in);
  Conv(out, d + "conv_out", 3, block_in, 3);
  return out;
}

std::vector<ExpectedTensor> GenerationTensors(const JanusConfig& config) {
  std::vector<ExpectedTensor> out = LanguageGenerationTensors(config);
  std::vector<ExpectedTensor> vq = VqDecoderTensors(config.gen_vision);
  out.insert(out.end(), std::make_move_iterator(vq.begin()), std::make_move_iterator(vq.end()));
  return out;
}

absl::Status ValidateForGeneration(const Checkpoint& checkpoint, const JanusConfig& config) {
  for (const ExpectedTensor& e : GenerationTensors(config)) {
    auto info = checkpoint.Find(e.name);
    if (!info.ok()) return info.status();
    if ((*info)->shape != e.shape) {
      return absl::InvalidArgumentError(absl::StrCat((*info)->file, ": tensor '", e.name, "' has shape ",
                                                     ShapeString((*info)->shape), ", expected ",
                                                     ShapeString(e.shape)));
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::checkpoint
