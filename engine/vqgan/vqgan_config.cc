#include "engine/vqgan/vqgan_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace argen::vqgan {
namespace {

constexpr int32_t kMaxChannels = 16384;
constexpr int32_t kMaxLevels = 8;
constexpr int32_t kMaxResBlocks = 64;
constexpr int32_t kMaxResolution = 1 << 16;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status FieldError(std::string_view source, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": ", field, ": ", what));
}

// Reads node[key] as T; absent keeps *out unless required.
template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, const std::string& path, std::string_view source,
                  bool required, T* out) {
  const YAML::Node v = node[key];
  if (!v || v.IsNull()) {
    return required ? FieldError(source, path + key, "missing") : absl::OkStatus();
  }
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return FieldError(source, path + key, "has the wrong type");
  }
  return absl::OkStatus();
}

}  // namespace

bool VqganConfig::LevelHasAttention(int32_t level) const {
  if (!attention) return false;
  const int32_t res = resolution >> level;
  return std::find(attn_resolutions.begin(), attn_resolutions.end(), res) != attn_resolutions.end();
}

absl::Status ValidateVqganConfig(const VqganConfig& c, std::string_view where) {
  const std::string p = "model.params.";
  const std::string d = "model.params.ddconfig.";
  if (c.quantized && (c.embed_dim <= 0 || c.embed_dim > kMaxChannels))
    return FieldError(where, p + "embed_dim", absl::StrCat("must be in 1..", kMaxChannels, ", got ", c.embed_dim));
  if (c.quantized && (c.n_embed <= 0 || c.n_embed > (1 << 24)))
    return FieldError(where, p + "n_embed", absl::StrCat("must be in 1..2^24, got ", c.n_embed));
  if (c.z_channels <= 0 || c.z_channels > kMaxChannels)
    return FieldError(where, d + "z_channels", absl::StrCat("must be in 1..", kMaxChannels, ", got ", c.z_channels));
  if (c.ch <= 0) return FieldError(where, d + "ch", absl::StrCat("must be > 0, got ", c.ch));
  if (c.ch_mult.empty() || c.ch_mult.size() > static_cast<size_t>(kMaxLevels))
    return FieldError(where, d + "ch_mult",
                      absl::StrCat("must have 1..", kMaxLevels, " entries, got ", c.ch_mult.size()));
  for (int32_t m : c.ch_mult) {
    const int64_t width = int64_t{c.ch} * m;
    if (m <= 0 || width > kMaxChannels || width % kGroupNormGroups != 0) {
      return FieldError(where, d + "ch_mult",
                        absl::StrCat("ch * entry (", c.ch, " * ", m, ") must be a positive multiple of ",
                                     kGroupNormGroups, " (the GroupNorm groups) and at most ", kMaxChannels));
    }
  }
  if (c.num_res_blocks < 0 || c.num_res_blocks > kMaxResBlocks)
    return FieldError(where, d + "num_res_blocks",
                      absl::StrCat("must be in 0..", kMaxResBlocks, ", got ", c.num_res_blocks));
  if (c.resolution <= 0 || c.resolution > kMaxResolution || c.resolution % c.downsample() != 0)
    return FieldError(
        where, d + "resolution",
        absl::StrCat("must be a positive multiple of the downsampling ", c.downsample(), ", got ", c.resolution));
  if (c.out_ch != 3) return FieldError(where, d + "out_ch", absl::StrCat("must be 3 (RGB), got ", c.out_ch));
  return absl::OkStatus();
}

absl::StatusOr<VqganConfig> ParseVqganYaml(std::string_view yaml_text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": not valid YAML: ", e.what()));
  }
  const YAML::Node params = root["model"] ? root["model"]["params"] : YAML::Node();
  if (!params || !params.IsMap()) return FieldError(source, "model.params", "missing or not a mapping");
  const YAML::Node dd = params["ddconfig"];
  if (!dd || !dd.IsMap()) return FieldError(source, "model.params.ddconfig", "missing or not a mapping");
  VqganConfig c;
  const std::string p = "model.params.";
  const std::string d = "model.params.ddconfig.";
  std::string attn_type = "vanilla";
  bool give_pre_end = false, use_linear_attn = false;
  for (absl::Status s :
       {Read(params, "embed_dim", p, source, true, &c.embed_dim), Read(params, "n_embed", p, source, true, &c.n_embed),
        Read(dd, "z_channels", d, source, true, &c.z_channels), Read(dd, "ch", d, source, true, &c.ch),
        Read(dd, "ch_mult", d, source, true, &c.ch_mult),
        Read(dd, "num_res_blocks", d, source, true, &c.num_res_blocks),
        Read(dd, "attn_resolutions", d, source, true, &c.attn_resolutions),
        Read(dd, "resolution", d, source, true, &c.resolution), Read(dd, "out_ch", d, source, false, &c.out_ch),
        Read(dd, "resamp_with_conv", d, source, false, &c.resamp_with_conv),
        Read(dd, "tanh_out", d, source, false, &c.tanh_out), Read(dd, "give_pre_end", d, source, false, &give_pre_end),
        Read(dd, "use_linear_attn", d, source, false, &use_linear_attn),
        Read(dd, "attn_type", d, source, false, &attn_type)}) {
    if (!s.ok()) return s;
  }
  if (give_pre_end)
    return FieldError(source, d + "give_pre_end", "true is not supported (the decoder would not output pixels)");
  if (use_linear_attn || (attn_type != "vanilla" && attn_type != "none")) {
    return FieldError(source, d + "attn_type",
                      absl::StrCat("only \"vanilla\" and \"none\" are supported, got \"",
                                   use_linear_attn ? "linear" : attn_type, "\""));
  }
  c.attention = attn_type == "vanilla";
  if (absl::Status s = ValidateVqganConfig(c, source); !s.ok()) return s;
  return c;
}

absl::StatusOr<VqganConfig> LoadVqganYaml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (the VQGAN configuration vqgan.yaml)"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseVqganYaml(ss.str(), path);
}

}  // namespace argen::vqgan
