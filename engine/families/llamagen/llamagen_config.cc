#include "engine/families/llamagen/llamagen_config.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/families/json_fields.h"
#include "nlohmann/json.hpp"

namespace argen::llamagen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct GptShape {
  int32_t n_layer, n_head, dim;
};

// gpt.py's GPT_models table.
const std::map<std::string, GptShape>& GptModels() {
  static const auto* models = new std::map<std::string, GptShape>{
      {"GPT-B", {12, 12, 768}},     {"GPT-L", {24, 16, 1024}},  {"GPT-XL", {36, 20, 1280}}, {"GPT-XXL", {48, 24, 1536}},
      {"GPT-XXXL", {48, 40, 2560}}, {"GPT-1B", {22, 32, 2048}}, {"GPT-3B", {24, 32, 3200}}, {"GPT-7B", {32, 32, 4096}},
  };
  return *models;
}

const std::regex& C2iName() {
  static const std::regex* re = new std::regex(R"(c2i_(B|L|XL|XXL|XXXL|1B|3B|7B)_(256|384|512)\.pt)");
  return *re;
}

const std::regex& T2iName() {
  static const std::regex* re = new std::regex(R"(t2i_(B|L|XL|XXL|XXXL|1B|3B|7B)_stage[0-9]+_(256|384|512)\.pt)");
  return *re;
}

absl::Status SetShape(LlamaGenConfig& c, const std::string& gpt_model, const std::string& where) {
  const auto it = GptModels().find(gpt_model);
  if (it == GptModels().end()) {
    std::vector<std::string> names;
    for (const auto& [name, shape] : GptModels()) names.push_back(name);
    return absl::InvalidArgumentError(absl::StrCat(where, ": gpt_model '", gpt_model, "' is not one of ",
                                                   absl::StrJoin(names, ", "), " (or give dim, n_layer, n_head)"));
  }
  c.gpt_model = gpt_model;
  c.n_layer = it->second.n_layer;
  c.n_head = it->second.n_head;
  c.dim = it->second.dim;
  return absl::OkStatus();
}

using Fields = families::JsonFields;

absl::Status ReadConfigJson(const std::string& path, LlamaGenConfig& c, double& ffn_multiplier, int32_t& multiple_of,
                            int32_t& class_dropout_row) {
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) return text.status();
  // Not ParseJsonObject: this reader has always said "not a JSON object" for both faults.
  const json root = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  const Fields f(root, path);
  std::string gpt_type = "c2i";
  if (absl::Status s = f.String("gpt_type", &gpt_type); !s.ok()) return s;
  if (gpt_type != "c2i" && gpt_type != "t2i") {
    return f.Error("gpt_type", absl::StrCat("is '", gpt_type, "': must be c2i (class) or t2i (text)"));
  }
  if (gpt_type == "t2i") {
    c.text_conditional = true;
    c.cls_token_num = 120;
  }
  std::string gpt_model;
  if (absl::Status s = f.String("gpt_model", &gpt_model); !s.ok()) return s;
  if (!gpt_model.empty()) {
    if (absl::Status s = SetShape(c, gpt_model, path); !s.ok()) return s;
  }
  for (const auto& [key, out] :
       std::vector<std::pair<const char*, int32_t*>>{{"dim", &c.dim},
                                                     {"n_layer", &c.n_layer},
                                                     {"n_head", &c.n_head},
                                                     {"n_kv_head", &c.n_kv_head},
                                                     {"multiple_of", &multiple_of},
                                                     {"num_classes", &c.num_classes},
                                                     {"image_size", &c.image_size},
                                                     {"downsample_size", &c.downsample},
                                                     {"cls_token_num", &c.cls_token_num},
                                                     {"caption_dim", &c.caption_dim},
                                                     {"codebook_size", &c.vq.codebook_size},
                                                     {"codebook_embed_dim", &c.vq.codebook_embed_dim},
                                                     {"vq_ch", &c.vq.ch},
                                                     {"vq_z_channels", &c.vq.z_channels},
                                                     {"vq_num_res_blocks", &c.vq.num_res_blocks}}) {
    if (absl::Status s = f.PositiveInt(key, out, /*required=*/false); !s.ok()) return s;
  }
  if (f.Get("dim") != nullptr && gpt_model.empty()) c.gpt_model = "custom";
  if (absl::Status s = f.SmallIntList("vq_ch_mult", "must be a non-empty list of positive integers", &c.vq.ch_mult);
      !s.ok())
    return s;
  double rope = c.rope_base, eps = c.norm_eps;
  if (absl::Status s = f.Positive("rope_base", &rope); !s.ok()) return s;
  if (absl::Status s = f.Positive("norm_eps", &eps); !s.ok()) return s;
  if (absl::Status s = f.Positive("ffn_dim_multiplier", &ffn_multiplier); !s.ok()) return s;
  c.rope_base = static_cast<float>(rope);
  c.norm_eps = static_cast<float>(eps);
  if (absl::Status s = f.String("gpt_ckpt", &c.gpt_file); !s.ok()) return s;
  if (absl::Status s = f.String("vq_ckpt", &c.vq_file); !s.ok()) return s;
  if (absl::Status s = f.String("t5_dir", &c.t5_dir); !s.ok()) return s;
  double dropout = 0.1;
  if (const json* v = f.Get("class_dropout_prob"); v != nullptr) {
    if (!v->is_number() || v->get<double>() < 0) return f.Error("class_dropout_prob", "must be a number >= 0");
    dropout = v->get<double>();
  }
  class_dropout_row = dropout > 0 ? 1 : 0;
  if (c.gpt_model.empty()) return f.Error("gpt_model", "is missing (or give dim, n_layer, n_head)");
  return absl::OkStatus();
}

}  // namespace

