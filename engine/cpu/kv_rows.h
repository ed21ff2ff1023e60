// The CPU backend's KV cache: one region per row, allocated whole when the KV
// manager places the row (prompt + the policy's decode slots, every layer and
// kv head) and freed with it. Each row also holds its sparsity-policy state
// (kernels/sparse/policy.h) for every (layer, kv_head).
//
// Layout of a row, per layer: K and V as [kv_head][prompt_len + n_slots][head_dim]
// f32, the layout engine/cpu/sparse_attention.h reads (kv_cache_dtype fp8:
// the same f32 arrays holding values rounded through e4m3, StoreKv).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "kernels/sparse/policy.h"

namespace argen::cpu {

// model::RowState holds the prompt length, policy, step and prefilled state.
struct KvRow : model::RowState {
  std::vector<float> k, v;           // [layer][kv_head][stored_prompt + n_slots][head_dim]
  std::vector<int32_t> policy_ints;  // [layer][kv_head][layout.ints_per_head]
  std::vector<float> policy_floats;  // [layer][kv_head][layout.floats_per_head]
  // Prompt positions held here: prompt_len, or 0 for a row sharing its
  // owner's prompt KV (prompt_source, kept alive until its last sharer goes).
  int32_t stored_prompt = 0;
  const KvRow* prompt_source = nullptr;
  // A prompt row's hidden state of its last prompt position, once filled.
  std::vector<float> last_hidden;
  // A vector model's pair (kept on its cond row): the token vectors its
  // output stage made, [token index][token_dim], and which are made
  // (step_plan.h, kMadeVector inputs). Grown as tokens are made.
  std::vector<float> made_vectors;
  std::vector<uint8_t> made;
  bool Made(int32_t t) const { return t >= 0 && t < static_cast<int32_t>(made.size()) && made[t] != 0; }

  int64_t positions() const { return int64_t{stored_prompt} + layout.n_slots; }
  sparse::PolicyState State(int32_t layer_head) {
    return {policy_ints.data() + int64_t{layer_head} * layout.ints_per_head,
            policy_floats.data() + int64_t{layer_head} * layout.floats_per_head};
  }
};

// Stores one position's key and value of one kv head (head_dim floats each)
// into the row: as they are, or, for kv_cache_dtype fp8, rounded through
// e4m3 with a scale per vector exactly as the CUDA backend stores them
// (kernels/kv_fp8.h). The CPU keeps f32 either way: fp8 here is the
// numerical reference, not a memory saving.
void StoreKv(const KvRow& row, const float* k, const float* v, int32_t head_dim, float* k_dst, float* v_dst);

// The CPU device's row sizes (what the KV manager places): the K/V arrays in
// f32 (the policy state is a few ints per slot of host memory beside them); a
// prompt row adds its last position's hidden state.
class CpuRowSizer final : public model::RowSizer {
 public:
  explicit CpuRowSizer(const model::StackConfig& stack);
  int64_t BytesPerTokenRow() const;  // K+V f32 of one position, all layers
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override;
  int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override;
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override;

 private:
  int32_t layers_, kv_heads_, head_dim_, hidden_size_;
};

// The rows' storage: the KV manager (engine/kv/kv_manager.h) places the rows
// and keeps their table; Init gives a placed row its arrays.
class KvRows {
 public:
  explicit KvRows(const model::StackConfig& stack);
  int32_t hidden_size() const { return hidden_size_; }
  const CpuRowSizer& sizer() const { return sizer_; }

  void SetTable(const model::RowTable* table) { table_ = table; }
  // A placed row's arrays (prompt_source: the row whose prompt KV it reads, or null).
  void Init(KvRow& row, const KvRow* prompt_source) const;

  // nullptr if `id` is not a live row; FindAny also finds hidden ones.
  KvRow* Find(model::RowId id) { return table_ == nullptr ? nullptr : static_cast<KvRow*>(table_->Find(id)); }
  const KvRow* FindAny(model::RowId id) const {
    return table_ == nullptr ? nullptr : static_cast<const KvRow*>(table_->FindAny(id));
  }

  // A row's prompt K (V) block of layer `layer`: [kv_head][prompt positions][head_dim],
  // `PromptHeadStride` floats apart per kv head; the owner's for a sharing row.
  const float* PromptK(const KvRow& row, int32_t layer) const;
  const float* PromptV(const KvRow& row, int32_t layer) const;
  int64_t PromptHeadStride(const KvRow& row) const;

  // Start of layer `layer`'s K (or V) block of a row.
  float* LayerK(KvRow& row, int32_t layer) const { return row.k.data() + layer * LayerFloats(row); }
  float* LayerV(KvRow& row, int32_t layer) const { return row.v.data() + layer * LayerFloats(row); }
  int64_t LayerFloats(const KvRow& row) const { return int64_t{kv_heads_} * row.positions() * head_dim_; }

 private:
  int32_t layers_, kv_heads_, head_dim_, hidden_size_;
  CpuRowSizer sizer_;
  const model::RowTable* table_ = nullptr;
};

}  // namespace argen::cpu
