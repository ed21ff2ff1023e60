#include "engine/families/anole/meta_checkpoint.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/checkpoint/weights_file.h"

namespace argen::anole {
namespace {

using checkpoint::Checkpoint;
using checkpoint::TensorInfo;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

enum class Reorder { kNone, kRotaryRows, kNormVector };

struct Mapped {
  std::string meta_name;
  Reorder reorder = Reorder::kNone;
  TensorInfo info;  // HF name and shape
};

class MetaChameleonCheckpoint final : public Checkpoint {
 public:
  MetaChameleonCheckpoint(std::unique_ptr<Checkpoint> inner, std::map<std::string, Mapped, std::less<>> tensors,
                          int32_t head_dim)
      : inner_(std::move(inner)), tensors_(std::move(tensors)), head_dim_(head_dim) {}

  const std::string& dir() const override { return inner_->dir(); }
  bool Has(std::string_view name) const override { return tensors_.find(name) != tensors_.end(); }

  absl::StatusOr<const TensorInfo*> Find(std::string_view name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      return absl::NotFoundError(
          absl::StrCat(dir(), ": tensor '", Sv(name), "' has no source in Meta's Chameleon layout"));
    }
    return &it->second.info;
  }

  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    absl::StatusOr<const Mapped*> m = Lookup(name, shape);
    if (!m.ok()) return m.status();
    const Mapped& t = **m;
    absl::StatusOr<const TensorInfo*> stored = inner_->Find(t.meta_name);
    if (!stored.ok()) return stored.status();
    absl::StatusOr<std::vector<float>> v = inner_->LoadF32(t.meta_name, (*stored)->shape);
    if (!v.ok() || t.reorder == Reorder::kNone) return v;
    const int64_t cols = t.reorder == Reorder::kRotaryRows ? t.info.shape[1] : 1;
    const int64_t rows = static_cast<int64_t>(v->size()) / cols;
    std::vector<float> out(v->size());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = MetaRowOfHfRow(r, head_dim_);
      std::copy(v->begin() + from * cols, v->begin() + (from + 1) * cols, out.begin() + r * cols);
    }
    return out;
  }

  absl::Status ReadRowsF32(std::string_view name, const int32_t* rows, int64_t n_rows, float* out) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return Find(name).status();
    const Mapped& t = it->second;
    if (t.reorder == Reorder::kNone) return inner_->ReadRowsF32(t.meta_name, rows, n_rows, out);
    absl::StatusOr<std::vector<float>> all = LoadF32(name, t.info.shape);
    if (!all.ok()) return all.status();
    const int64_t cols = t.info.shape.size() == 2 ? t.info.shape[1] : 1;
    const int64_t n = static_cast<int64_t>(all->size()) / cols;
    for (int64_t i = 0; i < n_rows; ++i) {
      if (rows[i] < 0 || rows[i] >= n) {
        return absl::OutOfRangeError(absl::StrCat(t.info.file, ": row ", rows[i], " of '", t.meta_name, "'"));
      }
      std::copy(all->begin() + rows[i] * cols, all->begin() + (rows[i] + 1) * cols, out + i * cols);
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<const Mapped*> Lookup(std::string_view name, const std::vector<int64_t>& shape) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return Find(name).status();
    if (it->second.info.shape != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(it->second.info.file, ": tensor '", it->second.meta_name, "' (as '", Sv(name), "') has shape [",
                       absl::StrJoin(it->second.info.shape, ", "), "], expected [", absl::StrJoin(shape, ", "), "]"));
    }
    return &it->second;
  }

  std::unique_ptr<Checkpoint> inner_;
  std::map<std::string, Mapped, std::less<>> tensors_;
  int32_t head_dim_;
};

}  // namespace

int64_t MetaRowOfHfRow(int64_t hf_row, int32_t head_dim) {
  // The converter's permute: w.view(heads, head_dim/2, 2, in).transpose(1, 2):
  // HF row k * head_dim/2 + i of a head is Meta row 2i + k.
  const int64_t half = head_dim / 2;
  const int64_t head = hf_row / head_dim, j = hf_row % head_dim;
  const int64_t k = j / half, i = j % half;
  return head * head_dim + 2 * i + k;
}

absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> OpenMetaChameleon(const std::string& path,
                                                                          const lumina::LuminaConfig& config) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> inner = checkpoint::OpenCheckpointFile(path);
  if (!inner.ok()) return inner.status();
  const int64_t H = config.hidden_size, I = config.intermediate_size, D = config.head_dim;
  const int64_t q_dim = int64_t{config.num_attention_heads} * D, kv_dim = int64_t{config.num_key_value_heads} * D;
  std::map<std::string, Mapped, std::less<>> tensors;
  // Meta name and stored shape -> HF name and shown shape.
  auto add = [&](const std::string& meta, std::vector<int64_t> stored, const std::string& hf,
                 Reorder reorder) -> absl::Status {
    absl::StatusOr<const TensorInfo*> info = (*inner)->Find(meta);
    if (!info.ok()) {
      return absl::NotFoundError(absl::StrCat(path, ": tensor '", meta, "' is missing (Meta's Chameleon layout; ",
                                              "params.json describes ", config.num_hidden_layers, " layers)"));
    }
    if ((*info)->shape != stored) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", meta, "' has shape [",
                                                     absl::StrJoin((*info)->shape, ", "), "], expected [",
                                                     absl::StrJoin(stored, ", "), "] from params.json"));
    }
    Mapped m;
    m.meta_name = meta;
    m.reorder = reorder;
    m.info = **info;
    m.info.name = hf;
    if (reorder == Reorder::kNormVector) m.info.shape = {1, stored[0]};
    if (reorder != Reorder::kNone) {
      m.info.data = nullptr;  // stored in Meta's order: only LoadF32 gives HF's
      m.info.nbytes = 0;
    }
    tensors.emplace(hf, std::move(m));
    return absl::OkStatus();
  };
  const int64_t V = config.vocab_size;
  for (auto [meta, shape, hf] :
       {std::tuple{"tok_embeddings.weight", std::vector<int64_t>{V, H}, "model.embed_tokens.weight"},
        {"norm.weight", {H}, "model.norm.weight"},
        {"output.weight", {V, H}, "lm_head.weight"}}) {
    if (absl::Status s = add(meta, shape, hf, Reorder::kNone); !s.ok()) return s;
  }
  for (int32_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string m = absl::StrCat("layers.", i, "."), h = absl::StrCat("model.layers.", i, ".");
    struct Row {
      std::string meta;
      std::vector<int64_t> shape;
      std::string hf;
      Reorder reorder;
    };
    const std::vector<Row> rows = {
        {"attention.wq.weight", {q_dim, H}, "self_attn.q_proj.weight", Reorder::kRotaryRows},
        {"attention.wk.weight", {kv_dim, H}, "self_attn.k_proj.weight", Reorder::kRotaryRows},
        {"attention.wv.weight", {kv_dim, H}, "self_attn.v_proj.weight", Reorder::kNone},
        {"attention.wo.weight", {H, q_dim}, "self_attn.o_proj.weight", Reorder::kNone},
        {"attention.q_normalization.weight", {D}, "self_attn.q_norm.weight", Reorder::kNormVector},
        {"attention.q_normalization.bias", {D}, "self_attn.q_norm.bias", Reorder::kNormVector},
        {"attention.k_normalization.weight", {D}, "self_attn.k_norm.weight", Reorder::kNormVector},
        {"attention.k_normalization.bias", {D}, "self_attn.k_norm.bias", Reorder::kNormVector},
        {"feed_forward.w1.weight", {I, H}, "mlp.gate_proj.weight", Reorder::kNone},
        {"feed_forward.w3.weight", {I, H}, "mlp.up_proj.weight", Reorder::kNone},
        {"feed_forward.w2.weight", {H, I}, "mlp.down_proj.weight", Reorder::kNone},
        {"attention_norm.weight", {H}, "input_layernorm.weight", Reorder::kNone},
        {"ffn_norm.weight", {H}, "post_attention_layernorm.weight", Reorder::kNone},
    };
    for (const Row& r : rows) {
      if (absl::Status s = add(m + r.meta, r.shape, h + r.hf, r.reorder); !s.ok()) return s;
    }
  }
  return std::unique_ptr<Checkpoint>(
      std::make_unique<MetaChameleonCheckpoint>(*std::move(inner), std::move(tensors), config.head_dim));
}

}  // namespace argen::anole
