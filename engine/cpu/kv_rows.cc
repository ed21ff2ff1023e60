#include "engine/cpu/kv_rows.h"

#include <cstring>

#include "engine/sparse/policy_params.h"
#include "kernels/kv_fp8.h"

namespace argen::cpu {

void StoreKv(const KvRow& row, const float* k, const float* v, int32_t head_dim, float* k_dst, float* v_dst) {
  std::memcpy(k_dst, k, sizeof(float) * head_dim);
  std::memcpy(v_dst, v, sizeof(float) * head_dim);
  if (row.policy.kv_format == sparse::KvFormat::kFp8E4m3) {
    kernels::RoundThroughE4m3(k_dst, head_dim);
    kernels::RoundThroughE4m3(v_dst, head_dim);
  }
}

CpuRowSizer::CpuRowSizer(const model::StackConfig& stack)
    : layers_(stack.num_layers),
      kv_heads_(stack.num_kv_heads),
      head_dim_(stack.head_dim),
      hidden_size_(stack.hidden_size) {}

int64_t CpuRowSizer::BytesPerTokenRow() const {
  return int64_t{2} * layers_ * kv_heads_ * head_dim_ * static_cast<int64_t>(sizeof(float));
}

int64_t CpuRowSizer::RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const {
  return sparse::KvBytes(policy, prompt_len, 1, layers_, kv_heads_, head_dim_, sizeof(float));
}

int64_t CpuRowSizer::SharingRowBytes(int32_t /*prompt_len*/, const sparse::ResolvedPolicy& policy) const {
  return RowBytes(0, policy);
}

int64_t CpuRowSizer::PromptRowBytes(int32_t prompt_len, sparse::KvFormat /*format*/) const {
  return BytesPerTokenRow() * prompt_len + int64_t{hidden_size_} * static_cast<int64_t>(sizeof(float));
}

KvRows::KvRows(const model::StackConfig& stack)
    : layers_(stack.num_layers),
      kv_heads_(stack.num_kv_heads),
      head_dim_(stack.head_dim),
      hidden_size_(stack.hidden_size),
      sizer_(stack) {}

void KvRows::Init(KvRow& row, const KvRow* prompt_source) const {
  // A sharing row holds its decode slots only; a prompt row its prompt and last hidden state.
  row.stored_prompt = prompt_source != nullptr ? 0 : row.prompt_len;
  row.prompt_source = prompt_source;
  if (row.prompt_row) row.last_hidden.assign(hidden_size_, 0.0f);
  const int64_t floats = int64_t{layers_} * kv_heads_ * row.positions() * head_dim_;
  row.k.assign(floats, 0.0f);
  row.v.assign(floats, 0.0f);
  const int64_t heads = int64_t{layers_} * kv_heads_;
  row.policy_ints.assign(heads * row.layout.ints_per_head, 0);
  row.policy_floats.assign(heads * row.layout.floats_per_head, 0.0f);
  for (int32_t h = 0; h < heads; ++h) sparse::InitState(row.policy, row.layout, row.State(h), h);
}

const float* KvRows::PromptK(const KvRow& row, int32_t layer) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.k.data() + layer * LayerFloats(src);
}

const float* KvRows::PromptV(const KvRow& row, int32_t layer) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.v.data() + layer * LayerFloats(src);
}

int64_t KvRows::PromptHeadStride(const KvRow& row) const {
  const KvRow& src = row.prompt_source != nullptr ? *row.prompt_source : row;
  return src.positions() * head_dim_;
}

}  // namespace argen::cpu