namespace {

// The derived fields (gpt.py's FeedForward width, LabelEmbedder's rows, the VQ's sizes).
void Finish(LlamaGenConfig& c, double ffn_multiplier, int32_t multiple_of, int32_t uncond_row) {
  c.class_rows = c.num_classes + uncond_row;
  c.ffn_hidden = FfnHidden(c.dim, ffn_multiplier, multiple_of);
  c.vq.image_token_size = c.vq.codebook_size;
  c.vq.n_embed = c.vq.codebook_embed_dim;
  c.vq.image_size = c.image_size;
}

}  // namespace

absl::StatusOr<LlamaGenConfig> PublishedLlamaGenConfig(const std::string& size, int32_t image_size) {
  LlamaGenConfig c;
  c.vq.cls = "VQ-16";
  if (absl::Status s = SetShape(c, "GPT-" + size, "LlamaGen"); !s.ok()) return s;
  if (image_size <= 0 || image_size % c.downsample != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaGen: image size ", image_size, " is not a positive multiple of 16"));
  }
  c.image_size = image_size;
  c.n_kv_head = c.n_head;
  c.gpt_file = absl::StrCat("c2i_", size, "_", image_size, ".pt");
  c.vq_file = "vq_ds16_c2i.pt";
  Finish(c, /*ffn_multiplier=*/0, /*multiple_of=*/256, /*uncond_row=*/1);
  return c;
}

int32_t FfnHidden(int32_t dim, double ffn_dim_multiplier, int32_t multiple_of) {
  int64_t hidden = static_cast<int64_t>(2.0 * (4 * int64_t{dim}) / 3.0);
  if (ffn_dim_multiplier > 0) hidden = static_cast<int64_t>(ffn_dim_multiplier * static_cast<double>(hidden));
  if (hidden % multiple_of != 0) hidden += multiple_of - hidden % multiple_of;
  return static_cast<int32_t>(hidden);
}

bool IsC2iFileName(const std::string& name) { return std::regex_match(name, C2iName()); }
bool IsT2iFileName(const std::string& name) { return std::regex_match(name, T2iName()); }

