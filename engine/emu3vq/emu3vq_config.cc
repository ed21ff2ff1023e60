#include "engine/emu3vq/emu3vq_config.h"

#include "absl/strings/str_cat.h"

namespace argen::emu3vq {
namespace {

absl::Status ReadInt(const nlohmann::json& o, const char* key, int32_t* out, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return absl::OkStatus();  // the published default
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": field '", key, "' must be an integer"));
  }
  *out = it->get<int32_t>();
  return absl::OkStatus();
}

absl::Status ReadIntList(const nlohmann::json& o, const char* key, std::vector<int32_t>* out,
                         const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": field '", key, "' must be a list"));
  out->clear();
  for (const nlohmann::json& v : *it) {
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": field '", key, "' must be a list of integers"));
    }
    out->push_back(v.get<int32_t>());
  }
  return absl::OkStatus();
}

}  // namespace

int32_t Emu3VqConfig::temporal_upsamples() const {
  int32_t n = 0;
  for (int32_t f = temporal_downsample_factor; f > 1; f /= 2) ++n;
  return n;
}

bool Emu3VqConfig::HasAttention(int32_t level) const {
  for (int32_t l : attn_resolutions) {
    if (l == level) return true;
  }
  return false;
}

absl::Status ValidateEmu3VqConfig(const Emu3VqConfig& c, const std::string& where) {
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(where, ": ", why)); };
  if (c.codebook_size <= 0) return bad("codebook_size must be positive");
  if (c.embed_dim <= 0 || c.z_channels <= 0) return bad("embed_dim and z_channels must be positive");
  // The SpatialNorm condition is the temporally processed codebook vectors,
  // which pass through the same latent-channel stack as the latents.
  if (c.embed_dim != c.z_channels) {
    return bad(absl::StrCat("embed_dim ", c.embed_dim, " must equal z_channels (latent_channels) ", c.z_channels));
  }
  if (c.out_channels != 3) return bad(absl::StrCat("out_channels must be 3 (RGB), got ", c.out_channels));
  const int32_t f = c.temporal_downsample_factor;
  if (f < 1 || (f & (f - 1)) != 0) return bad("temporal_downsample_factor must be a power of two");
  if (c.ch <= 0 || c.ch_mult.empty() || c.ch_mult.size() > 8) return bad("ch must be positive, ch_mult 1 to 8 levels");
  for (int32_t m : c.ch_mult) {
    if (m <= 0 || (c.ch * m) % kGroupNormGroups != 0) {
      return bad(
          absl::StrCat("every ch * ch_mult must be a positive multiple of ", kGroupNormGroups, " (GroupNorm groups)"));
    }
  }
  if (c.num_res_blocks <= 0) return bad("num_res_blocks must be positive");
  for (int32_t l : c.attn_resolutions) {
    if (l < 0 || l >= c.levels()) return bad(absl::StrCat("attn_resolutions level ", l, " is not a level of ch_mult"));
  }
  if (c.attention_heads != 1) {
    return bad(absl::StrCat("num_attention_heads must be 1 (single-head attention), got ", c.attention_heads));
  }
  return absl::OkStatus();
}

absl::StatusOr<Emu3VqConfig> ParseBaaiVqConfig(const nlohmann::json& root, const std::string& where) {
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  Emu3VqConfig c;
  for (auto [key, out] : {std::pair{"codebook_size", &c.codebook_size}, std::pair{"embed_dim", &c.embed_dim},
                          std::pair{"z_channels", &c.z_channels}, std::pair{"out_channels", &c.out_channels},
                          std::pair{"temporal_downsample_factor", &c.temporal_downsample_factor},
                          std::pair{"ch", &c.ch}, std::pair{"num_res_blocks", &c.num_res_blocks}}) {
    if (absl::Status s = ReadInt(root, key, out, where); !s.ok()) return s;
  }
  if (absl::Status s = ReadIntList(root, "ch_mult", &c.ch_mult, where); !s.ok()) return s;
  if (absl::Status s = ReadIntList(root, "attn_resolutions", &c.attn_resolutions, where); !s.ok()) return s;
  if (absl::Status s = ValidateEmu3VqConfig(c, where); !s.ok()) return s;
  return c;
}

absl::StatusOr<Emu3VqConfig> ParseHfVqConfig(const nlohmann::json& o, const std::string& where) {
  if (!o.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  Emu3VqConfig c;
  int32_t hidden = -1;
  for (auto [key, out] : {std::pair{"codebook_size", &c.codebook_size}, std::pair{"embed_dim", &c.embed_dim},
                          std::pair{"latent_channels", &c.z_channels}, std::pair{"out_channels", &c.out_channels},
                          std::pair{"temporal_downsample_factor", &c.temporal_downsample_factor},
                          std::pair{"base_channels", &c.ch}, std::pair{"num_res_blocks", &c.num_res_blocks},
                          std::pair{"num_attention_heads", &c.attention_heads}, std::pair{"hidden_size", &hidden}}) {
    if (absl::Status s = ReadInt(o, key, out, where); !s.ok()) return s;
  }
  if (absl::Status s = ReadIntList(o, "channel_multiplier", &c.ch_mult, where); !s.ok()) return s;
  if (absl::Status s = ReadIntList(o, "attn_resolutions", &c.attn_resolutions, where); !s.ok()) return s;
  if (absl::Status s = ValidateEmu3VqConfig(c, where); !s.ok()) return s;
  // transformers sizes every attention block by hidden_size (default 1024):
  // it must be the channels of each level that has attention.
  if (hidden < 0) hidden = 1024;
  for (int32_t level = 0; level < c.levels(); ++level) {
    const bool attends = level == c.levels() - 1 || c.HasAttention(level);  // the middle block always attends
    if (attends && c.ch * c.ch_mult[level] != hidden) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": hidden_size ", hidden, " must equal the channels ",
                                                     c.ch * c.ch_mult[level], " of level ", level,
                                                     ", which has attention"));
    }
  }
  return c;
}

}  // namespace argen::emu3vq
