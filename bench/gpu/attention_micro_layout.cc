#include "bench/gpu/attention_micro_layout.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argen::bench {

absl::StatusOr<AttentionMicroLayout> LayOutAttentionMicro(const AttentionMicroShape& s, bool sparse) {
  const std::pair<const char*, int32_t> positive[] = {
      {"rows", s.rows},     {"heads", s.heads},           {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim},
      {"layers", s.layers}, {"prompt_len", s.prompt_len}, {"l_dec", s.l_dec}};
  for (const auto& [name, value] : positive) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat("attention micro: ", name, " is ", value));
  }
  if (s.heads % s.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention micro: heads (", s.heads, ") is not a multiple of kv_heads (", s.kv_heads, ")"));
  }
  if (sparse && (s.n_att <= 0 || s.n_att > s.n_slots)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention micro: n_att (", s.n_att, ") must be in [1, n_slots (", s.n_slots, ")]"));
  }
  AttentionMicroLayout l;
  l.capacity = s.prompt_len + (sparse ? s.n_slots : s.l_dec);
  l.region = 2LL * s.layers * s.kv_heads * l.capacity * s.head_dim;
  l.stride = std::max(s.n_att, 1);
  l.lists_per_layer = int64_t{s.rows} * s.kv_heads;
  l.keys = s.prompt_len + (sparse ? s.n_att : s.l_dec);
  l.bytes = static_cast<double>(s.rows) * s.kv_heads * l.keys * s.head_dim * 2 * 2 +
            (sparse ? static_cast<double>(s.rows) * s.kv_heads * s.n_att * 4 * 2 : 0.0);
  return l;
}

}  // namespace argen::bench