absl::StatusOr<LlamaGenConfig> LoadLlamaGenConfig(const std::string& model_dir, const std::string& t5_dir) {
  LlamaGenConfig c;
  c.vq.cls = "VQ-16";
  double ffn_multiplier = 0;  // ModelArgs.ffn_dim_multiplier None
  int32_t multiple_of = 256;
  int32_t uncond_row = 1;  // class_dropout_prob 0.1 > 0: LabelEmbedder's extra row
  const fs::path config_path = fs::path(model_dir) / "config.json";
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    if (absl::Status s = ReadConfigJson(config_path.string(), c, ffn_multiplier, multiple_of, uncond_row); !s.ok()) {
      return s;
    }
  }
  if (c.gpt_file.empty()) {
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(model_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (IsC2iFileName(name) || IsT2iFileName(name)) found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    if (found.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_dir,
                       ": a LlamaGen directory needs exactly one c2i_<B|L|XL|XXL|XXXL|1B|3B|7B>_<256|384|512>.pt or "
                       "t2i_<size>_stage<k>_<px>.pt (found ",
                       found.empty() ? "none" : absl::StrJoin(found, ", "), "), or config.json's gpt_ckpt"));
    }
    c.gpt_file = found.front();
    std::smatch m;
    const bool t2i = std::regex_match(c.gpt_file, m, T2iName());
    if (!t2i) std::regex_match(c.gpt_file, m, C2iName());
    if (t2i && !c.text_conditional) {
      c.text_conditional = true;
      c.cls_token_num = 120;  // sample_t2i.py's --cls-token-num
    }
    if (c.gpt_model.empty()) {
      if (absl::Status s = SetShape(c, "GPT-" + m[1].str(), c.gpt_file); !s.ok()) return s;
      c.image_size = std::stoi(m[2].str());
    }
  }
  if (c.vq_file.empty()) c.vq_file = c.text_conditional ? "vq_ds16_t2i.pt" : "vq_ds16_c2i.pt";
  for (const std::string& file : {c.gpt_file, c.vq_file}) {
    if (!fs::is_regular_file(fs::path(model_dir) / file, ec)) {
      return absl::NotFoundError(absl::StrCat(model_dir, ": ", file, " is missing (LlamaGen's ",
                                              file == c.vq_file ? "VQ-16 image decoder" : "GPT weights", ")"));
    }
  }
  if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
  if (c.dim % c.n_head != 0 || c.n_head % c.n_kv_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": dim ", c.dim, " / n_head ", c.n_head, " / n_kv_head ",
                                                   c.n_kv_head, " do not divide"));
  }
  if (c.image_size % c.downsample != 0 || c.vq.downsample() != c.downsample) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": image_size ", c.image_size, " with downsample_size ",
                                                   c.downsample, " and VQ ch_mult of ", c.vq.ch_mult.size(),
                                                   " levels do not agree"));
  }
  if (!c.text_conditional && c.cls_token_num != 1) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": cls_token_num ", c.cls_token_num,
                                                   ": a class-conditional model has one class token"));
  }
  if (c.text_conditional) {
    // The T5 directory: the option, config.json's t5_dir, else the published places.
    if (!t5_dir.empty()) c.t5_dir = t5_dir;
    std::vector<std::string> candidates;
    if (!c.t5_dir.empty()) {
      candidates.push_back(fs::path(c.t5_dir).is_absolute() ? c.t5_dir : (fs::path(model_dir) / c.t5_dir).string());
    } else {
      candidates = {(fs::path(model_dir) / "t5-ckpt" / "flan-t5-xl").string(),
                    (fs::path(model_dir) / "flan-t5-xl").string()};
    }
    c.t5_dir.clear();
    for (const std::string& dir : candidates) {
      if (fs::is_regular_file(fs::path(dir) / "config.json", ec)) {
        c.t5_dir = dir;
        break;
      }
    }
    if (c.t5_dir.empty()) {
      return absl::NotFoundError(absl::StrCat(model_dir,
                                              ": the T5 text encoder is missing (a hub directory with "
                                              "config.json, spiece.model and the weights, looked for in ",
                                              absl::StrJoin(candidates, ", "),
                                              "; download google/flan-t5-xl there, or give family option t5_dir)"));
    }
    if (!fs::is_regular_file(fs::path(c.t5_dir) / "spiece.model", ec)) {
      return absl::NotFoundError(absl::StrCat(c.t5_dir, ": spiece.model is missing (T5's SentencePiece tokenizer)"));
    }
  }
  if (!c.text_conditional && uncond_row == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_dir, ": class_dropout_prob 0 leaves no unconditional class row, which guidance needs"));
  }
  Finish(c, ffn_multiplier, multiple_of, uncond_row);
  return c;
}

}  // namespace argen::llamagen
